//! Driver of `bench/upgrade_delta.sh`: sizes of the full and delta uploads between two real
//! builds, and the time of each install over a real SSH connection.
//!
//! `upgrade_delta OLD NEW [user@host -p PORT -i KEY -k KNOWN_HOSTS]`. Without a destination
//! only sizes and laptop-side times are printed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use reasonix_bootstrap::{
    connect, install, payload, Codec, Destination, NonInteractivePrompter, ShippedBinaries,
    SshOptions, Target, Transfer,
};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [old, new, rest @ ..] = args.as_slice() else {
        return Err(
            "usage: upgrade_delta OLD NEW [user@host -p PORT -i KEY -k KNOWN_HOSTS]".into(),
        );
    };
    let (a, b) = (std::fs::read(old)?, std::fs::read(new)?);
    println!("binary sizes: old {} bytes, new {} bytes", a.len(), b.len());
    let mut best_full = usize::MAX;
    for c in [Codec::Xz, Codec::Zstd, Codec::Gzip] {
        let t = Instant::now();
        let z = c.compress(&b)?;
        println!(
            "full {c:>5}: {:>8} bytes ({:.1} %), compressed in {:.2} s",
            z.len(),
            100.0 * z.len() as f64 / b.len() as f64,
            t.elapsed().as_secs_f64()
        );
        best_full = best_full.min(z.len());
    }
    let t = Instant::now();
    let raw = payload::raw_delta(&a, &b)?;
    let diff_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let dz = Codec::Xz.compress(&raw)?;
    println!(
        "delta: raw {} bytes, xz {} bytes; bidiff {:.2} s + xz {:.2} s",
        raw.len(),
        dz.len(),
        diff_s,
        t.elapsed().as_secs_f64()
    );
    println!(
        "DELTA_RATIO {:.1} % of the full xz upload",
        100.0 * dz.len() as f64 / best_full as f64
    );
    let [dest, rest @ ..] = rest else {
        return Ok(());
    };
    let mut opts = SshOptions {
        config_file: Some(PathBuf::from("none")),
        ..SshOptions::default()
    };
    let mut it = rest.iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or("missing value")?;
        match flag.as_str() {
            "-p" => opts.port = Some(v.parse()?),
            "-i" => opts.identity_files.push(PathBuf::from(v)),
            "-k" => opts.push_option(&format!("UserKnownHostsFile={v}"))?,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    opts.push_option("IdentitiesOnly=yes")?;
    let dest = Destination::parse(dest)?;
    let conn = connect(&dest, &opts, Arc::new(NonInteractivePrompter)).await?;
    let cache = tempfile::tempdir()?;
    let bins = |p: &str, cached: bool| {
        let b = ShippedBinaries::new().with_file(Target::X86_64Linux, p);
        if cached {
            b.with_cache_dir(cache.path())
        } else {
            b
        }
    };
    let timed = |label: &'static str, r: &reasonix_bootstrap::RemoteInstall, t: Instant| {
        let kind = match &r.transfer {
            Transfer::Reused => "reused".to_string(),
            Transfer::Full { codec } => format!("full {codec}"),
            Transfer::Delta { codec, base, .. } => format!("delta {codec} against {base}"),
        };
        let s = t.elapsed().as_secs_f64();
        println!("{label}: {kind}, {} bytes sent, {s:.2} s", r.bytes_sent);
        s
    };
    // The old build as a host would have it, then the upgrade by delta.
    let t = Instant::now();
    let r = install(&conn, "bench-old", &bins(old, true)).await?;
    timed("install old build", &r, t);
    let t = Instant::now();
    let r = install(&conn, "bench-new", &bins(new, true)).await?;
    let delta_s = timed("upgrade (delta)", &r, t);
    let sent_delta = r.bytes_sent;
    // The same upgrade without a laptop cache: the whole binary.
    conn.run_script(&format!("rm -f '{}'", r.path)).await?;
    let t = Instant::now();
    let r = install(&conn, "bench-new", &bins(new, false)).await?;
    let full_s = timed("upgrade (full) ", &r, t);
    println!(
        "UPGRADE bytes: delta {sent_delta} vs full {} ({:.1} %); time: delta {delta_s:.2} s vs full {full_s:.2} s (ratio {:.2})",
        r.bytes_sent,
        100.0 * sent_delta as f64 / r.bytes_sent as f64,
        delta_s / full_s
    );
    Ok(())
}
