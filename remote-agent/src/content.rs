//! The host's content store: large tool outputs kept next to the session journals, each in a
//! file named by its SHA-256, so events can carry a [`ContentRef`] instead of megabytes.
//!
//! Content is immutable and shared by every session of the workspace (`sessions/<key>/content/
//! <2 hex>/<64 hex>`, 0700 directories, 0600 files). Nothing deletes it while the journals
//! that name it exist: a rewind cuts the journal, never the store, so every ref a journal can
//! hold stays fetchable. Writes go to a temporary file that is fsynced and renamed into place,
//! so a crash never leaves a file whose bytes do not match its name.

use std::collections::HashMap;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use reasonix_forward::content::{
    is_sha256_hex, ContentChunk, ContentRef, EXTERNALIZE_OVER, FETCH_CHUNK_MAX,
};
use reasonix_forward::sync::LockExt;

use crate::tools::bound_for_context;

/// Errors of the content store.
#[derive(Debug, thiserror::Error)]
pub enum ContentStoreError {
    /// The name is not a SHA-256.
    #[error("{0:?} is not a content id (64 lower-case hex digits)")]
    BadName(String),
    /// No such content.
    #[error("no content {0} on this host (it was never stored here, or the state directory was cleaned)")]
    NotFound(String),
    /// I/O failed.
    #[error("content store {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

/// A content store rooted at one directory. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ContentStore {
    dir: PathBuf,
}

impl ContentStore {
    /// The store of the journals in `sessions_dir`.
    pub fn for_sessions(sessions_dir: &Path) -> ContentStore {
        ContentStore {
            dir: sessions_dir.join("content"),
        }
    }

    /// Where the content `sha256` lives.
    fn path_of(&self, sha256: &str) -> PathBuf {
        self.dir.join(&sha256[..2]).join(sha256)
    }

    /// Store `content` (a no-op when it is already there) and return its reference.
    pub fn put(&self, content: &[u8]) -> Result<ContentRef, ContentStoreError> {
        let r = ContentRef::of(content);
        let path = self.path_of(&r.sha256);
        if std::fs::metadata(&path)
            .map(|m| m.len() == r.bytes)
            .unwrap_or(false)
        {
            return Ok(r);
        }
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ContentStoreError::Io { path, source }
        };
        let parent = path.parent().unwrap_or(&self.dir).to_path_buf();
        crate::paths::private_dir(&parent).map_err(io_err(&parent))?;
        let tmp = parent.join(format!(
            ".{}.{}.{:08x}.tmp",
            r.sha256,
            std::process::id(),
            rand::random::<u32>()
        ));
        let write = || -> io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(content)?;
            f.sync_data()?;
            std::fs::rename(&tmp, &path)
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(ContentStoreError::Io { path, source: e });
        }
        Ok(r)
    }

    /// Up to `len` bytes (at most [`FETCH_CHUNK_MAX`]) of the content `sha256` from `offset`.
    pub fn read_chunk(
        &self,
        sha256: &str,
        offset: u64,
        len: u32,
    ) -> Result<ContentChunk, ContentStoreError> {
        if !is_sha256_hex(sha256) {
            return Err(ContentStoreError::BadName(sha256.to_string()));
        }
        let path = self.path_of(sha256);
        let mut f = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(ContentStoreError::NotFound(sha256.to_string()))
            }
            Err(source) => return Err(ContentStoreError::Io { path, source }),
        };
        let io_err = |source| ContentStoreError::Io {
            path: path.clone(),
            source,
        };
        let total = f.metadata().map_err(io_err)?.len();
        let start = offset.min(total);
        let want = u64::from(len.min(FETCH_CHUNK_MAX)).min(total - start);
        f.seek(io::SeekFrom::Start(start)).map_err(io_err)?;
        let mut buf = Vec::with_capacity(want as usize);
        f.take(want).read_to_end(&mut buf).map_err(io_err)?;
        Ok(ContentChunk {
            sha256: sha256.to_string(),
            offset: start,
            total,
            data: reasonix_forward::content::encode_bytes(&buf),
        })
    }

    /// A tool output as it goes into a `ToolFinished` event: up to [`EXTERNALIZE_OVER`] bytes
    /// inline and unchanged; anything longer is stored and the event carries the bounded view
    /// the model sees plus the reference. When the store cannot be written the bounded view
    /// travels alone and says why the rest is missing (nothing is sent that cannot fit).
    pub fn externalize_output(&self, output: String) -> (String, Option<ContentRef>) {
        if output.len() <= EXTERNALIZE_OVER {
            return (output, None);
        }
        let view = bound_for_context(&output);
        match self.put(output.as_bytes()) {
            Ok(r) => (view, Some(r)),
            Err(e) => {
                tracing::error!("cannot store a {}-byte tool output: {e}", output.len());
                (
                    format!(
                        "{view}\n\n[the full {}-byte output could not be kept on the host: {e}]",
                        output.len()
                    ),
                    None,
                )
            }
        }
    }
}

/// Content held in memory for one link only (provider request messages too big for a frame):
/// the laptop fetches it like stored content, and it is dropped when its stream ends.
#[derive(Debug, Default, Clone)]
pub struct TransientContent {
    blobs: Arc<Mutex<HashMap<String, Arc<Vec<u8>>>>>,
}

impl TransientContent {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Vec<u8>>>> {
        // Single map operations; a poisoned lock still holds a valid map.
        self.blobs.lock_or_recover()
    }

    /// Hold `content` until [`TransientContent::release`].
    pub fn hold(&self, content: Vec<u8>) -> ContentRef {
        let r = ContentRef::of(&content);
        self.lock().insert(r.sha256.clone(), Arc::new(content));
        r
    }

    /// Drop held content.
    pub fn release(&self, sha256: &str) {
        self.lock().remove(sha256);
    }

    /// A chunk of held content, if it is held.
    pub fn read_chunk(&self, sha256: &str, offset: u64, len: u32) -> Option<ContentChunk> {
        let blob = self.lock().get(sha256).cloned()?;
        Some(ContentChunk::slice(sha256, &blob, offset, len))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use reasonix_forward::content::{decode_bytes, sha256_hex};

    #[test]
    fn big_outputs_are_stored_and_read_back_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::for_sessions(dir.path());
        let small = "x".repeat(EXTERNALIZE_OVER);
        assert_eq!(store.externalize_output(small.clone()), (small, None));

        let big = "\"".repeat(3 * FETCH_CHUNK_MAX as usize + 5);
        let (view, r) = store.externalize_output(big.clone());
        let r = r.unwrap();
        assert_eq!(view, bound_for_context(&big));
        assert_eq!(r.bytes, big.len() as u64);
        assert_eq!(r.sha256, sha256_hex(big.as_bytes()));
        let mut back = Vec::new();
        while (back.len() as u64) < r.bytes {
            let c = store
                .read_chunk(&r.sha256, back.len() as u64, u32::MAX)
                .unwrap();
            assert_eq!(c.total, r.bytes);
            let data = decode_bytes(&c.data).unwrap();
            assert!(data.len() <= FETCH_CHUNK_MAX as usize);
            back.extend(data);
        }
        assert_eq!(back, big.as_bytes());
        // Storing again is a no-op; the file is private.
        assert_eq!(store.put(big.as_bytes()).unwrap(), r);
        let file = dir
            .path()
            .join("content")
            .join(&r.sha256[..2])
            .join(&r.sha256);
        let mode = std::fs::metadata(file).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
    }

    #[test]
    fn bad_and_unknown_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::for_sessions(dir.path());
        assert!(matches!(
            store.read_chunk("../../etc/passwd", 0, 10),
            Err(ContentStoreError::BadName(_))
        ));
        let missing = sha256_hex(b"never stored");
        let err = store.read_chunk(&missing, 0, 10).unwrap_err();
        assert!(matches!(err, ContentStoreError::NotFound(_)), "{err}");
    }

    #[test]
    fn transient_content_is_served_until_released() {
        let t = TransientContent::default();
        let r = t.hold(b"messages".to_vec());
        let c = t.read_chunk(&r.sha256, 0, 100).unwrap();
        assert_eq!(decode_bytes(&c.data).unwrap(), b"messages");
        t.release(&r.sha256);
        assert!(t.read_chunk(&r.sha256, 0, 100).is_none());
    }
}
