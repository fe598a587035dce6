//! Fuzz targets for every parser that reads bytes someone else controls.
//!
//! Each target is a plain `fn(&[u8])` that must never panic, hang or grow without bound for
//! any input, and checks what it can beyond "no crash" (decoding in chunks equals decoding
//! at once, a decoded frame re-encodes to the same bytes, ...). The same functions run in
//! three ways:
//!
//! * under libFuzzer (coverage-guided): `fuzz/run.sh [TARGET] [SECONDS]` on the stable
//!   toolchain, or `cargo fuzz run TARGET` where cargo-fuzz is installed;
//! * in `cargo nextest` (`fuzz/tests/corpus.rs`): every committed corpus file, every kept
//!   crash input and a bounded number of seeded random mutations of them;
//! * from any test, by calling them.
//!
//! The committed seed corpus lives in `fuzz/corpus/<target>/`; see `docs/PROTOCOL.md`
//! ("Hostile input").

mod link;
mod mcp;
mod mutate;
mod policy;
mod sse;
mod ssh;

pub use link::{frame, handshake, link, preamble};
pub use mcp::mcp_lines;
pub use mutate::{mutate, Rng};
pub use policy::{bash_split, policy_rules};
pub use sse::sse;
pub use ssh::{known_hosts, ssh_config};

/// A fuzz target: takes any bytes, panics only on a bug.
pub type Target = fn(&[u8]);

/// Every target by name, in the order `fuzz/run.sh` runs them.
pub const TARGETS: &[(&str, Target)] = &[
    ("frame", frame),
    ("link", link),
    ("preamble", preamble),
    ("handshake", handshake),
    ("mcp_lines", mcp_lines),
    ("ssh_config", ssh_config),
    ("known_hosts", known_hosts),
    ("policy_rules", policy_rules),
    ("bash_split", bash_split),
    ("sse", sse),
];

/// One current-thread runtime per process for the async targets: building a runtime per
/// input would dominate the time of every run.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        // Only fails when the OS refuses an epoll fd or a timer; nothing can be fuzzed then.
        #[allow(clippy::expect_used)]
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime for the fuzz targets")
    })
}

/// Lossy text view of fuzz bytes (most parsers take `&str`).
pub(crate) fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}
