//! `reasonix term`: a host shell that survives the network, without the agent.
//!
//! The shell runs on a PTY owned by the workspace daemon (`remote-agent/src/pty/`); this
//! front end puts the local terminal in raw mode, sends keystrokes and window sizes over
//! the link and writes the shell's output. The link resumes underneath through drops
//! (keystrokes typed meanwhile wait in its replay buffer and arrive once); while it is down
//! a one-line status is drawn on the top row, and restored from a local model of the screen
//! when the link is back. `~.` at the start of a line detaches (the shell keeps running);
//! `~~` sends one `~`.

use std::io::{IsTerminal, Write};
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reasonix_forward::channel::{Channel, ChannelAccepted, ChannelData, ChannelEnd, ChannelOpen};
use reasonix_forward::proto::{
    PtyBytes, PtyData, PtyInfo, PtyOpen, PtyRequest, PtyResponse, PtySize, Request, Response,
};
use reasonix_forward::rpc::CallError;
use tokio::sync::mpsc;

use crate::client::{Client, ClientEvent, ConnState};

/// Why `reasonix term` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum TermError {
    /// The host could not be reached (or retrying cannot help).
    #[error("{0}")]
    Connect(String),
    /// The host refused a terminal request.
    #[error("{0}")]
    Host(String),
    /// The local terminal cannot be used.
    #[error("{0}")]
    Local(String),
}

impl From<CallError> for TermError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Remote(r) => TermError::Host(r.message),
            CallError::Link(l) => TermError::Connect(l.to_string()),
        }
    }
}

/// How a terminal session ended without error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TermEnd {
    /// The user typed `~.`; the shell keeps running.
    Detached(u64),
    /// The shell exited.
    Exited(String),
}

/// Which terminal to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Which {
    /// The newest running terminal no client shows, else a new one.
    #[default]
    Reuse,
    /// Always a new one.
    New,
    /// This one.
    Id(u64),
}

/// Wait for the first connection (or the reason it cannot be made).
pub async fn connected(events: &mut mpsc::UnboundedReceiver<ClientEvent>) -> Result<(), TermError> {
    while let Some(ev) = events.recv().await {
        match ev {
            ClientEvent::Connection(ConnState::Connected { .. }) => return Ok(()),
            ClientEvent::Connection(ConnState::Failed { reason, .. }) => {
                return Err(TermError::Connect(reason))
            }
            ClientEvent::Connection(ConnState::Reconnecting { reason, .. }) => {
                eprintln!("reasonix: not connected yet ({reason}); retrying");
            }
            _ => {}
        }
    }
    Err(TermError::Connect("the client stopped".into()))
}

/// The workspace's terminals.
pub async fn list(client: &Client) -> Result<Vec<PtyInfo>, TermError> {
    match client.request(Request::Pty(PtyRequest::List)).await? {
        Response::Pty(PtyResponse::List { ptys }) => Ok(ptys),
        other => Err(TermError::Host(format!("unexpected answer {other:?}"))),
    }
}

/// Close a terminal.
pub async fn close(client: &Client, pty: u64) -> Result<(), TermError> {
    client
        .request(Request::Pty(PtyRequest::Close { pty }))
        .await?;
    Ok(())
}

/// The `--list` table.
pub fn table(ptys: &[PtyInfo]) -> String {
    let mut out = String::from("ID  PID      SIZE     CLIENTS  STARTED                    STATE\n");
    for p in ptys {
        out.push_str(&format!(
            "{:<3} {:<8} {:<8} {:<8} {:<26} {}\n",
            p.id,
            p.pid,
            format!("{}x{}", p.size.cols, p.size.rows),
            p.clients,
            p.started,
            p.exited.as_deref().unwrap_or("running"),
        ));
    }
    out
}

/// What the escape reader makes of keystrokes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// Send these bytes to the shell.
    Send(Vec<u8>),
    /// `~.` was typed at the start of a line.
    Detach,
}

/// The `~.` escape, as in OpenSSH: recognised only right after Enter (or at the start),
/// `~~` sends one `~`, `~` followed by anything else sends both.
#[derive(Debug)]
pub struct Escape {
    line_start: bool,
    tilde: bool,
}

impl Default for Escape {
    fn default() -> Self {
        Self {
            line_start: true,
            tilde: false,
        }
    }
}

impl Escape {
    /// Feed keystrokes; returns what to do, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        let mut out = Vec::new();
        let mut send = Vec::new();
        for &b in bytes {
            if self.tilde {
                self.tilde = false;
                match b {
                    b'.' => {
                        if !send.is_empty() {
                            out.push(Key::Send(std::mem::take(&mut send)));
                        }
                        out.push(Key::Detach);
                        return out;
                    }
                    b'~' => {
                        send.push(b'~');
                        self.line_start = false;
                        continue;
                    }
                    _ => send.push(b'~'),
                }
            } else if self.line_start && b == b'~' {
                self.tilde = true;
                continue;
            }
            send.push(b);
            self.line_start = b == b'\r' || b == b'\n';
        }
        if !send.is_empty() {
            out.push(Key::Send(send));
        }
        out
    }
}

fn nz(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}

/// The local terminal's size (80x24 when it cannot be read).
fn local_size() -> PtySize {
    let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
    PtySize {
        cols: cols.max(1),
        rows: rows.max(1),
    }
}

/// Restores the local terminal's mode when dropped (also on panic). On Windows the console
/// also interprets VT output meanwhile (see `platform::console`).
struct RawMode(Option<crate::platform::console::TermConsole>);

impl RawMode {
    fn enable() -> Result<RawMode, TermError> {
        crossterm::terminal::enable_raw_mode().map_err(|e| {
            TermError::Local(format!(
                "cannot put the local terminal in raw mode: {e}; run `reasonix term` in a terminal"
            ))
        })?;
        Ok(RawMode(Some(
            crate::platform::console::TermConsole::enable(),
        )))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // VT output was switched on after raw mode: undo it first.
        self.0 = None;
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// The local terminal: what was written to it, modelled, so the status line can be taken
/// away again without a redraw from the host.
struct Local {
    model: vt100::Parser,
    status_shown: bool,
    out: std::io::Stdout,
}

impl Local {
    fn new(size: PtySize) -> Self {
        Self {
            model: vt100::Parser::new(nz(size.rows), nz(size.cols), 0),
            status_shown: false,
            out: std::io::stdout(),
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        // Output means the link is back; the status must go before anything scrolls it
        // into the terminal's history (the connection event may come a moment later).
        self.clear_status();
        self.model.process(bytes);
        let mut out = self.out.lock();
        let _ = out.write_all(bytes);
        let _ = out.flush();
    }

    /// Whether the shell's program asked for application cursor keys (DECCKM).
    fn application_cursor(&self) -> bool {
        self.model.screen().application_cursor()
    }

    fn resize(&mut self, size: PtySize) {
        self.model
            .screen_mut()
            .set_size(nz(size.rows), nz(size.cols));
    }

    fn reset(&mut self, size: PtySize) {
        self.model = vt100::Parser::new(nz(size.rows), nz(size.cols), 0);
    }

    /// Put the cursor and attributes back where the shell left them.
    fn restore_cursor(&self, buf: &mut Vec<u8>) {
        let screen = self.model.screen();
        let (row, col) = screen.cursor_position();
        buf.extend_from_slice(b"\x1b[m");
        buf.extend_from_slice(screen.attributes_formatted().as_bytes());
        buf.extend_from_slice(format!("\x1b[{};{}H", row + 1, col + 1).as_bytes());
    }

    /// Draw `text` in reverse video on the top row (not into the model).
    fn status(&mut self, text: &str) {
        let (_, cols) = self.model.screen().size();
        let cols = cols.get() as usize;
        let mut line: String = text.chars().take(cols).collect();
        let pad = cols.saturating_sub(line.chars().count());
        line.extend(std::iter::repeat_n(' ', pad));
        let mut buf = format!("\x1b[1;1H\x1b[0;7m{line}").into_bytes();
        self.restore_cursor(&mut buf);
        self.status_shown = true;
        let mut out = self.out.lock();
        let _ = out.write_all(&buf);
        let _ = out.flush();
    }

    /// Redraw the top row as the shell drew it.
    fn clear_status(&mut self) {
        if !self.status_shown {
            return;
        }
        self.status_shown = false;
        let screen = self.model.screen();
        let (_, cols) = screen.size();
        let mut buf = b"\x1b[1;1H\x1b[m\x1b[2K".to_vec();
        if let Some(row) = screen.rows_formatted(0, cols.get()).next() {
            buf.extend_from_slice(row.as_bytes());
        }
        self.restore_cursor(&mut buf);
        let mut out = self.out.lock();
        let _ = out.write_all(&buf);
        let _ = out.flush();
    }
}

/// Pick or open the terminal, then run it in the local terminal until `~.` or its exit.
pub async fn run(
    client: &Client,
    events: &mut mpsc::UnboundedReceiver<ClientEvent>,
    which: Which,
    place: &str,
) -> Result<TermEnd, TermError> {
    if !std::io::stdin().is_terminal() {
        return Err(TermError::Local(
            "reasonix term needs a terminal on its standard input; use `reasonix term --list` to look at terminals from a script".into(),
        ));
    }
    let size = local_size();
    let term = std::env::var("TERM").unwrap_or_default();
    let target = match which {
        Which::New => None,
        Which::Id(id) => Some(id),
        Which::Reuse => list(client)
            .await?
            .iter()
            .rev()
            .find(|p| p.exited.is_none() && p.clients == 0)
            .map(|p| p.id),
    };
    let attach = |have: Option<u64>, pty: Option<u64>| {
        let open = match pty {
            Some(pty) => PtyOpen::Attach {
                pty,
                have,
                size: local_size(),
            },
            None => PtyOpen::Open {
                size: local_size(),
                term: term.clone(),
            },
        };
        async move {
            match client
                .open_channel(ChannelOpen::Pty(open), OUTPUT_WINDOW)
                .await?
            {
                (ChannelAccepted::Pty(info), channel) => Ok::<_, TermError>((info, channel)),
                (other, _) => Err(TermError::Host(format!("unexpected answer {other:?}"))),
            }
        }
    };
    let (info, channel) = attach(None, target).await?;
    // The terminal's channel: its output comes on it, keystrokes go on it. None while the
    // link is being replaced (the host forgot the old one); attached again once it is up.
    let mut channel = Some(channel);
    let pty = info.id;
    eprintln!(
        "reasonix: terminal {pty} (shell {} pid {}) on {place}; type ~. at the start of a line to detach",
        info.shell, info.pid
    );
    let raw = RawMode::enable()?;
    let mut local = Local::new(size);
    let (keys_tx, mut keys) = mpsc::unbounded_channel::<Vec<u8>>();
    // The shell's DECCKM (application cursor keys), for the Windows key encoder.
    let app_cursor = Arc::new(AtomicBool::new(false));
    let mut interrupts = crate::platform::signals::ConsoleInterrupts::new();
    let reader_app_cursor = app_cursor.clone();
    std::thread::Builder::new()
        .name("term-stdin".into())
        .spawn(move || {
            let mut console = crate::platform::console::Keys::new(reader_app_cursor);
            loop {
                match console.read() {
                    Ok(bytes) if bytes.is_empty() => return,
                    Err(_) => return,
                    Ok(bytes) => {
                        if keys_tx.send(bytes).is_err() {
                            return;
                        }
                    }
                }
            }
        })
        .map_err(|e| TermError::Local(format!("cannot read the keyboard: {e}")))?;
    let mut winch = crate::platform::signals::Resizes::new()
        .map_err(|e| TermError::Local(format!("cannot watch the window size: {e}")))?;
    let mut escape = Escape::default();
    // Output offset of the next byte this terminal shows (None until the first screen).
    let mut have: Option<u64> = None;
    let mut fresh_link = false;
    // Keystrokes typed while no channel is up, sent once one is.
    let mut typed: Vec<u8> = Vec::new();
    let end = loop {
        tokio::select! {
            k = keys.recv() => {
                let Some(bytes) = k else { break TermEnd::Detached(pty) };
                for key in escape.feed(&bytes) {
                    match key {
                        Key::Send(data) => {
                            typed.extend_from_slice(&data);
                            send_typed(channel.as_ref(), &mut typed).await;
                        }
                        Key::Detach => {
                            if let Some(ch) = channel.take() {
                                // Told before this process exits, so the host stops
                                // following at once.
                                let _ = tokio::time::timeout(Duration::from_secs(2), async {
                                    ch.rx.handle().cancel_queued("detached").await;
                                    client.flush().await
                                })
                                .await;
                            }
                            drop(raw);
                            return Ok(TermEnd::Detached(pty));
                        }
                    }
                }
            }
            _ = interrupts.next() => {
                // Ctrl-C (or Ctrl-Break) that the console made an event of: the Ctrl-C key,
                // for the host's shell.
                for key in escape.feed(&[0x03]) {
                    if let Key::Send(data) = key {
                        typed.extend_from_slice(&data);
                    }
                }
                send_typed(channel.as_ref(), &mut typed).await;
            }
            _ = winch.next() => {
                let size = local_size();
                local.resize(size);
                if let Some(ch) = &channel {
                    let _ = ch.tx.send(ChannelData::Pty(PtyData::Resize { size })).await;
                }
            }
            d = next_output(&mut channel) => {
                let Some(d) = d else {
                    let ended = channel.take().and_then(|c| c.rx.end().cloned());
                    match ended {
                        // The link is being replaced: attach again once it is up.
                        Some(ChannelEnd::LinkClosed) | None => continue,
                        Some(ChannelEnd::Closed(_)) => break TermEnd::Detached(pty),
                        Some(end @ (ChannelEnd::Cancelled(_) | ChannelEnd::CancelledByPeer(_))) => {
                            drop(raw);
                            return Err(TermError::Host(format!("the terminal stopped: {end}")));
                        }
                    }
                };
                match d {
                    ChannelData::Pty(PtyData::Output { offset, data }) => {
                        let at = have.unwrap_or(offset);
                        let end = offset + data.0.len() as u64;
                        if offset > at {
                            // Cannot happen on one link (it is exactly-once); after a fresh
                            // link, ask for what is missing.
                            tracing::warn!(offset, at, "terminal output gap; re-attaching");
                            channel = Some(attach(Some(at), Some(pty)).await?.1);
                            continue;
                        }
                        if end > at {
                            local.write(&data.0[(at - offset) as usize..]);
                            app_cursor.store(local.application_cursor(), Ordering::Relaxed);
                            have = Some(end);
                        }
                    }
                    ChannelData::Pty(PtyData::Screen { offset, size, data }) => {
                        local.reset(size);
                        local.write(&data.0);
                        app_cursor.store(local.application_cursor(), Ordering::Relaxed);
                        have = Some(offset);
                    }
                    ChannelData::Pty(PtyData::Exited { status }) => break TermEnd::Exited(status),
                    other => tracing::debug!("ignored on a terminal channel: {other:?}"),
                }
            }
            ev = events.recv() => {
                let Some(ev) = ev else {
                    break TermEnd::Detached(pty);
                };
                match ev {
                    ClientEvent::Connection(ConnState::Reconnecting { attempt, last_contact_secs, .. }) => {
                        local.status(&format!(
                            " reasonix: connection to {place} lost {last_contact_secs} s ago; reconnecting (attempt {attempt}); the shell keeps running; ~. detaches"
                        ));
                    }
                    ClientEvent::Connection(ConnState::Connected { .. }) => {
                        local.clear_status();
                        if std::mem::take(&mut fresh_link) || channel.is_none() {
                            // The old link is gone (the daemon forgot it): attach again and
                            // get what this terminal lacks.
                            channel = Some(attach(have, Some(pty)).await?.1);
                            send_typed(channel.as_ref(), &mut typed).await;
                        }
                    }
                    ClientEvent::Connection(ConnState::Failed { reason, .. }) => {
                        drop(raw);
                        return Err(TermError::Connect(reason));
                    }
                    ClientEvent::Reattached { .. } => fresh_link = true,
                    _ => {}
                }
            }
        }
    };
    drop(raw);
    Ok(end)
}

/// Bytes of output `reasonix term` takes before it grants the host credit: enough that a
/// burst produced while the link was down replays byte for byte instead of as a screen.
const OUTPUT_WINDOW: u32 = 4 * 1024 * 1024;

/// The next piece of the terminal's output; pending while no channel is up.
async fn next_output(channel: &mut Option<Channel>) -> Option<ChannelData> {
    match channel {
        Some(c) => c.rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Send what was typed on the channel, if one is up (else it waits in `typed`).
async fn send_typed(channel: Option<&Channel>, typed: &mut Vec<u8>) {
    let Some(ch) = channel else { return };
    if typed.is_empty() {
        return;
    }
    let data = PtyData::Input {
        data: PtyBytes(std::mem::take(typed)),
    };
    if let Err(e) = ch.tx.send(ChannelData::Pty(data)).await {
        // The channel is going with its link; the keys are lost with it, as keys queued
        // on a link the host forgot always were.
        tracing::debug!("keystrokes not sent: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(s: &str) -> Key {
        Key::Send(s.as_bytes().to_vec())
    }

    #[test]
    fn tilde_dot_detaches_only_at_the_start_of_a_line() {
        let mut e = Escape::default();
        assert_eq!(e.feed(b"~."), vec![Key::Detach]);
        let mut e = Escape::default();
        assert_eq!(e.feed(b"ls ~.\r"), vec![send("ls ~.\r")]);
        assert_eq!(e.feed(b"~"), vec![]);
        assert_eq!(e.feed(b"."), vec![Key::Detach]);
        let mut e = Escape::default();
        assert_eq!(e.feed(b"echo\r~."), vec![send("echo\r"), Key::Detach]);
    }

    #[test]
    fn double_tilde_sends_one_and_other_keys_pass_through() {
        let mut e = Escape::default();
        assert_eq!(e.feed(b"~~."), vec![send("~.")]);
        let mut e = Escape::default();
        assert_eq!(e.feed(b"~x"), vec![send("~x")]);
        // After `~x` we are mid-line: `~.` is text.
        assert_eq!(e.feed(b"~."), vec![send("~.")]);
    }

    #[test]
    fn status_line_is_taken_away_from_the_model() {
        let mut l = Local::new(PtySize { cols: 20, rows: 3 });
        l.model.process(b"first row\r\nsecond\r\n$ ");
        // Only the model matters here: what restore writes reproduces the first row.
        let row = l
            .model
            .screen()
            .rows_formatted(0, 20)
            .next()
            .unwrap_or_default();
        let mut check = vt100::Parser::new(nz(3), nz(20), 0);
        check.process(format!("\x1b[1;1H\x1b[0;7mSTATUS\x1b[1;1H\x1b[m\x1b[2K{row}").as_bytes());
        assert_eq!(check.screen().contents().lines().next(), Some("first row"));
    }
}
