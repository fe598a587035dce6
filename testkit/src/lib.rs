//! Test support shared by the integration tests of every crate: a scripted mock provider
//! (real HTTP + SSE, OpenAI-compatible or Anthropic Messages wire, with a prompt cache like
//! each provider's) and a real OpenSSH `sshd` harness.

pub mod anthropic_cache;
pub mod host_binaries;
pub mod mock_anthropic;
pub mod mock_provider;
pub mod netfault;
pub mod prompt_cache;
pub mod sshd;
