//! The Landlock fallback: when bubblewrap cannot run (no user namespaces, AppArmor, seccomp,
//! missing binary), bash's process tree is confined with Landlock instead. Landlock is an
//! allow-list of rights on file hierarchies, applied in the child between fork and exec, so
//! the daemon itself stays unrestricted.
//!
//! A right granted on a directory holds for everything below it, so a subpath cannot be
//! taken back. Where a writable root holds a read-only path (a deny-covered path, a
//! `forbid_read` path), write rights are granted on the root's entries one by one, skipping
//! the covered ones and descending only into the directories on the way to them; the same
//! is done from `/` for read rights around `forbid_read` paths. The directories on the way
//! get no right of their own: nothing can be created or removed directly in them.

use landlock::BitFlags;
use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, ABI,
};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What bubblewrap confines that Landlock here does not (shown in the status).
pub const NOT_COVERED: &str = "not covered compared with bwrap: /tmp is the host's shared /tmp, \
     not a private one; .git is writable by bash (file tools still refuse it; deny rules on \
     edits are still restored after the call); other processes are visible (no PID namespace); \
     a deny-covered file can be appended to or written in place (not truncated, removed or \
     renamed) until the after-call check restores it; directories on the way to a forbid_read \
     path cannot be listed";

/// The kernel's Landlock ABI version, or why Landlock is not usable.
pub fn abi_version() -> Result<i32, String> {
    // LANDLOCK_CREATE_RULESET_VERSION: returns the ABI version instead of a ruleset.
    const VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and size 0, the version query reads and writes no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            VERSION,
        )
    };
    if v >= 1 {
        return Ok(v as i32);
    }
    let err = std::io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::ENOSYS) => {
            "the kernel has no Landlock (needs Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK)"
                .to_string()
        }
        Some(libc::EOPNOTSUPP) => "Landlock is built into the kernel but not enabled \
             (add `landlock` to the `lsm=` kernel boot parameter)"
            .to_string(),
        _ => format!("Landlock version query failed: {err}"),
    })
}

/// A ready ruleset: its descriptor is applied to the child before exec.
#[derive(Debug, Clone)]
pub struct Prepared {
    fd: Arc<OwnedFd>,
}

/// What the ruleset is built from.
pub struct Plan<'a> {
    /// Kernel ABI version (from [`abi_version`]).
    pub abi: i32,
    /// Roots bash may write (canonical).
    pub writable: &'a [PathBuf],
    /// Paths inside writable roots that stay read-only (deny-covered, `.git` is not here).
    pub read_only: &'a [PathBuf],
    /// Paths bash may not read at all.
    pub forbid_read: &'a [PathBuf],
    /// Block TCP bind and connect (needs ABI 4).
    pub block_tcp: bool,
    /// The host's /tmp (and the temp dir) stay writable; false in plan mode, where
    /// nothing outside the device files is.
    pub tmp_writable: bool,
}

/// Device files and directories a shell needs to write (like bwrap's `--dev`).
const DEV_WRITABLE: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
    "/dev/random",
    "/dev/urandom",
];

/// True when TCP can be blocked with this ABI.
pub fn can_block_tcp(abi: i32) -> bool {
    abi >= 4
}

/// `path`'s entries, each covering a subtree, that avoid every path in `except`:
/// `path` itself when nothing in `except` is below it, nothing when `path` is in `except`,
/// else the same for each child (descending only toward the excepted paths).
/// Also returns the directories on the way (above an excepted path), which get no grant.
pub fn grants_avoiding(path: &Path, except: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut out = Vec::new();
    let mut on_the_way = Vec::new();
    grants_into(path, except, &mut out, &mut on_the_way, 0);
    (out, on_the_way)
}

fn grants_into(
    path: &Path,
    except: &[PathBuf],
    out: &mut Vec<PathBuf>,
    on_the_way: &mut Vec<PathBuf>,
    depth: usize,
) {
    if except.iter().any(|e| path.starts_with(e)) {
        return;
    }
    if !except.iter().any(|e| e.starts_with(path)) {
        out.push(path.to_path_buf());
        return;
    }
    on_the_way.push(path.to_path_buf());
    // Deep paths are rare; past this depth the subtree is left without the right (fails closed).
    if depth > 64 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(path) else {
        return;
    };
    for e in rd.flatten() {
        let child = e.path();
        // A symlink entry is granted as the link itself resolves; never follow it.
        if e.file_type().map(|t| t.is_symlink()).unwrap_or(true) {
            continue;
        }
        grants_into(&child, except, out, on_the_way, depth + 1);
    }
}

fn canonical_all(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect()
}

/// Builds the ruleset for `plan` in the parent (allocation is not safe between fork and
/// exec in a threaded daemon); the child only applies it.
pub fn prepare(plan: &Plan<'_>) -> Result<Prepared, String> {
    let abi = ABI::from(plan.abi);
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let write = all & !read;
    let err = |e: &dyn std::fmt::Display| format!("cannot build the Landlock ruleset: {e}");
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(|e| err(&e))?;
    if plan.block_tcp {
        rs = rs
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| err(&e))?;
    }
    let mut created = rs.create().map_err(|e| err(&e))?;
    let forbid = canonical_all(plan.forbid_read);
    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    for p in grants_avoiding(Path::new("/"), &forbid).0 {
        rules.push((p, read));
    }
    let create_and_write = AccessFs::WriteFile
        | AccessFs::MakeChar
        | AccessFs::MakeDir
        | AccessFs::MakeReg
        | AccessFs::MakeSock
        | AccessFs::MakeFifo
        | AccessFs::MakeBlock
        | AccessFs::MakeSym;
    let mut no_write = canonical_all(plan.read_only);
    no_write.extend(forbid.iter().cloned());
    for root in plan.writable {
        let (granted, on_the_way) = grants_avoiding(root, &no_write);
        rules.extend(granted.into_iter().map(|p| (p, write)));
        rules.extend(on_the_way.into_iter().map(|p| (p, create_and_write)));
    }
    for d in DEV_WRITABLE {
        rules.push((PathBuf::from(d), write));
    }
    if plan.tmp_writable {
        rules.push((std::env::temp_dir(), write));
        rules.push((PathBuf::from("/tmp"), write));
    }
    for (path, access) in rules {
        // A path that vanished meanwhile simply gets no right.
        let Ok(fd) = PathFd::new(&path) else {
            continue;
        };
        // Only the rights meaningful for a file may be granted on a file.
        let is_dir = std::fs::metadata(&path)
            .map(|m| m.is_dir())
            .unwrap_or(false);
        let access = if is_dir {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| err(&e))?;
    }
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or_else(|| "the kernel did not create a Landlock ruleset".to_string())?;
    Ok(Prepared { fd: Arc::new(fd) })
}

impl Prepared {
    /// Makes `cmd`'s child restrict itself with this ruleset just before exec.
    pub fn apply_to(&self, cmd: &mut tokio::process::Command) {
        let fd = Arc::clone(&self.fd);
        // SAFETY: the closure runs between fork and exec and only makes two syscalls
        // (prctl and landlock_restrict_self) on a descriptor kept alive by the Arc; it
        // allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let r = libc::syscall(
                    libc::SYS_landlock_restrict_self,
                    fd.as_raw_fd(),
                    0 as libc::c_uint,
                );
                if r != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn grants_skip_excepted_paths_and_descend_only_toward_them() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join("c")).unwrap();
        std::fs::write(root.join("a/f"), "").unwrap();
        std::fs::write(root.join("a/b/secret"), "").unwrap();
        let (mut g, mut way) = grants_avoiding(&root, &[root.join("a/b")]);
        reasonix_forward::sort::sort(&mut g);
        reasonix_forward::sort::sort(&mut way);
        assert_eq!(g, vec![root.join("a/f"), root.join("c")]);
        assert_eq!(way, vec![root.clone(), root.join("a")]);
        assert_eq!(grants_avoiding(&root, &[]).0, vec![root.clone()]);
        assert!(grants_avoiding(&root, std::slice::from_ref(&root))
            .0
            .is_empty());
    }
}
