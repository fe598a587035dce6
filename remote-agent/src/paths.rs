//! Where the host keeps its state: the state home (`~/.reasonix`), the per-workspace run
//! directory with the daemon socket, session journals and daemon logs.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// All paths of one (user, workspace) pair.
#[derive(Debug, Clone)]
pub struct HostPaths {
    /// Canonical workspace directory.
    pub workspace: PathBuf,
    /// `$REASONIX_HOME` or `~/.reasonix`.
    pub home: PathBuf,
    /// Directory holding the socket and lock (0700).
    pub run_dir: PathBuf,
    /// The daemon's unix socket.
    pub socket: PathBuf,
    /// Lock file held by the running daemon.
    pub lock: PathBuf,
    /// Directory of this workspace's session journals.
    pub sessions_dir: PathBuf,
    /// The daemon's JSON-lines log.
    pub log_file: PathBuf,
    /// Marker describing the last daemon run (pid, clean shutdown).
    pub daemon_state: PathBuf,
    /// Short stable key of the workspace (hex of a hash of its path).
    pub key: String,
}

/// `$REASONIX_HOME` or `~/.reasonix`.
pub fn state_home() -> PathBuf {
    if let Some(h) = std::env::var_os("REASONIX_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    home_dir().join(".reasonix")
}

/// The user's home directory (`$HOME`, else the passwd entry, else `/`).
pub fn home_dir() -> PathBuf {
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    // SAFETY: getpwuid returns a pointer to static storage or null; we copy out at once.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if !pw.is_null() && !(*pw).pw_dir.is_null() {
            let dir = std::ffi::CStr::from_ptr((*pw).pw_dir);
            return PathBuf::from(dir.to_string_lossy().into_owned());
        }
    }
    PathBuf::from("/")
}

impl HostPaths {
    /// Compute the paths for `workspace` (which must exist) and create the directories
    /// with private modes.
    pub fn for_workspace(workspace: &Path) -> io::Result<HostPaths> {
        HostPaths::for_workspace_in(&state_home(), workspace)
    }

    /// [`HostPaths::for_workspace`] with the state home given instead of read from the
    /// environment (in-process tests run many homes in one process).
    pub fn for_workspace_in(home: &Path, workspace: &Path) -> io::Result<HostPaths> {
        let paths = HostPaths::locate_in(home, workspace)?;
        private_dir(&paths.home)?;
        private_dir(&paths.run_dir)?;
        private_dir(&paths.sessions_dir)?;
        private_dir(&paths.home.join("logs"))?;
        Ok(paths)
    }

    /// The paths for `workspace` (which must exist), without creating anything (for
    /// `reasonix-remote stop`, which must not leave state behind).
    pub fn locate(workspace: &Path) -> io::Result<HostPaths> {
        HostPaths::locate_in(&state_home(), workspace)
    }

    fn locate_in(home: &Path, workspace: &Path) -> io::Result<HostPaths> {
        let home = home.to_path_buf();
        let workspace = workspace.canonicalize().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("workspace {} is not usable: {e}", workspace.display()),
            )
        })?;
        if !workspace.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("workspace {} is not a directory", workspace.display()),
            ));
        }
        let key = workspace_key(&workspace);
        let run_base = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
            Some(d) if Path::new(&d).is_dir() => PathBuf::from(d).join("reasonix"),
            _ => home.join("run"),
        };
        // Unix socket paths are limited to ~108 bytes; fall back to /tmp/reasonix-<uid>.
        let run_dir = if run_base.join(format!("{key}.sock")).as_os_str().len() > 100 {
            // SAFETY: getuid cannot fail.
            PathBuf::from(format!("/tmp/reasonix-{}", unsafe { libc::getuid() }))
        } else {
            run_base
        };
        let sessions_dir = home.join("sessions").join(&key);
        let logs = home.join("logs");
        Ok(HostPaths {
            socket: run_dir.join(format!("{key}.sock")),
            lock: run_dir.join(format!("{key}.lock")),
            log_file: logs.join(format!("daemon-{key}.log")),
            daemon_state: sessions_dir.join("daemon.json"),
            sessions_dir,
            run_dir,
            home,
            workspace,
            key,
        })
    }
}

/// Stable short key of a workspace path.
pub fn workspace_key(workspace: &Path) -> String {
    let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    hex::encode(&digest[..8])
}

/// Create `dir` (and parents) and force mode 0700 on it.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}
