//! Checkpoint cost on a generated workspace: time and stored bytes of `begin_turn` for the
//! first snapshot, an unchanged turn, and turns that change 3 files (2 through the file-tool
//! hook, 1 the way bash would), plus rewind timings.
//!
//! `cargo run --release -p reasonix-remote --example checkpoint_bench -- [FILES] [TURNS]`

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_forward::units::bytes as fmt_bytes;
use reasonix_remote::checkpoint::CheckpointStore;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let files: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let turns: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10);
    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().join("ws");
    let state = tmp.path().join("state");
    let t = Instant::now();
    generate(&ws, files)?;
    println!(
        "workspace: {files} files, {} of content, generated in {:.2?}",
        fmt_bytes(dir_size(&ws)),
        t.elapsed()
    );

    let store = Arc::new(CheckpointStore::open(&ws, &state)?);
    println!("coverage: {}", store.coverage());
    let hook = store.hook_for("bench");

    let t = Instant::now();
    let first = store.begin_turn("bench", 1)?;
    let first_time = t.elapsed();
    println!(
        "first checkpoint (full snapshot): {:.2?}, stored {}",
        first_time,
        fmt_bytes(store.stats().stored_bytes)
    );

    let t = Instant::now();
    let same = store.begin_turn("bench", 2)?;
    println!(
        "unchanged turn: {:.2?}, added {}",
        t.elapsed(),
        fmt_bytes(same.bytes)
    );
    let _ = first;

    let mut times = Vec::new();
    let mut bytes = Vec::new();
    for turn in 3..3 + turns {
        let before = store.stats().stored_bytes;
        // The previous turn's 3-file change, then this turn's checkpoint.
        let t = Instant::now();
        let info = store.begin_turn("bench", turn)?;
        times.push(t.elapsed());
        assert!(info.covered_bash);
        for k in 0..2 {
            let p = ws.join(format!(
                "d{:03}/f{:03}.txt",
                (turn as usize * 7 + k) % 100,
                turn % 100
            ));
            hook.before_write(&p);
            std::fs::write(&p, format!("turn {turn} tool edit {k}\n").repeat(20))?;
        }
        let p = ws.join(format!(
            "d{:03}/f{:03}.txt",
            (turn as usize * 13) % 100,
            (turn + 50) % 100
        ));
        std::fs::write(&p, format!("turn {turn} bash edit\n").repeat(20))?;
        bytes.push(store.stats().stored_bytes - before);
    }
    // The first measured begin_turn saw no change yet (turn 2 changed nothing): report the rest.
    let changed_times = &times[1..];
    let changed_bytes = &bytes[1..];
    println!(
        "3-file change per turn ({} turns): checkpoint time median {:.2?}, mean {:.2?}, max {:.2?}",
        changed_times.len(),
        median(changed_times),
        mean(changed_times),
        changed_times.iter().max().copied().unwrap_or_default()
    );
    let avg_bytes = changed_bytes.iter().sum::<u64>() / changed_bytes.len().max(1) as u64;
    println!(
        "stored bytes per turn (shadow objects + file-tool prior contents): mean {} ({} B), min {} B, max {} B",
        fmt_bytes(avg_bytes),
        avg_bytes,
        changed_bytes.iter().min().unwrap_or(&0),
        changed_bytes.iter().max().unwrap_or(&0)
    );
    let t = Instant::now();
    let list = store.list("bench")?;
    println!(
        "list of {} checkpoints with changed files: {:.2?}",
        list.len(),
        t.elapsed()
    );

    let t = Instant::now();
    let dry = store.rewind("bench", 3, true)?;
    println!(
        "rewind dry run over {} turns: {:.2?} ({})",
        turns - 1,
        t.elapsed(),
        dry.summary()
    );
    let t = Instant::now();
    let r = store.rewind("bench", 3, false)?;
    println!("rewind: {:.2?} ({})", t.elapsed(), r.summary());
    let t = Instant::now();
    store.rewind_to(r.undo_checkpoint.as_deref().unwrap_or_default(), false)?;
    println!("undo of the rewind: {:.2?}", t.elapsed());
    let s = store.stats();
    println!(
        "store: {} checkpoints, {} (shadow {}, file-tool contents {}), limits: {} checkpoints, {}, {} per file",
        s.checkpoints,
        fmt_bytes(s.stored_bytes),
        fmt_bytes(s.shadow_bytes),
        fmt_bytes(s.blob_bytes),
        s.limits.max_checkpoints,
        fmt_bytes(s.limits.max_store_bytes),
        fmt_bytes(s.limits.max_file_bytes)
    );
    Ok(())
}

fn generate(ws: &Path, files: usize) -> std::io::Result<()> {
    let dirs = 100;
    for i in 0..files {
        let dir = ws.join(format!("d{:03}", i % dirs));
        if i < dirs {
            std::fs::create_dir_all(&dir)?;
        }
        let body = format!("// file {i}\nfn f{i}() -> u64 {{ {i} }}\n").repeat(8);
        std::fs::write(dir.join(format!("f{:03}.txt", i / dirs)), body)?;
    }
    Ok(())
}

fn dir_size(p: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![p.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get(s.len() / 2).copied().unwrap_or_default()
}

fn mean(v: &[Duration]) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.iter().sum::<Duration>() / v.len() as u32
}
