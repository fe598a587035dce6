//! The fuzz targets on the stable toolchain, inside `cargo nextest`: every committed corpus
//! file (seeds and every crash input ever found, which stay fixed), then a bounded number of
//! seeded random mutations of them. Coverage-guided runs are `fuzz/run.sh`.
//!
//! `REASONIX_FUZZ_ITERS` sets the mutations per target (default 500), `REASONIX_FUZZ_SEED`
//! the seed (default fixed, so a failure reproduces).

use std::path::{Path, PathBuf};

use reasonix_fuzz::{mutate, Rng, TARGETS};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).expect("read corpus file"))
        })
        .collect();
    out.sort();
    out
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `f` on `input`; on a panic, saves the input where `fuzz/run.sh` would and says so.
fn run_one(target: &str, f: fn(&[u8]), input: &[u8], what: &str) {
    if std::panic::catch_unwind(|| f(input)).is_err() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-artifacts");
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{target}-{:016x}", hash(input)));
        let _ = std::fs::write(&path, input);
        panic!(
            "target {target} panicked on {what}; input saved to {} ({} bytes: {:?})",
            path.display(),
            input.len(),
            String::from_utf8_lossy(&input[..input.len().min(400)])
        );
    }
}

fn hash(b: &[u8]) -> u64 {
    // FNV-1a: a stable file name and per-target seed, not a security property.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn fuzz(target: &str) {
    let f = TARGETS
        .iter()
        .find(|(n, _)| *n == target)
        .map(|(_, f)| *f)
        .expect("known target");
    let entries = corpus(target);
    assert!(
        entries.len() >= 3,
        "the {target} corpus needs seeds ({} files)",
        entries.len()
    );
    for (name, input) in &entries {
        run_one(target, f, input, &format!("corpus file {name}"));
    }
    let iters = env_u64("REASONIX_FUZZ_ITERS", 500);
    let mut rng = Rng::new(env_u64("REASONIX_FUZZ_SEED", 0x5eed) ^ hash(target.as_bytes()));
    for i in 0..iters {
        let (_, a) = &entries[rng.below(entries.len())];
        let (_, b) = &entries[rng.below(entries.len())];
        let input = mutate(&mut rng, a, b, 8192);
        run_one(target, f, &input, &format!("mutation {i}"));
    }
}

macro_rules! targets {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                fuzz(stringify!($name));
            }
        )*

        #[test]
        fn every_target_has_a_test_and_a_corpus() {
            let tested = [$(stringify!($name)),*];
            for (name, _) in TARGETS {
                assert!(tested.contains(name), "target {name} has no test here");
                assert!(corpus_dir(name).is_dir(), "target {name} has no corpus dir");
            }
        }
    };
}

targets!(
    frame,
    link,
    preamble,
    handshake,
    mcp_lines,
    ssh_config,
    known_hosts,
    policy_rules,
    bash_split,
    sse,
);
