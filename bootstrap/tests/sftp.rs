//! `reasonix_sftpfs::SftpFs` against a real sshd's sftp subsystem.

#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::*;
use reasonix_bootstrap::sftpfs::{FileKind, Fs};
use reasonix_bootstrap::{connect_with_cache, CredentialCache, HostKeyAnswer};
use reasonix_testkit::sshd::{SshdConfig, UserOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sftp_fs_operations_on_a_real_host() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    let p = ScriptedPrompter::new(HostKeyAnswer::Reject);
    let c = guard(connect_with_cache(
        &s.dest(""),
        &s.opts(),
        p,
        &CredentialCache::new(),
    ))
    .await
    .unwrap();
    let fs = guard(c.sftp()).await.unwrap();
    assert!(fs.has_posix_rename());
    let home = &s.user.home;

    // mkdir -p (relative to the login dir = home), idempotent.
    guard(fs.mkdir_p("ws/a/b", 0o750)).await.unwrap();
    guard(fs.mkdir_p("ws/a/b", 0o750)).await.unwrap();
    let m = std::fs::metadata(home.join("ws/a/b")).unwrap();
    assert!(m.is_dir());
    assert_eq!(m.uid(), s.user.uid);

    // Atomic write replaces, keeps no temp file, applies the mode.
    let f = format!("{}/ws/a/b/file.txt", home.display());
    guard(fs.write_atomic(&f, b"first", 0o644)).await.unwrap();
    guard(fs.write_atomic(&f, b"second version", 0o600))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(home.join("ws/a/b/file.txt")).unwrap(),
        b"second version"
    );
    assert_eq!(
        std::fs::metadata(home.join("ws/a/b/file.txt"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    let entries = guard(fs.read_dir("ws/a/b")).await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].name, "file.txt");
    assert_eq!(entries[0].meta.kind, FileKind::File);
    assert_eq!(entries[0].meta.len, 14);

    // Large streamed write and pipelined read back.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let acked = std::sync::atomic::AtomicU64::new(0);
    let n = guard(fs.write_stream("ws/big.bin", &mut &big[..], 0o640, &|d| {
        acked.fetch_max(d, std::sync::atomic::Ordering::SeqCst);
    }))
    .await
    .unwrap();
    assert_eq!(n, big.len() as u64);
    assert_eq!(acked.load(std::sync::atomic::Ordering::SeqCst), n);
    assert_eq!(std::fs::read(home.join("ws/big.bin")).unwrap(), big);
    assert_eq!(guard(fs.read("ws/big.bin")).await.unwrap(), big);
    let st = guard(fs.stat("ws/big.bin")).await.unwrap();
    assert_eq!((st.kind, st.len, st.mode), (FileKind::File, n, 0o640));

    // chmod, rename over an existing file, stat errors.
    guard(fs.chmod("ws/big.bin", 0o700)).await.unwrap();
    assert_eq!(guard(fs.stat("ws/big.bin")).await.unwrap().mode, 0o700);
    guard(fs.rename("ws/big.bin", &f)).await.unwrap();
    assert_eq!(
        std::fs::metadata(home.join("ws/a/b/file.txt"))
            .unwrap()
            .len(),
        n
    );
    let err = guard(fs.stat("ws/big.bin")).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    // Permission errors are typed.
    let err = guard(fs.write_atomic("/etc/reasonix-should-not-exist", b"x", 0o644))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            reasonix_bootstrap::sftpfs::FsError::PermissionDenied { .. }
        ),
        "{err:?}"
    );

    // Recursive remove.
    guard(fs.remove("ws")).await.unwrap();
    assert!(!home.join("ws").exists());
}
