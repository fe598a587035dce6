//! What differs between the laptop systems (Linux, macOS, Windows) on the laptop side, one
//! module per concern, so that feature code has no `#[cfg]`: console signals and resizes
//! ([`signals`]), and what local mode (no SSH) can do here ([`local_mode`]). The SSH side's
//! differences (home, agent, prompts) are in `reasonix_bootstrap::platform`, file modes in
//! `reasonix_sftpfs::mode`, process trees in `reasonix_forward::process_group`.

pub mod local_mode;
pub mod signals;

pub use reasonix_bootstrap::platform::{home_dir, Os};
