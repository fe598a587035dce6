//! Host terminals: login shells on PTYs that belong to the workspace daemon.
//!
//! A [`Terminal`] runs the host user's login shell in the workspace (`portable-pty`). It
//! keeps running while no client is attached: a reader thread always drains the PTY into
//! the terminal's [`Output`] (a bounded ring of recent bytes plus a `vt100` model of the
//! screen), so a shell never blocks on a slow or absent client. Clients follow the output by
//! offset ([`Terminal::follow`]); one that lags behind the ring, or arrives without the
//! bytes it needs, gets the current screen instead of a replay of everything.
//!
//! This is the user's own terminal: it is not sandboxed (the agent's bash tool is).

pub mod attach;
pub mod mention;

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::num::NonZeroU16;

use portable_pty::{CommandBuilder, MasterPty, PtySize as NativeSize};
use reasonix_forward::proto::{PtyInfo, PtySize};
use reasonix_forward::sync::LockExt;
use tokio::sync::watch;

/// Recent output bytes kept per terminal for clients that re-attach with an offset.
/// Older bytes are only in the screen model.
pub const RING_BYTES: usize = 1024 * 1024;

/// Lines of scrollback in the screen model (not replayed; kept so a later
/// scrollback view has something to show).
const MODEL_SCROLLBACK: usize = 1000;

/// How long a closed terminal's shell has after SIGHUP before SIGKILL.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Why a terminal could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum PtyError {
    /// The PTY or the shell could not be started.
    #[error("cannot start a shell on a new terminal in {workspace}: {reason}")]
    Spawn {
        /// Workspace the shell was to run in.
        workspace: String,
        /// What failed.
        reason: String,
    },
    /// No terminal with this id.
    #[error("no terminal {0} in this workspace; `reasonix term --list` shows the open ones")]
    NotFound(u64),
    /// A size with zero rows or columns.
    #[error("terminal size {cols}x{rows} is not usable (both must be at least 1)")]
    BadSize {
        /// Columns asked for.
        cols: u16,
        /// Rows asked for.
        rows: u16,
    },
}

/// Output of one terminal: the ring of recent bytes and the screen model.
struct Output {
    /// Bytes `ring_start .. end` of the output stream.
    ring: VecDeque<u8>,
    ring_start: u64,
    end: u64,
    screen: vt100::Parser,
    exited: Option<String>,
}

/// Where a follower starts reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// The raw bytes from this offset are held: send them.
    Replay(u64),
    /// Draw this screen (escape sequences), then continue from `offset`.
    Screen {
        /// Output offset the screen corresponds to.
        offset: u64,
        /// Screen size.
        size: PtySize,
        /// The drawing.
        data: Vec<u8>,
    },
}

/// What a follower reads next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Raw output from `offset`.
    Bytes {
        /// Offset of the first byte.
        offset: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The follower fell behind the ring: the current screen instead.
    Screen {
        /// Offset it corresponds to.
        offset: u64,
        /// Size.
        size: PtySize,
        /// The drawing.
        data: Vec<u8>,
    },
    /// Nothing new; the shell exited with this status.
    Exited(String),
    /// Nothing new yet.
    Wait,
}

/// One shell on a PTY.
pub struct Terminal {
    /// Id within the daemon.
    pub id: u64,
    /// The shell's pid.
    pub pid: u32,
    /// The shell program.
    pub shell: String,
    started: String,
    size: Mutex<PtySize>,
    master: Mutex<Box<dyn MasterPty + Send>>,
    /// Keystrokes go to a writer thread, so a shell that stops reading its input never
    /// blocks the link's receive loop.
    input: std::sync::mpsc::Sender<Vec<u8>>,
    killer: Mutex<Box<dyn portable_pty::ChildKiller + Send + Sync>>,
    output: Mutex<Output>,
    /// Bumped (to the output end) on every output and on exit; followers wait on it.
    changed: watch::Sender<u64>,
    /// Links following this terminal, by follower key; a client counts while its link's
    /// transport is up (a killed client's link lingers for a resume, but shows nobody).
    clients: Mutex<Vec<(u64, reasonix_forward::link::Link)>>,
}

impl Terminal {
    /// Size of a terminal as the wire has it.
    pub fn size(&self) -> PtySize {
        *self.size.lock_or_recover()
    }

    /// The shell's exit status, once it exited.
    pub fn exited(&self) -> Option<String> {
        self.output.lock_or_recover().exited.clone()
    }

    /// Description for listings.
    pub fn info(&self) -> PtyInfo {
        let out = self.output.lock_or_recover();
        PtyInfo {
            id: self.id,
            pid: self.pid,
            shell: self.shell.clone(),
            size: self.size(),
            started: self.started.clone(),
            clients: self.connected_clients(),
            output_end: out.end,
            exited: out.exited.clone(),
        }
    }

    /// Write keystrokes to the shell (in order; never blocks).
    pub fn write(&self, data: Vec<u8>) {
        if !data.is_empty() && self.input.send(data).is_err() {
            tracing::debug!(pty = self.id, "input after the shell's input closed");
        }
    }

    /// Resize the PTY (the shell's foreground process group gets SIGWINCH) and the model.
    pub fn resize(&self, size: PtySize) -> Result<(), PtyError> {
        check_size(size)?;
        let mut current = self.size.lock_or_recover();
        if *current == size {
            return Ok(());
        }
        if let Err(e) = self.master.lock_or_recover().resize(native(size)) {
            tracing::warn!(pty = self.id, "resize failed: {e}");
        }
        self.output
            .lock_or_recover()
            .screen
            .screen_mut()
            .set_size(nz(size.rows), nz(size.cols));
        *current = size;
        Ok(())
    }

    /// Where a follower that already shows everything before `have` starts.
    pub fn start(&self, have: Option<u64>) -> Start {
        let out = self.output.lock_or_recover();
        match have {
            Some(h) if h >= out.ring_start && h <= out.end => Start::Replay(h),
            _ => {
                let (offset, size, data) = screen_of(&out);
                Start::Screen { offset, size, data }
            }
        }
    }

    /// What a follower at `cursor` reads next (at most `max` bytes).
    pub fn next(&self, cursor: u64, max: usize) -> Next {
        let out = self.output.lock_or_recover();
        if cursor < out.ring_start {
            let (offset, size, data) = screen_of(&out);
            return Next::Screen { offset, size, data };
        }
        if cursor < out.end {
            let skip = (cursor - out.ring_start) as usize;
            let n = ((out.end - cursor) as usize).min(max);
            let data: Vec<u8> = out.ring.range(skip..skip + n).copied().collect();
            return Next::Bytes {
                offset: cursor,
                data,
            };
        }
        match &out.exited {
            Some(s) => Next::Exited(s.clone()),
            None => Next::Wait,
        }
    }

    /// A watch that changes whenever output arrives or the shell exits.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Count a follower in (with its link) or out (for listings).
    pub fn client_delta(&self, key: u64, link: Option<reasonix_forward::link::Link>) {
        let mut clients = self.clients.lock_or_recover();
        clients.retain(|(k, _)| *k != key);
        if let Some(link) = link {
            clients.push((key, link));
        }
    }

    /// Followers whose link is connected now.
    pub fn connected_clients(&self) -> u32 {
        self.clients
            .lock_or_recover()
            .iter()
            .filter(|(_, l)| l.is_connected())
            .count() as u32
    }

    /// End the shell: SIGHUP to its process group (what a terminal closing does), SIGKILL
    /// after [`CLOSE_GRACE`] if it is still there.
    pub fn close(self: &Arc<Self>) {
        if self.exited().is_some() {
            return;
        }
        // SAFETY: kill(2) with a negative pid signals the process group the shell leads (it
        // is the session leader of its PTY); no memory is involved.
        unsafe {
            libc::kill(-(self.pid as i32), libc::SIGHUP);
        }
        let me = Arc::clone(self);
        std::thread::spawn(move || {
            std::thread::sleep(CLOSE_GRACE);
            if me.exited().is_none() {
                let _ = me.killer.lock_or_recover().kill();
            }
        });
    }
}

/// The screen model's drawing at the current offset.
fn screen_of(out: &Output) -> (u64, PtySize, Vec<u8>) {
    let screen = out.screen.screen();
    let (rows, cols) = screen.size();
    let mut data = Vec::new();
    // Enter or leave the alternate screen as the program did, reset attributes, clear, draw.
    data.extend_from_slice(if screen.alternate_screen() {
        b"\x1b[?1049h"
    } else {
        b"\x1b[?1049l"
    });
    data.extend_from_slice(b"\x1b[m\x1b[H\x1b[2J");
    data.extend_from_slice(screen.state_formatted().as_bytes());
    (
        out.end,
        PtySize {
            cols: cols.get(),
            rows: rows.get(),
        },
        data,
    )
}

/// Sizes are checked to be at least 1 before they get here ([`check_size`]); 0 becomes 1.
fn nz(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}

fn check_size(size: PtySize) -> Result<(), PtyError> {
    if size.cols == 0 || size.rows == 0 {
        return Err(PtyError::BadSize {
            cols: size.cols,
            rows: size.rows,
        });
    }
    Ok(())
}

fn native(size: PtySize) -> NativeSize {
    NativeSize {
        rows: size.rows,
        cols: size.cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}

/// The workspace's terminals.
pub struct Terminals {
    workspace: PathBuf,
    next_id: AtomicU64,
    all: Mutex<BTreeMap<u64, Arc<Terminal>>>,
}

impl Terminals {
    /// No terminals yet; shells will start in `workspace`.
    pub fn new(workspace: PathBuf) -> Arc<Terminals> {
        Arc::new(Terminals {
            workspace,
            next_id: AtomicU64::new(1),
            all: Mutex::new(BTreeMap::new()),
        })
    }

    /// Start the host user's login shell on a new PTY of `size` with `TERM=term`.
    pub fn open(&self, size: PtySize, term: &str) -> Result<Arc<Terminal>, PtyError> {
        check_size(size)?;
        let spawn_err = |reason: String| PtyError::Spawn {
            workspace: self.workspace.display().to_string(),
            reason,
        };
        let pair = portable_pty::native_pty_system()
            .openpty(native(size))
            .map_err(|e| spawn_err(format!("openpty: {e}")))?;
        // The daemon's environment is the host user's (over SSH) or the allow-listed one
        // local mode passes (no provider keys either way); our own knobs are not the shell's.
        let mut cmd = CommandBuilder::new_default_prog();
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("REASONIX_") {
                cmd.env_remove(&k);
            }
        }
        cmd.env(
            "TERM",
            if term.is_empty() {
                "xterm-256color"
            } else {
                term
            },
        );
        // The user's own terminals get the forwarded ssh-agent whenever the daemon serves one
        // (#36 §2), in place of one the daemon inherited from the SSH session that started it.
        if let Some(sock) = crate::agent_sock::socket_path() {
            cmd.env("SSH_AUTH_SOCK", sock);
        }
        cmd.cwd(&self.workspace);
        let shell = cmd.get_shell();
        let child = pair
            .slave
            .spawn_command(cmd)
            .map_err(|e| spawn_err(format!("{shell}: {e}")))?;
        // The slave end stays open in the child only, so the reader sees EOF when the
        // shell (and everything it started on the terminal) is gone.
        drop(pair.slave);
        let pid = child.process_id().unwrap_or(0);
        let mut reader = pair
            .master
            .try_clone_reader()
            .map_err(|e| spawn_err(format!("PTY reader: {e}")))?;
        let mut writer = pair
            .master
            .take_writer()
            .map_err(|e| spawn_err(format!("PTY writer: {e}")))?;
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (input_tx, input_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let mut parser = vt100::Parser::new(nz(size.rows), nz(size.cols), MODEL_SCROLLBACK);
        parser.process(b"");
        let terminal = Arc::new(Terminal {
            id,
            pid,
            shell: shell.clone(),
            started: crate::journal::now_rfc3339(),
            size: Mutex::new(size),
            master: Mutex::new(pair.master),
            input: input_tx,
            killer: Mutex::new(child.clone_killer()),
            output: Mutex::new(Output {
                ring: VecDeque::new(),
                ring_start: 0,
                end: 0,
                screen: parser,
                exited: None,
            }),
            changed: watch::channel(0).0,
            clients: Mutex::new(Vec::new()),
        });
        std::thread::Builder::new()
            .name(format!("pty{id}-in"))
            .spawn(move || {
                while let Ok(data) = input_rx.recv() {
                    if writer
                        .write_all(&data)
                        .and_then(|()| writer.flush())
                        .is_err()
                    {
                        return;
                    }
                }
            })
            .map_err(|e| spawn_err(format!("input thread: {e}")))?;
        let t = Arc::clone(&terminal);
        let mut child = child;
        std::thread::Builder::new()
            .name(format!("pty{id}-out"))
            .spawn(move || {
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => t.push_output(&buf[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        // EIO is how Linux reports that the last slave fd closed.
                        Err(_) => break,
                    }
                }
                let status = match child.wait() {
                    Ok(s) => match s.signal() {
                        Some(sig) => format!("killed by {sig}"),
                        None => format!("exit status {}", s.exit_code()),
                    },
                    Err(e) => format!("unknown ({e})"),
                };
                tracing::info!(pty = t.id, %status, "terminal shell exited");
                let end = {
                    let mut out = t.output.lock_or_recover();
                    out.exited = Some(status);
                    out.end
                };
                t.changed.send_replace(end);
            })
            .map_err(|e| spawn_err(format!("output thread: {e}")))?;
        tracing::info!(pty = id, pid, %shell, "terminal opened");
        self.all.lock_or_recover().insert(id, Arc::clone(&terminal));
        Ok(terminal)
    }

    /// A terminal by id.
    pub fn get(&self, id: u64) -> Result<Arc<Terminal>, PtyError> {
        self.all
            .lock_or_recover()
            .get(&id)
            .cloned()
            .ok_or(PtyError::NotFound(id))
    }

    /// Every terminal, oldest first. Terminals whose shell exited are listed (with how)
    /// until [`Terminals::close`] or until they are listed once with no client attached.
    pub fn list(&self) -> Vec<PtyInfo> {
        let mut all = self.all.lock_or_recover();
        let infos: Vec<PtyInfo> = all.values().map(|t| t.info()).collect();
        all.retain(|_, t| t.exited().is_none() || t.connected_clients() > 0);
        infos
    }

    /// Close a terminal (see [`Terminal::close`]) and forget it.
    pub fn close(&self, id: u64) -> Result<(), PtyError> {
        let t = self
            .all
            .lock_or_recover()
            .remove(&id)
            .ok_or(PtyError::NotFound(id))?;
        t.close();
        Ok(())
    }

    /// True while some shell runs: the daemon does not exit on idle then.
    pub fn any_running(&self) -> bool {
        self.all
            .lock_or_recover()
            .values()
            .any(|t| t.exited().is_none())
    }

    /// Close every terminal (daemon shutdown).
    pub fn close_all(&self) {
        let all: Vec<Arc<Terminal>> = std::mem::take(&mut *self.all.lock_or_recover())
            .into_values()
            .collect();
        for t in all {
            t.close();
        }
    }
}

impl Terminal {
    fn push_output(&self, bytes: &[u8]) {
        let end = {
            let mut out = self.output.lock_or_recover();
            out.screen.process(bytes);
            out.ring.extend(bytes.iter().copied());
            out.end += bytes.len() as u64;
            let over = out.ring.len().saturating_sub(RING_BYTES);
            if over > 0 {
                out.ring.drain(..over);
                out.ring_start += over as u64;
            }
            out.end
        };
        self.changed.send_replace(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_until(t: &Terminal, cursor: &mut u64, seen: &mut Vec<u8>, needle: &str) {
        let mut watch = t.watch();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            match t.next(*cursor, 4096) {
                Next::Bytes { offset, data } => {
                    assert_eq!(offset, *cursor);
                    *cursor += data.len() as u64;
                    seen.extend_from_slice(&data);
                    if String::from_utf8_lossy(seen).contains(needle) {
                        return;
                    }
                }
                Next::Wait => {
                    let _ = tokio::time::timeout_at(deadline, watch.changed()).await;
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "no {needle:?} in {:?}",
                        String::from_utf8_lossy(seen)
                    );
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    /// The shell's HOME for a test: a fresh folder, so the machine user's login profile
    /// (pyenv's rehash lock, which concurrent or killed login shells hold for up to 60 s)
    /// cannot hold back the prompt. nextest runs each test in its own process.
    fn fresh_home() -> tempfile::TempDir {
        let home = tempfile::tempdir().expect("tempdir");
        std::env::set_var("HOME", home.path());
        home
    }

    #[tokio::test]
    async fn shell_runs_in_the_workspace_with_term_size_and_no_reasonix_knobs() {
        let ws = tempfile::tempdir().expect("tempdir");
        let _home = fresh_home();
        std::env::set_var("REASONIX_PTY_TEST_SECRET", "leaked");
        let terms = Terminals::new(ws.path().to_path_buf());
        let t = terms
            .open(PtySize { cols: 91, rows: 27 }, "vt220")
            .expect("open");
        let (mut cursor, mut seen) = (0, Vec::new());
        t.write(b"echo \"A=$(pwd)|$TERM|$(stty size)|${REASONIX_PTY_TEST_SECRET}=Z\"\n".to_vec());
        let want = format!(
            "A={}|vt220|27 91|=Z",
            ws.path().canonicalize().expect("canonical").display()
        );
        read_until(&t, &mut cursor, &mut seen, &want).await;
        t.resize(PtySize { cols: 50, rows: 10 }).expect("resize");
        t.write(b"stty size\n".to_vec());
        read_until(&t, &mut cursor, &mut seen, "10 50").await;
        // A client arriving now without bytes gets the screen, which shows the same text.
        match t.start(None) {
            Start::Screen { offset, size, data } => {
                assert_eq!(offset, cursor);
                assert_eq!(size, PtySize { cols: 50, rows: 10 });
                let mut model = vt100::Parser::new(nz(10), nz(50), 0);
                model.process(&data);
                assert!(
                    model.screen().contents().contains("10 50"),
                    "{:?}",
                    model.screen().contents()
                );
            }
            other => panic!("expected a screen, got {other:?}"),
        }
        assert_eq!(t.start(Some(3)), Start::Replay(3));
        terms.close(t.id).expect("close");
        let mut watch = t.watch();
        tokio::time::timeout(Duration::from_secs(10), async {
            while t.exited().is_none() {
                let _ = watch.changed().await;
            }
        })
        .await
        .expect("shell exits after close");
        assert!(matches!(terms.get(t.id), Err(PtyError::NotFound(_))));
    }

    #[tokio::test]
    async fn a_follower_behind_the_ring_gets_the_screen() {
        let ws = tempfile::tempdir().expect("tempdir");
        let _home = fresh_home();
        let terms = Terminals::new(ws.path().to_path_buf());
        let t = terms
            .open(PtySize { cols: 80, rows: 24 }, "")
            .expect("open");
        // More than the ring holds.
        t.write(b"head -c 1500000 /dev/zero | tr '\\0' x; echo; echo DONE-$((6*7))\n".to_vec());
        let mut watch = t.watch();
        tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                if t.output
                    .lock_or_recover()
                    .screen
                    .screen()
                    .contents()
                    .contains("DONE-42")
                {
                    break;
                }
                let _ = watch.changed().await;
            }
        })
        .await
        .expect("output arrives");
        match t.next(0, 4096) {
            Next::Screen { data, .. } => {
                let mut model = vt100::Parser::new(nz(24), nz(80), 0);
                model.process(&data);
                assert!(model.screen().contents().contains("DONE-42"));
            }
            other => panic!("expected a screen, got {other:?}"),
        }
        assert!(matches!(t.start(Some(0)), Start::Screen { .. }));
        terms.close_all();
    }
}
