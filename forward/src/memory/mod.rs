//! Memory: facts that outlive sessions (the contract is `docs/MEMORY.md`).
//!
//! The pure parts both binaries share: the fact file format ([`fact`]), the store directory
//! with its atomic writes, revisions and archive ([`store`]), the secret check ([`secret`])
//! and the BM25 recall ([`recall`]). The laptop keeps the user's global store with them; the
//! host keeps each workspace's project store and gets the global facts through the link
//! ([`crate::proto::MemorySettings`]) for recall only.

pub mod fact;
pub mod ops;
pub mod recall;
pub mod rewind;
pub mod secret;
pub mod store;

pub use fact::{Fact, FactType, Scope};
pub use store::{Loaded, Origin, Store, StoreError};

/// Where the user's global facts live: `<state home>/memory` (`$REASONIX_HOME/memory` or
/// `~/.reasonix/memory`).
pub fn global_dir(state_home: &std::path::Path) -> std::path::PathBuf {
    state_home.join("memory")
}

/// Where a workspace's project facts live on its host: `<state home>/project-memory/<key>`
/// (in the state home beside the session journals, so they survive daemon upgrades,
/// reinstalls of the binary and `remote stop`).
pub fn project_dir(state_home: &std::path::Path, workspace_key: &str) -> std::path::PathBuf {
    state_home.join("project-memory").join(workspace_key)
}

/// Where `reasonix memory export` writes project facts inside a repository (read back as
/// project facts only, never global, never pinned).
pub const EXPORT_DIR: &str = ".reasonix/memory";

/// Most bytes of global facts a laptop sends with one session open.
pub const MAX_GLOBAL_BYTES: usize = 4 * 1024 * 1024;

/// Short stable key of a canonical workspace path (the same key the host's state uses).
pub fn workspace_key(workspace: &std::path::Path) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    hex::encode(&digest[..8])
}
