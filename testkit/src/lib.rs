//! Test support shared by the integration tests of every crate: a scripted
//! OpenAI-compatible mock provider (real HTTP + SSE) and a real OpenSSH `sshd` harness.

pub mod host_binaries;
pub mod mock_provider;
pub mod netfault;
pub mod prompt_cache;
pub mod sshd;
