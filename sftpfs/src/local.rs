//! [`Fs`] on the local disk.

use std::io::ErrorKind;
use std::path::Path;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::mode::{create_with_mode_async, dirs_with_mode_async, permission_bits, set_mode_async};
use crate::{prefixes, temp_sibling, DirEntry, FileKind, Fs, FsError, Metadata, Progress};

/// The local filesystem.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalFs;

fn map(op: &'static str, path: &str, e: std::io::Error) -> FsError {
    match e.kind() {
        ErrorKind::NotFound => FsError::NotFound {
            op,
            path: path.to_string(),
        },
        ErrorKind::PermissionDenied => FsError::PermissionDenied {
            op,
            path: path.to_string(),
        },
        _ => FsError::other(op, path, e),
    }
}

fn meta_of(m: &std::fs::Metadata) -> Metadata {
    let ft = m.file_type();
    let kind = if ft.is_symlink() {
        FileKind::Symlink
    } else if ft.is_dir() {
        FileKind::Dir
    } else if ft.is_file() {
        FileKind::File
    } else {
        FileKind::Other
    };
    Metadata {
        kind,
        len: m.len(),
        mode: permission_bits(m),
        mtime: m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs()),
    }
}

#[async_trait]
impl Fs for LocalFs {
    async fn stat(&self, path: &str) -> Result<Metadata, FsError> {
        let m = tokio::fs::metadata(path)
            .await
            .map_err(|e| map("stat", path, e))?;
        Ok(meta_of(&m))
    }

    async fn read(&self, path: &str) -> Result<Vec<u8>, FsError> {
        tokio::fs::read(path)
            .await
            .map_err(|e| map("read", path, e))
    }

    async fn read_dir(&self, path: &str) -> Result<Vec<DirEntry>, FsError> {
        let mut rd = tokio::fs::read_dir(path)
            .await
            .map_err(|e| map("read_dir", path, e))?;
        let mut out = Vec::new();
        while let Some(e) = rd
            .next_entry()
            .await
            .map_err(|e| map("read_dir", path, e))?
        {
            let m = tokio::fs::symlink_metadata(e.path())
                .await
                .map_err(|err| map("stat", &e.path().display().to_string(), err))?;
            out.push(DirEntry {
                name: e.file_name().to_string_lossy().into_owned(),
                meta: meta_of(&m),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn write_atomic(&self, path: &str, data: &[u8], mode: u32) -> Result<(), FsError> {
        let tmp = local_temp_sibling(path);
        let res = async {
            let mut opts = tokio::fs::OpenOptions::new();
            opts.write(true).create_new(true);
            create_with_mode_async(&mut opts, mode);
            let mut f = opts.open(&tmp).await.map_err(|e| map("create", &tmp, e))?;
            f.write_all(data).await.map_err(|e| map("write", &tmp, e))?;
            f.sync_all().await.map_err(|e| map("fsync", &tmp, e))?;
            drop(f);
            // The umask may have narrowed the mode at creation.
            set_mode_async(Path::new(&tmp), mode)
                .await
                .map_err(|e| map("chmod", &tmp, e))?;
            tokio::fs::rename(&tmp, path)
                .await
                .map_err(|e| map("rename", path, e))
        }
        .await;
        if res.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        res
    }

    async fn write_stream(
        &self,
        path: &str,
        data: &mut (dyn AsyncRead + Send + Unpin),
        mode: u32,
        progress: Progress<'_>,
    ) -> Result<u64, FsError> {
        let mut opts = tokio::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        create_with_mode_async(&mut opts, mode);
        let mut f = opts.open(path).await.map_err(|e| map("create", path, e))?;
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            let n = data
                .read(&mut buf)
                .await
                .map_err(|e| map("read source for", path, e))?;
            if n == 0 {
                break;
            }
            f.write_all(&buf[..n])
                .await
                .map_err(|e| map("write", path, e))?;
            total += n as u64;
            progress(total);
        }
        f.sync_all().await.map_err(|e| map("fsync", path, e))?;
        Ok(total)
    }

    async fn chmod(&self, path: &str, mode: u32) -> Result<(), FsError> {
        set_mode_async(Path::new(path), mode)
            .await
            .map_err(|e| map("chmod", path, e))
    }

    async fn mkdir_p(&self, path: &str, mode: u32) -> Result<(), FsError> {
        for p in prefixes(path) {
            let mut builder = tokio::fs::DirBuilder::new();
            dirs_with_mode_async(&mut builder, mode);
            match builder.create(&p).await {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    let m = tokio::fs::metadata(&p)
                        .await
                        .map_err(|e| map("stat", &p, e))?;
                    if !m.is_dir() {
                        return Err(FsError::other("mkdir", &p, "exists and is not a directory"));
                    }
                }
                Err(e) => return Err(map("mkdir", &p, e)),
            }
        }
        Ok(())
    }

    async fn rename(&self, from: &str, to: &str) -> Result<(), FsError> {
        tokio::fs::rename(from, to)
            .await
            .map_err(|e| map("rename", from, e))
    }

    async fn remove(&self, path: &str) -> Result<(), FsError> {
        let m = tokio::fs::symlink_metadata(path)
            .await
            .map_err(|e| map("remove", path, e))?;
        if m.is_dir() {
            tokio::fs::remove_dir_all(path)
                .await
                .map_err(|e| map("remove", path, e))
        } else {
            tokio::fs::remove_file(path)
                .await
                .map_err(|e| map("remove", path, e))
        }
    }
}

/// [`crate::temp_sibling`] by this system's path rules (a Windows path separates with `\`).
fn local_temp_sibling(path: &str) -> String {
    let p = Path::new(path);
    match (p.parent(), p.file_name()) {
        (Some(dir), Some(name)) => {
            let mut tmp = std::ffi::OsString::from(".");
            tmp.push(name);
            tmp.push(format!(".tmp-{:016x}", rand::random::<u64>()));
            dir.join(tmp).to_string_lossy().into_owned()
        }
        _ => temp_sibling(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(dir: &tempfile::TempDir, rel: &str) -> String {
        dir.path().join(rel).display().to_string()
    }

    #[tokio::test]
    async fn roundtrip_on_disk() {
        let d = tempfile::tempdir().unwrap();
        let fs = LocalFs;
        // What a mode reads back as on this system (Windows keeps the read-only bit only).
        let want = |is_dir: bool, m: u32| {
            if cfg!(unix) {
                m
            } else {
                crate::mode::mode_of_attributes(is_dir, crate::mode::readonly_of(m))
            }
        };
        fs.mkdir_p(&p(&d, "a/b/c"), 0o700).await.unwrap();
        fs.mkdir_p(&p(&d, "a/b/c"), 0o700).await.unwrap();
        assert_eq!(fs.stat(&p(&d, "a/b")).await.unwrap().kind, FileKind::Dir);
        assert_eq!(
            fs.stat(&p(&d, "a/b")).await.unwrap().mode,
            want(true, 0o700)
        );

        let f = p(&d, "a/b/c/file");
        fs.write_atomic(&f, b"one", 0o640).await.unwrap();
        fs.write_atomic(&f, b"two!", 0o600).await.unwrap();
        assert_eq!(fs.read(&f).await.unwrap(), b"two!");
        let m = fs.stat(&f).await.unwrap();
        assert_eq!(
            (m.kind, m.len, m.mode),
            (FileKind::File, 4, want(false, 0o600))
        );
        // No temp files left behind.
        let names: Vec<String> = fs
            .read_dir(&p(&d, "a/b/c"))
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, vec!["file"]);

        fs.chmod(&f, 0o755).await.unwrap();
        assert_eq!(fs.stat(&f).await.unwrap().mode, want(false, 0o755));

        let g = p(&d, "a/streamed");
        let data = vec![7u8; 200_000];
        let seen = std::sync::atomic::AtomicU64::new(0);
        let n = fs
            .write_stream(&g, &mut &data[..], 0o600, &|n| {
                seen.store(n, std::sync::atomic::Ordering::SeqCst)
            })
            .await
            .unwrap();
        assert_eq!(n, 200_000);
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 200_000);
        fs.rename(&g, &f).await.unwrap();
        assert_eq!(fs.read(&f).await.unwrap().len(), 200_000);

        fs.remove(&p(&d, "a")).await.unwrap();
        let err = fs.stat(&p(&d, "a")).await.unwrap_err();
        assert!(err.is_not_found(), "{err}");
        assert!(fs
            .read(&f)
            .await
            .unwrap_err()
            .to_string()
            .contains("no such file"));
        // mkdir -p through a file fails clearly.
        fs.write_atomic(&p(&d, "plain"), b"x", 0o600).await.unwrap();
        assert!(fs.mkdir_p(&p(&d, "plain/sub"), 0o700).await.is_err());
    }
}
