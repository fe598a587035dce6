//! [`Fs`] over SFTP (russh-sftp's raw session, so writes and reads can be pipelined and
//! `posix-rename@openssh.com` used for atomic replacement).

use std::sync::Arc;

use async_trait::async_trait;
use russh_sftp::client::error::Error as SftpError;
use russh_sftp::client::RawSftpSession;
use russh_sftp::protocol::{FileAttributes, OpenFlags, Packet, StatusCode};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinSet;

use crate::{prefixes, temp_sibling, DirEntry, FileKind, Fs, FsError, Metadata, Progress};

/// Bytes per SFTP write/read request (OpenSSH accepts up to 256 KiB packets; 32 KiB is the
/// size every server supports).
const CHUNK: usize = 32 * 1024;
/// Requests in flight at once: hides the round trip on slow links.
const IN_FLIGHT: usize = 32;
/// Per-request timeout in seconds.
const REQUEST_TIMEOUT_SECS: u64 = 60;

/// A file [`SftpFs::upload_unclosed`] wrote and left open on the server.
#[derive(Debug)]
#[must_use = "close it with SftpFs::close_upload"]
pub struct OpenUpload {
    path: String,
    handle: String,
}

/// An SFTP session as a filesystem.
pub struct SftpFs {
    raw: Arc<RawSftpSession>,
    posix_rename: bool,
}

impl std::fmt::Debug for SftpFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SftpFs")
            .field("posix_rename", &self.posix_rename)
            .finish()
    }
}

fn map(op: &'static str, path: &str, e: SftpError) -> FsError {
    match e {
        SftpError::Status(s) if s.status_code == StatusCode::NoSuchFile => FsError::NotFound {
            op,
            path: path.to_string(),
        },
        SftpError::Status(s) if s.status_code == StatusCode::PermissionDenied => {
            FsError::PermissionDenied {
                op,
                path: path.to_string(),
            }
        }
        other => FsError::other(op, path, other),
    }
}

/// File type from the `S_IFMT` bits (the attribute helpers test bit subsets, which makes a
/// symlink look like a regular file and a socket like a directory).
fn kind_of(a: &FileAttributes) -> FileKind {
    match a.permissions.unwrap_or(0) & 0o170000 {
        0o040000 => FileKind::Dir,
        0o100000 => FileKind::File,
        0o120000 => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

fn meta_of(a: &FileAttributes) -> Metadata {
    Metadata {
        kind: kind_of(a),
        len: a.size.unwrap_or(0),
        mode: a.permissions.unwrap_or(0) & 0o7777,
        mtime: a.mtime.map(u64::from),
    }
}

fn mode_attrs(mode: u32) -> FileAttributes {
    FileAttributes {
        permissions: Some(mode & 0o7777),
        ..FileAttributes::empty()
    }
}

fn ssh_string(out: &mut Vec<u8>, s: &str) {
    // SFTP strings are a u32 length then bytes; paths are far below 4 GiB.
    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

impl SftpFs {
    /// Start an SFTP session over `stream` (e.g. an SSH channel with the `sftp` subsystem).
    pub async fn new<S>(stream: S) -> Result<Self, FsError>
    where
        S: AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let raw = RawSftpSession::new(stream);
        raw.set_timeout(REQUEST_TIMEOUT_SECS);
        let version = raw
            .init()
            .await
            .map_err(|e| FsError::other("sftp init", "", e))?;
        let posix_rename = version
            .extensions
            .get("posix-rename@openssh.com")
            .is_some_and(|v| v == "1");
        Ok(Self {
            raw: Arc::new(raw),
            posix_rename,
        })
    }

    /// Whether the server supports atomic replace-rename.
    pub fn has_posix_rename(&self) -> bool {
        self.posix_rename
    }

    async fn open(
        &self,
        op: &'static str,
        path: &str,
        flags: OpenFlags,
        attrs: FileAttributes,
    ) -> Result<String, FsError> {
        Ok(self
            .raw
            .open(path, flags, attrs)
            .await
            .map_err(|e| map(op, path, e))?
            .handle)
    }

    async fn close(&self, path: &str, handle: String) -> Result<(), FsError> {
        self.raw
            .close(handle)
            .await
            .map(|_| ())
            .map_err(|e| map("close", path, e))
    }

    /// Upload everything `data` yields to a new file `path` (created with `mode`, which the
    /// server's umask may narrow) and return once the server has acknowledged every write,
    /// with the file still open. Its content is then on the host for other processes to
    /// read: a caller can start working on it while [`SftpFs::close_upload`] goes out,
    /// instead of waiting a round trip for the close first. On error the file is closed
    /// (and left for the caller to remove).
    pub async fn upload_unclosed(
        &self,
        path: &str,
        data: &mut (dyn AsyncRead + Send + Unpin),
        mode: u32,
        progress: Progress<'_>,
    ) -> Result<(u64, OpenUpload), FsError> {
        self.write_open(path, data, mode, progress, false).await
    }

    /// Create `path` (`exclusive`: it must not exist), write everything `data` yields and
    /// leave it open; on error it is closed.
    async fn write_open(
        &self,
        path: &str,
        data: &mut (dyn AsyncRead + Send + Unpin),
        mode: u32,
        progress: Progress<'_>,
        exclusive: bool,
    ) -> Result<(u64, OpenUpload), FsError> {
        let mut flags = OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::TRUNCATE;
        if exclusive {
            flags |= OpenFlags::EXCLUDE;
        }
        let handle = self.open("create", path, flags, mode_attrs(mode)).await?;
        match self.pump(path, &handle, data, progress).await {
            Ok(n) => Ok((
                n,
                OpenUpload {
                    path: path.to_string(),
                    handle,
                },
            )),
            Err(e) => {
                let _ = self.close(path, handle).await;
                Err(e)
            }
        }
    }

    /// Close a file left open by [`SftpFs::upload_unclosed`].
    pub async fn close_upload(&self, upload: OpenUpload) -> Result<(), FsError> {
        self.close(&upload.path, upload.handle).await
    }

    /// Write everything `data` yields to an open handle with up to [`IN_FLIGHT`] requests
    /// outstanding; returns the byte count.
    async fn pump(
        &self,
        path: &str,
        handle: &str,
        data: &mut (dyn AsyncRead + Send + Unpin),
        progress: Progress<'_>,
    ) -> Result<u64, FsError> {
        let mut set: JoinSet<Result<usize, SftpError>> = JoinSet::new();
        let mut offset = 0u64;
        let mut acked = 0u64;
        let mut eof = false;
        loop {
            while !eof && set.len() < IN_FLIGHT {
                let mut buf = vec![0u8; CHUNK];
                let mut filled = 0;
                while filled < CHUNK {
                    let n = data
                        .read(&mut buf[filled..])
                        .await
                        .map_err(|e| FsError::other("read source for", path, e))?;
                    if n == 0 {
                        eof = true;
                        break;
                    }
                    filled += n;
                }
                if filled == 0 {
                    break;
                }
                buf.truncate(filled);
                let raw = self.raw.clone();
                let h = handle.to_string();
                let off = offset;
                offset += filled as u64;
                set.spawn(async move { raw.write(h, off, buf).await.map(|_| filled) });
            }
            match set.join_next().await {
                None => break,
                Some(Ok(Ok(n))) => {
                    acked += n as u64;
                    progress(acked);
                }
                Some(Ok(Err(e))) => return Err(map("write", path, e)),
                Some(Err(e)) => return Err(FsError::other("write", path, e)),
            }
        }
        Ok(offset)
    }

    async fn write_new(
        &self,
        path: &str,
        data: &mut (dyn AsyncRead + Send + Unpin),
        mode: u32,
        progress: Progress<'_>,
        exclusive: bool,
    ) -> Result<u64, FsError> {
        let (n, file) = self
            .write_open(path, data, mode, progress, exclusive)
            .await?;
        // The server's umask may have narrowed the mode at creation. The chmod is sent right
        // behind the close (the server answers requests in order): one round trip for both.
        let (closed, chmod) = tokio::join!(self.close_upload(file), self.chmod(path, mode));
        closed?;
        chmod?;
        Ok(n)
    }
}

#[async_trait]
impl Fs for SftpFs {
    async fn stat(&self, path: &str) -> Result<Metadata, FsError> {
        let a = self
            .raw
            .stat(path)
            .await
            .map_err(|e| map("stat", path, e))?;
        Ok(meta_of(&a.attrs))
    }

    async fn read(&self, path: &str) -> Result<Vec<u8>, FsError> {
        let handle = self
            .open("open", path, OpenFlags::READ, FileAttributes::empty())
            .await?;
        let result = async {
            let mut out = Vec::new();
            let mut next = 0u64;
            let mut done = false;
            // Read ahead: keep IN_FLIGHT requests queued, consume them in order.
            let mut queue = std::collections::VecDeque::new();
            while !done || !queue.is_empty() {
                while !done && queue.len() < IN_FLIGHT {
                    let raw = self.raw.clone();
                    let h = handle.clone();
                    let off = next;
                    next += CHUNK as u64;
                    queue.push_back((
                        off,
                        tokio::spawn(async move { raw.read(h, off, CHUNK as u32).await }),
                    ));
                }
                let Some((off, task)) = queue.pop_front() else {
                    break;
                };
                match task.await {
                    Ok(Ok(d)) => {
                        if off != out.len() as u64 {
                            // An earlier short read left a gap; fall back to sequential.
                            done = true;
                            continue;
                        }
                        let short = d.data.len() < CHUNK;
                        out.extend_from_slice(&d.data);
                        if short {
                            // Short read: either EOF or a server limit; continue
                            // sequentially from here.
                            done = true;
                        }
                    }
                    Ok(Err(SftpError::Status(s))) if s.status_code == StatusCode::Eof => {
                        done = true
                    }
                    Ok(Err(e)) => return Err(map("read", path, e)),
                    Err(e) => return Err(FsError::other("read", path, e)),
                }
            }
            for (_, t) in queue {
                t.abort();
            }
            // Sequential tail (after a short read or gap).
            loop {
                match self
                    .raw
                    .read(handle.clone(), out.len() as u64, CHUNK as u32)
                    .await
                {
                    Ok(d) if d.data.is_empty() => break,
                    Ok(d) => out.extend_from_slice(&d.data),
                    Err(SftpError::Status(s)) if s.status_code == StatusCode::Eof => break,
                    Err(e) => return Err(map("read", path, e)),
                }
            }
            Ok(out)
        }
        .await;
        let _ = self.close(path, handle).await;
        result
    }

    async fn read_dir(&self, path: &str) -> Result<Vec<DirEntry>, FsError> {
        let handle = self
            .raw
            .opendir(path)
            .await
            .map_err(|e| map("read_dir", path, e))?
            .handle;
        let mut out = Vec::new();
        let res = loop {
            match self.raw.readdir(handle.clone()).await {
                Ok(name) => {
                    for f in name.files {
                        if f.filename == "." || f.filename == ".." {
                            continue;
                        }
                        out.push(DirEntry {
                            meta: meta_of(&f.attrs),
                            name: f.filename,
                        });
                    }
                }
                Err(SftpError::Status(s)) if s.status_code == StatusCode::Eof => break Ok(()),
                Err(e) => break Err(map("read_dir", path, e)),
            }
        };
        let _ = self.raw.close(handle).await;
        res?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn write_atomic(&self, path: &str, data: &[u8], mode: u32) -> Result<(), FsError> {
        let tmp = temp_sibling(path);
        let mut src = data;
        let res = async {
            self.write_new(&tmp, &mut src, mode, &|_| {}, true).await?;
            self.rename(&tmp, path).await
        }
        .await;
        if res.is_err() {
            let _ = self.raw.remove(tmp.as_str()).await;
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
        self.write_new(path, data, mode, progress, false).await
    }

    async fn chmod(&self, path: &str, mode: u32) -> Result<(), FsError> {
        self.raw
            .setstat(path, mode_attrs(mode))
            .await
            .map(|_| ())
            .map_err(|e| map("chmod", path, e))
    }

    async fn mkdir_p(&self, path: &str, mode: u32) -> Result<(), FsError> {
        for p in prefixes(path) {
            match self.raw.stat(p.as_str()).await {
                Ok(a) if kind_of(&a.attrs) == FileKind::Dir => continue,
                Ok(_) => return Err(FsError::other("mkdir", &p, "exists and is not a directory")),
                Err(_) => {}
            }
            if let Err(e) = self.raw.mkdir(p.as_str(), mode_attrs(mode)).await {
                // Lost a race with another creator: fine if it is a directory now.
                match self.raw.stat(p.as_str()).await {
                    Ok(a) if kind_of(&a.attrs) == FileKind::Dir => {}
                    _ => return Err(map("mkdir", &p, e)),
                }
            }
        }
        Ok(())
    }

    async fn rename(&self, from: &str, to: &str) -> Result<(), FsError> {
        if self.posix_rename {
            let mut data = Vec::new();
            ssh_string(&mut data, from);
            ssh_string(&mut data, to);
            return match self
                .raw
                .extended("posix-rename@openssh.com", data)
                .await
                .map_err(|e| map("rename", from, e))?
            {
                Packet::Status(s) if s.status_code == StatusCode::Ok => Ok(()),
                Packet::Status(s) => Err(map("rename", from, SftpError::Status(s))),
                _ => Err(FsError::other("rename", from, "unexpected reply")),
            };
        }
        // Plain SFTP rename refuses an existing target: remove it first (not atomic, but
        // only used on servers without the OpenSSH extension).
        match self.raw.rename(from, to).await {
            Ok(_) => Ok(()),
            Err(first) => {
                if self.raw.stat(to).await.is_err() {
                    return Err(map("rename", from, first));
                }
                let _ = self.raw.remove(to).await;
                self.raw
                    .rename(from, to)
                    .await
                    .map(|_| ())
                    .map_err(|e| map("rename", from, e))
            }
        }
    }

    async fn remove(&self, path: &str) -> Result<(), FsError> {
        let a = self
            .raw
            .lstat(path)
            .await
            .map_err(|e| map("remove", path, e))?;
        if kind_of(&a.attrs) == FileKind::Dir {
            let entries = self.read_dir(path).await?;
            for e in entries {
                let child = format!("{}/{}", path.trim_end_matches('/'), e.name);
                Box::pin(self.remove(&child)).await?;
            }
            self.raw
                .rmdir(path)
                .await
                .map(|_| ())
                .map_err(|e| map("remove", path, e))
        } else {
            self.raw
                .remove(path)
                .await
                .map(|_| ())
                .map_err(|e| map("remove", path, e))
        }
    }
}
