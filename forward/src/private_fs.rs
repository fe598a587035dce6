//! Files and folders only their owner may read: mode 0600 / 0700 on Unix; on Windows the
//! user's profile ACLs apply and nothing more is set. The one place for that platform split
//! (memory stores, trust records), so feature code carries no `#[cfg]`.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::Path;

/// Create `dir` and its missing parents; `dir` itself is owner-only.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // An existing folder is tightened too (best effort: it may belong to another user).
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

/// `OpenOptions` whose newly created files are owner-only (0600 on Unix).
pub fn open_options() -> OpenOptions {
    #[allow(unused_mut)] // Windows sets nothing more
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn created_dirs_and_files_are_owner_only() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("a/b");
        create_dir_all(&dir).expect("dir");
        let mode = |p: &Path| fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("f");
        open_options()
            .write(true)
            .create_new(true)
            .open(&file)
            .expect("file");
        assert_eq!(mode(&file), 0o600);
    }
}
