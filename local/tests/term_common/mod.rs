//! A tmux server driving `reasonix term` like a user: keys in, the rendered pane (screen
//! and history) out. tmux is the terminal and the oracle: what it shows is what the user saw.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// One private tmux server (its own socket) with one session running a command.
pub struct Tmux {
    socket: String,
    /// Holds the tmux config when [`Tmux::tui`] made its own folder for it.
    _conf_dir: Option<tempfile::TempDir>,
}

impl Tmux {
    /// Start a server whose first session runs `command` (a shell command line) in a
    /// `cols`x`rows` window, keeping `history` lines of scrollback.
    pub fn start(dir: &Path, command: &str, cols: u16, rows: u16, history: u32) -> Tmux {
        let socket = format!("rxterm-{}-{}", std::process::id(), rand_suffix());
        let conf = dir.join(format!("{socket}.conf"));
        std::fs::write(
            &conf,
            format!(
                "set -g history-limit {history}\nset -g remain-on-exit on\nset -g status off\n"
            ),
        )
        .expect("tmux conf");
        let t = Tmux {
            socket,
            _conf_dir: None,
        };
        t.run(&[
            "-f",
            conf.to_str().expect("utf-8 path"),
            "new-session",
            "-d",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
            command,
        ]);
        t
    }

    /// A 120x40 window running `command` (a TUI under test), its config in a folder of its
    /// own.
    pub fn tui(command: &str) -> Tmux {
        let dir = tempfile::tempdir().expect("tmux conf dir");
        let mut t = Tmux::start(dir.path(), command, 120, 40, 2000);
        t._conf_dir = Some(dir);
        t
    }

    /// Paste `text` as a terminal does for a bracketed-paste program (`paste-buffer -p`).
    pub fn paste(&self, dir: &Path, text: &str) {
        let file = dir.join("paste.txt");
        std::fs::write(&file, text).expect("paste file");
        self.run(&[
            "load-buffer",
            "-b",
            "rxpaste",
            file.to_str().expect("utf-8"),
        ]);
        self.run(&["paste-buffer", "-p", "-d", "-b", "rxpaste"]);
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Type literal text.
    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-l", text]);
    }

    /// Press keys by tmux name (`C-t`, `Left`, `Escape`, ...).
    pub fn send_keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Press Enter.
    pub fn enter(&self) {
        self.run(&["send-keys", "Enter"]);
    }

    /// Type a line and press Enter.
    pub fn line(&self, text: &str) {
        self.type_text(text);
        self.enter();
    }

    /// The visible screen.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p"])
    }

    /// History and screen, oldest first, wrapped lines joined.
    pub fn everything(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-S", "-", "-E", "-"])
    }

    /// Resize the window (the pane follows).
    pub fn resize(&self, cols: u16, rows: u16) {
        self.run(&[
            "resize-window",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
        ]);
    }

    /// Pid of the pane's process (the command, when it was started with `exec`).
    pub fn pane_pid(&self) -> i32 {
        self.run(&["display-message", "-p", "#{pane_pid}"])
            .trim()
            .parse()
            .expect("pane pid")
    }

    /// The pane's terminal device (`/dev/pts/N`).
    pub fn pane_tty(&self) -> String {
        self.run(&["display-message", "-p", "#{pane_tty}"])
            .trim()
            .to_string()
    }

    /// Copy everything the pane's program writes from now on (raw bytes, escape sequences
    /// included) to `path`, for looking at what a terminal was sent.
    pub fn log_output(&self, path: &Path) {
        let cmd = format!("cat >> {}", sh_quote(&path.display().to_string()));
        self.run(&["pipe-pane", "-o", &cmd]);
    }

    /// True once the pane's process exited.
    pub fn pane_dead(&self) -> bool {
        self.run(&["display-message", "-p", "#{pane_dead}"]).trim() == "1"
    }

    /// Wait (hang guard `guard`) until `pred` holds for the visible screen; returns it.
    pub fn wait_screen(&self, guard: Duration, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + guard;
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `/new` in the TUI, then wait until the screen names a session other than any it
    /// named before: the old transcript's "new session …" line can still be on screen for
    /// a moment after the keys are sent, so waiting for the words alone races the open.
    pub fn new_session(&self) -> String {
        fn ids(screen: &str) -> Vec<String> {
            screen
                .lines()
                .filter_map(|l| l.split("new session ").nth(1))
                .filter_map(|rest| rest.split_whitespace().next())
                .map(str::to_string)
                .collect()
        }
        let before = ids(&self.everything());
        self.send_keys(&["/new", "Enter"]);
        self.wait_screen(Duration::from_secs(60), "a new session", |s| {
            ids(s).iter().any(|id| !before.contains(id))
        })
    }

    /// Wait (hang guard: 60 s) until the visible screen contains `needle`; returns it.
    pub fn wait_for(&self, needle: &str) -> String {
        self.wait_screen(Duration::from_secs(60), needle, |s| s.contains(needle))
    }

    /// Wait until the visible screen has a line equal to `line` (trailing blanks ignored).
    pub fn wait_line(&self, guard: Duration, line: &str) -> String {
        self.wait_screen(guard, line, |s| s.lines().any(|l| l.trim_end() == line))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        % 1_000_000_007
}

/// Single-quote a string for `sh`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The value after `KEY=` on some screen line (e.g. `PID=123`).
pub fn value_of(screen: &str, key: &str) -> Option<String> {
    screen.lines().find_map(|l| {
        let l = l.trim();
        l.strip_prefix(key)
            .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()))
            .map(str::to_string)
    })
}

/// A `REASONIX_HOME` whose config reaches the mock provider at `base_url` with the key in
/// `.env` under `key_env`; `extra` is appended to the config (e.g. a `[permissions]` table).
pub fn write_mock_config(home: &Path, base_url: &str, key_env: &str, extra: &str) {
    std::fs::create_dir_all(home).expect("home");
    std::fs::write(
        home.join("config.toml"),
        format!("default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"{key_env}\"\n{extra}"),
    )
    .expect("config");
    std::fs::write(home.join(".env"), format!("{key_env}=sk-test\n")).expect(".env");
}

/// Stop the daemons a test started under `REASONIX_HOME` = `home` (and so their shells).
pub fn stop_daemons(home: &Path) {
    let Ok(rd) = std::fs::read_dir(home.join("sessions")) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(b) = std::fs::read(e.path().join("daemon.json")) else {
            continue;
        };
        let pid = serde_json::from_slice::<serde_json::Value>(&b)
            .ok()
            .and_then(|v| v["pid"].as_u64());
        if let Some(pid) = pid {
            // SAFETY: kill(2) of a daemon this test started.
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM);
            }
        }
    }
}

/// Stops the test's daemons however the test ends.
pub struct Daemons<'a>(pub &'a Path);

impl Drop for Daemons<'_> {
    fn drop(&mut self) {
        stop_daemons(self.0);
    }
}
