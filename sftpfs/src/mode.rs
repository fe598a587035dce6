//! Unix permission bits on the local disk, the one place that knows how each system keeps
//! them. Used by [`crate::LocalFs`] and by the laptop's own files (`~/.reasonix`, caches,
//! known_hosts).
//!
//! On Unix the bits are the file's mode. Windows has no mode: files under the user's profile
//! (`%USERPROFILE%`, where Reasonix keeps its files) are readable by that user only through the
//! profile's inherited ACL, which is what `0o600`/`0o700` ask for on Unix. There the bits map
//! to and from the read-only attribute only (owner write bit clear = read-only), and the
//! creation modes are no-ops.

use std::path::Path;

/// The `0o7777` part of a file's mode (Windows: `0o444`/`0o644`, `0o555`/`0o755` for folders).
pub fn permission_bits(m: &std::fs::Metadata) -> u32 {
    imp::permission_bits(m)
}

/// Set a file's permission bits (a `chmod`).
pub fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    imp::set_mode(path, mode)
}

/// Set a file's permission bits (a `chmod`), on tokio's blocking pool.
pub async fn set_mode_async(path: &Path, mode: u32) -> std::io::Result<()> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || set_mode(&path, mode))
        .await
        .map_err(std::io::Error::other)?
}

/// Files `opts` creates get `mode` (less the umask).
pub fn create_with_mode(opts: &mut std::fs::OpenOptions, mode: u32) {
    imp::create_with_mode(opts, mode);
}

/// Files `opts` creates get `mode` (less the umask).
pub fn create_with_mode_async(opts: &mut tokio::fs::OpenOptions, mode: u32) {
    imp::create_with_mode_async(opts, mode);
}

/// Folders `builder` creates get `mode` (less the umask).
pub fn dirs_with_mode(builder: &mut std::fs::DirBuilder, mode: u32) {
    imp::dirs_with_mode(builder, mode);
}

/// Folders `builder` creates get `mode` (less the umask).
pub fn dirs_with_mode_async(builder: &mut tokio::fs::DirBuilder, mode: u32) {
    imp::dirs_with_mode_async(builder, mode);
}

/// What Windows keeps of `mode`: the read-only attribute, set when the owner cannot write.
pub fn readonly_of(mode: u32) -> bool {
    mode & 0o200 == 0
}

/// The mode Windows' attributes stand for (see the module documentation).
pub fn mode_of_attributes(is_dir: bool, readonly: bool) -> u32 {
    match (is_dir, readonly) {
        (true, false) => 0o755,
        (true, true) => 0o555,
        (false, false) => 0o644,
        (false, true) => 0o444,
    }
}

#[cfg(unix)]
mod imp {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    use std::path::Path;

    pub(super) fn permission_bits(m: &std::fs::Metadata) -> u32 {
        m.permissions().mode() & 0o7777
    }

    pub(super) fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }

    pub(super) fn create_with_mode(opts: &mut std::fs::OpenOptions, mode: u32) {
        opts.mode(mode);
    }

    pub(super) fn create_with_mode_async(opts: &mut tokio::fs::OpenOptions, mode: u32) {
        opts.mode(mode);
    }

    pub(super) fn dirs_with_mode(builder: &mut std::fs::DirBuilder, mode: u32) {
        builder.mode(mode);
    }

    pub(super) fn dirs_with_mode_async(builder: &mut tokio::fs::DirBuilder, mode: u32) {
        builder.mode(mode);
    }
}

#[cfg(not(unix))]
mod imp {
    use std::path::Path;

    pub(super) fn permission_bits(m: &std::fs::Metadata) -> u32 {
        super::mode_of_attributes(m.is_dir(), m.permissions().readonly())
    }

    pub(super) fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
        let mut perms = std::fs::metadata(path)?.permissions();
        perms.set_readonly(super::readonly_of(mode));
        std::fs::set_permissions(path, perms)
    }

    pub(super) fn create_with_mode(_opts: &mut std::fs::OpenOptions, _mode: u32) {}

    pub(super) fn create_with_mode_async(_opts: &mut tokio::fs::OpenOptions, _mode: u32) {}

    pub(super) fn dirs_with_mode(_builder: &mut std::fs::DirBuilder, _mode: u32) {}

    pub(super) fn dirs_with_mode_async(_builder: &mut tokio::fs::DirBuilder, _mode: u32) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_attributes_round_trip_through_the_mode() {
        for (mode, ro) in [(0o600, false), (0o644, false), (0o400, true), (0o555, true)] {
            assert_eq!(readonly_of(mode), ro, "{mode:o}");
        }
        assert_eq!(mode_of_attributes(false, readonly_of(0o600)), 0o644);
        assert_eq!(mode_of_attributes(false, readonly_of(0o444)), 0o444);
        assert_eq!(mode_of_attributes(true, readonly_of(0o700)), 0o755);
    }

    #[test]
    fn set_mode_then_read_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        set_mode(&f, 0o444).unwrap();
        let ro = permission_bits(&std::fs::metadata(&f).unwrap());
        assert_eq!(ro & 0o222, 0, "{ro:o}");
        set_mode(&f, 0o600).unwrap();
        let rw = permission_bits(&std::fs::metadata(&f).unwrap());
        assert_ne!(rw & 0o200, 0, "{rw:o}");
    }
}
