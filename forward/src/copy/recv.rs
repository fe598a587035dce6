//! The receiving side of a copy (see [`super`]): check the list, offer the partial files,
//! write the content (holes as holes), compare the hashes, place the files.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::{AsyncSeekExt, AsyncWriteExt};

use super::{
    part_path, put, safe_rel, take, take_ctl, Ctl, Partial, Piece, Place, ProgressFn, Summary,
    COPY_PIECE,
};
use crate::channel::{Channel, ChannelReceiver, ChannelSender};

/// SHA-256 of a file's first `len` bytes (a partial file's prefix).
fn hash_file(path: &Path) -> std::io::Result<(u64, Sha256)> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; COPY_PIECE];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        len += n as u64;
    }
    Ok((len, h))
}

/// Receive a copy on `chan` into `dest` (as the receiving side names it), as the side that
/// writes; every path goes through `place`. Returns once everything was checked and placed
/// (the sender has been told), or why not (the channel is cancelled with that reason).
pub async fn receive(
    chan: Channel,
    dest: &str,
    place: &dyn Place,
    progress: ProgressFn<'_>,
) -> Result<Summary, String> {
    let Channel { tx, mut rx } = chan;
    let handle = tx.handle();
    match receive_inner(&tx, &mut rx, dest, place, progress).await {
        Ok(s) => {
            // The sender closes after our Ok; wait for that so nothing is cut short.
            let _ = rx.recv().await;
            tx.close(None).await;
            Ok(s)
        }
        Err(e) => {
            handle.cancel(e.clone());
            Err(e)
        }
    }
}

struct Planned {
    p: String,
    target: PathBuf,
    size: u64,
    mode: u32,
}

async fn receive_inner(
    tx: &ChannelSender,
    rx: &mut ChannelReceiver,
    dest: &str,
    place: &dyn Place,
    progress: ProgressFn<'_>,
) -> Result<Summary, String> {
    let (name, is_dir) = match take_ctl(rx).await? {
        Ctl::Root { name, dir } => (name, dir),
        other => return Err(format!("expected what the copy sends, got {other:?}")),
    };
    let name_rel = safe_rel(&name)?;
    if name_rel.components().count() != 1 {
        return Err(format!(
            "the other side named its source {name:?}, which is not a plain name"
        ));
    }
    let resolved = place.resolve(dest)?;
    // An existing directory, or a name ending in `/`, receives the source under its name.
    let into = resolved.is_dir() || dest.ends_with('/') || dest.is_empty() || dest == ".";
    let root = if into {
        resolved.join(&name_rel)
    } else {
        resolved
    };
    let root = place.check(&root)?;
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut summary = Summary::default();
    if is_dir {
        dirs.push((root.clone(), 0o755));
    }
    loop {
        match take_ctl(rx).await? {
            Ctl::Dir { p, mode } => {
                let t = place.check(&root.join(safe_rel(&p)?))?;
                dirs.push((t, mode));
            }
            Ctl::File { p, size, mode } => {
                let target = if p.is_empty() {
                    root.clone()
                } else {
                    place.check(&root.join(safe_rel(&p)?))?
                };
                if target.is_dir() {
                    return Err(format!(
                        "{} is a directory; name a path for the file, or the directory to copy it into",
                        target.display()
                    ));
                }
                summary.progress.total += size;
                files.push(Planned {
                    p,
                    target,
                    size,
                    mode,
                });
            }
            Ctl::Skip { p, why } => summary.skipped.push(format!("{p}: {why}")),
            Ctl::Listed => break,
            other => return Err(format!("unexpected {other:?} in the list of a copy")),
        }
    }
    for (d, _) in &dirs {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot make {}: {e}", d.display()))?;
        summary.dirs += 1;
    }
    // A directory made above could be a symlink planted since the check: check again.
    for f in &files {
        if let Some(parent) = f.target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot make {}: {e}", parent.display()))?;
        }
        place.check(&f.target)?;
    }
    let mut partials = Vec::new();
    for f in &files {
        let part = part_path(&f.target);
        if let Ok(meta) = std::fs::symlink_metadata(&part) {
            if meta.is_file() && meta.len() > 0 && meta.len() <= f.size {
                if let Ok((len, h)) = hash_file(&part) {
                    partials.push(Partial {
                        p: f.p.clone(),
                        offset: len,
                        sha256: hex::encode(h.finalize()),
                    });
                }
            }
        }
    }
    put(
        tx,
        &Ctl::Resume {
            files: partials.clone(),
        },
    )
    .await?;
    let mut prog = summary.progress;
    progress(prog);
    for f in &files {
        let (p, offset) = match take_ctl(rx).await? {
            Ctl::Data { p, offset } => (p, offset),
            other => return Err(format!("expected the content of {}, got {other:?}", f.p)),
        };
        if p != f.p {
            return Err(format!("expected the content of {:?}, got {p:?}", f.p));
        }
        let part = part_path(&f.target);
        let mut hasher = Sha256::new();
        let mut opts = tokio::fs::OpenOptions::new();
        opts.write(true).create(true);
        #[cfg(unix)]
        opts.mode(0o600);
        let mut file = if offset > 0 {
            // Only an offset this side offered, over the same prefix.
            let ours = partials.iter().find(|x| x.p == f.p);
            if ours.map(|x| x.offset) != Some(offset) {
                return Err(format!(
                    "the other side resumed {:?} at {offset}, which this side did not offer",
                    f.p
                ));
            }
            let (_, h) =
                hash_file(&part).map_err(|e| format!("cannot read {}: {e}", part.display()))?;
            hasher = h;
            let mut file = opts
                .open(&part)
                .await
                .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
            file.seek(std::io::SeekFrom::Start(offset))
                .await
                .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
            file
        } else {
            opts.truncate(true);
            opts.open(&part)
                .await
                .map_err(|e| format!("cannot write {}: {e}", part.display()))?
        };
        let mut at = offset;
        prog.done += offset;
        prog.resumed += offset;
        let zeros = vec![0u8; COPY_PIECE];
        let sha = loop {
            match take(rx).await? {
                Piece::Bytes(b) => {
                    at += b.len() as u64;
                    if at > f.size {
                        return Err(format!(
                            "the other side sent more of {:?} than its size",
                            f.p
                        ));
                    }
                    hasher.update(&b);
                    file.write_all(&b)
                        .await
                        .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
                    prog.sent += b.len() as u64;
                    prog.done += b.len() as u64;
                }
                Piece::Ctl(Ctl::Hole { n }) => {
                    at += n;
                    if at > f.size {
                        return Err(format!(
                            "the other side sent more of {:?} than its size",
                            f.p
                        ));
                    }
                    let mut left = n;
                    while left > 0 {
                        let k = (left as usize).min(zeros.len());
                        hasher.update(&zeros[..k]);
                        left -= k as u64;
                    }
                    file.seek(std::io::SeekFrom::Current(n as i64))
                        .await
                        .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
                    prog.holes += n;
                    prog.done += n;
                }
                Piece::Ctl(Ctl::Done { sha256 }) => break sha256,
                Piece::Ctl(other) => {
                    return Err(format!("unexpected {other:?} in the content of {:?}", f.p))
                }
            }
            progress(prog);
        };
        if at != f.size {
            return Err(format!(
                "{:?} arrived with {at} bytes, {} were listed",
                f.p, f.size
            ));
        }
        // A trailing hole: the length says it.
        file.set_len(f.size)
            .await
            .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
        file.sync_all()
            .await
            .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
        drop(file);
        let got = hex::encode(hasher.finalize());
        if got != sha {
            let _ = std::fs::remove_file(&part);
            return Err(format!(
                "{} arrived damaged (SHA-256 {got}, the sender's is {sha}); run the copy again",
                f.target.display()
            ));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ =
                std::fs::set_permissions(&part, std::fs::Permissions::from_mode(f.mode & 0o777));
        }
        // Checked once more right before it lands (a symlink could have been planted).
        let target = place.check(&f.target)?;
        std::fs::rename(&part, &target)
            .map_err(|e| format!("cannot place {}: {e}", target.display()))?;
        summary.files += 1;
        progress(prog);
    }
    match take_ctl(rx).await? {
        Ctl::Finished => {}
        other => return Err(format!("expected the end of the copy, got {other:?}")),
    }
    #[cfg(unix)]
    for (d, mode) in dirs.iter().skip(usize::from(is_dir)) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode & 0o777 | 0o700));
    }
    summary.dest = root.display().to_string();
    summary.progress = prog;
    put(
        tx,
        &Ctl::Ok {
            dest: summary.dest.clone(),
        },
    )
    .await?;
    Ok(summary)
}
