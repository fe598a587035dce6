//! The user's trust records for project hook files (#34), kept on the laptop in
//! `<reasonix home>/hooks-trust.json` (mode 0600): per workspace (named as the status line
//! names it, [`crate::always_scope::workspace_key`]), the workspace-relative path and the
//! SHA-256 of the exact content the user trusted.
//!
//! The host never stores trust: the records travel with every session open
//! ([`reasonix_forward::hooks::HookSettings`]), so nothing running on the host — the model's
//! bash, a hook, a repository's build — can mark a file trusted. A changed file has another
//! hash and is untrusted again.

use std::path::{Path, PathBuf};

use reasonix_forward::hooks::{HookDecl, HookSettings, TrustedHookFile};
use serde::{Deserialize, Serialize};

/// The file name under the Reasonix home.
pub const TRUST_FILE: &str = "hooks-trust.json";

/// One record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Workspace key (`local:/abs/path`, `[user@]host:path`).
    pub workspace: String,
    /// Workspace-relative path of the hook file.
    pub path: String,
    /// SHA-256 of the trusted content.
    pub sha256: String,
    /// When it was trusted (seconds since the Unix epoch).
    pub trusted_at: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    #[serde(default)]
    records: Vec<Record>,
}

/// Why the trust file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// I/O on the file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Not the JSON we write.
    #[error("{}: not a valid trust file ({message}); move it away to start over (every project hook file is then untrusted)", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
}

fn path_in(home: &Path) -> PathBuf {
    home.join(TRUST_FILE)
}

fn read(home: &Path) -> Result<TrustFile, TrustError> {
    let path = path_in(home);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| TrustError::Parse {
            path,
            message: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TrustFile::default()),
        Err(source) => Err(TrustError::Io { path, source }),
    }
}

fn write(home: &Path, file: &TrustFile) -> Result<(), TrustError> {
    let path = path_in(home);
    let io = |source| TrustError::Io {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(home).map_err(io)?;
    let tmp = home.join(format!("{TRUST_FILE}.tmp{}", std::process::id()));
    let text = serde_json::to_vec_pretty(file).unwrap_or_default();
    {
        use std::io::Write;
        let mut f = reasonix_forward::private_fs::open_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io)?;
        f.write_all(&text).map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    std::fs::rename(&tmp, &path).map_err(io)
}

/// The records of `workspace`, as the host takes them. An unreadable trust file trusts
/// nothing (and says why in the log).
pub fn trusted_for(home: &Path, workspace: &str) -> Vec<TrustedHookFile> {
    match read(home) {
        Ok(f) => f
            .records
            .into_iter()
            .filter(|r| r.workspace == workspace)
            .map(|r| TrustedHookFile {
                path: r.path,
                sha256: r.sha256,
            })
            .collect(),
        Err(e) => {
            tracing::warn!("hook trust records not read: {e}");
            Vec::new()
        }
    }
}

/// What a client sends: the user's hooks and this workspace's trust records (none without
/// a workspace key).
pub fn settings(home: &Path, workspace: Option<&str>, user: &[HookDecl]) -> HookSettings {
    HookSettings {
        user: user.to_vec(),
        trusted: workspace.map(|w| trusted_for(home, w)).unwrap_or_default(),
    }
}

/// Trust `sha256` of `path` in `workspace` (replacing an earlier record of that path).
pub fn trust(home: &Path, workspace: &str, path: &str, sha256: &str) -> Result<(), TrustError> {
    let mut f = read(home)?;
    f.records
        .retain(|r| !(r.workspace == workspace && r.path == path));
    f.records.push(Record {
        workspace: workspace.to_string(),
        path: path.to_string(),
        sha256: sha256.to_string(),
        trusted_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default(),
    });
    write(home, &f)
}

/// Forget the records of `workspace` (only `path`'s when given); returns how many went.
pub fn untrust(home: &Path, workspace: &str, path: Option<&str>) -> Result<usize, TrustError> {
    let mut f = read(home)?;
    let before = f.records.len();
    f.records
        .retain(|r| !(r.workspace == workspace && path.is_none_or(|p| r.path == p)));
    let gone = before - f.records.len();
    if gone > 0 {
        write(home, &f)?;
    }
    Ok(gone)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn records_are_per_workspace_and_path() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        assert!(trusted_for(h, "local:/w").is_empty());
        trust(h, "local:/w", ".reasonix/hooks.toml", "aa").unwrap();
        trust(h, "local:/w", ".reasonix/hooks.toml", "bb").unwrap();
        trust(h, "host:/w", ".claude/settings.json", "cc").unwrap();
        assert_eq!(
            trusted_for(h, "local:/w"),
            vec![TrustedHookFile {
                path: ".reasonix/hooks.toml".into(),
                sha256: "bb".into()
            }]
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(h.join(TRUST_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(untrust(h, "local:/w", None).unwrap(), 1);
        assert!(trusted_for(h, "local:/w").is_empty());
        assert_eq!(trusted_for(h, "host:/w").len(), 1);
        std::fs::write(h.join(TRUST_FILE), "{oops").unwrap();
        assert!(trusted_for(h, "host:/w").is_empty());
        assert!(trust(h, "x", "y", "z")
            .unwrap_err()
            .to_string()
            .contains("not a valid trust file"));
    }
}
