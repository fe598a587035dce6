//! File copy, laptop side (issue #36 §3): `reasonix cp`, `/upload`, `/download`.
//!
//! A path is a laptop path, or a host path written with a leading `:` (`:shots/`,
//! `:/tmp/build.log`; relative host paths are inside the workspace). The host is the one
//! the command connects to (`--ssh DEST`, like `reasonix ports` and `reasonix term`; without
//! it, the local workspace's daemon). Each source is one copy channel
//! ([`reasonix_forward::copy`]): the laptop sends (upload) or receives (download); the host
//! checks every path against its rules ([`reasonix_forward::copy::CopyOpen::policy`]).

mod ui;

pub use ui::{pasted_path, quote, run as workbench, split_args};

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reasonix_forward::channel::{ChannelAccepted, ChannelOpen};
use reasonix_forward::copy::{
    self, CopyDir, CopyOpen, Place, Progress, ProgressFn, Summary, COPY_WINDOW,
};
use reasonix_forward::policy::SessionPolicy;
use reasonix_forward::sync::LockExt;

use crate::client::Client;

/// One side of a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spot {
    /// A path on this laptop.
    Laptop(PathBuf),
    /// A path on the host (relative to the workspace, or absolute).
    Host(String),
}

impl Spot {
    /// `:path` is a host path, anything else a laptop path.
    pub fn parse(arg: &str) -> Spot {
        match arg.strip_prefix(':') {
            Some(rest) => Spot::Host(rest.to_string()),
            None => Spot::Laptop(PathBuf::from(arg)),
        }
    }
}

impl std::fmt::Display for Spot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Spot::Laptop(p) => write!(f, "{}", p.display()),
            Spot::Host(p) => write!(f, "host:{p}"),
        }
    }
}

/// Which way `sources` → `dest` goes: all sources on one side, the destination on the
/// other. `Err` is the usage message.
pub fn direction(sources: &[Spot], dest: &Spot) -> Result<CopyDir, String> {
    if sources.is_empty() {
        return Err("name what to copy and where: reasonix cp [-r] SRC... DEST".into());
    }
    let hosts = sources
        .iter()
        .filter(|s| matches!(s, Spot::Host(_)))
        .count();
    match (hosts, dest) {
        (0, Spot::Host(_)) => Ok(CopyDir::Upload),
        (n, Spot::Laptop(_)) if n == sources.len() => Ok(CopyDir::Download),
        (0, Spot::Laptop(_)) => Err(
            "neither side is on the host: write host paths with a leading `:` (`:shots/`, `:/tmp/x`)".into(),
        ),
        _ => Err("copy between the laptop and the host: the sources on one side (host paths start with `:`), the destination on the other".into()),
    }
}

/// Where a download lands on the laptop: the user's own machine, no confinement; the host's
/// names are plain relative paths ([`copy::safe_rel`]) and the list is checked before any
/// byte is written.
struct LaptopPlace;

impl Place for LaptopPlace {
    fn resolve(&self, dest: &str) -> Result<PathBuf, String> {
        let p = Path::new(if dest.is_empty() { "." } else { dest });
        std::path::absolute(p).map_err(|e| format!("cannot resolve {dest}: {e}"))
    }

    fn check(&self, path: &Path) -> Result<PathBuf, String> {
        Ok(path.to_path_buf())
    }
}

/// A progress line on stderr (a terminal only), at most ten times a second.
pub struct Bar {
    label: String,
    started: Instant,
    last: Mutex<Option<Instant>>,
    on: bool,
}

impl Bar {
    /// A bar for `label`, shown when stderr is a terminal.
    pub fn new(label: String) -> Bar {
        Bar {
            label,
            started: Instant::now(),
            last: Mutex::new(None),
            on: std::io::stderr().is_terminal(),
        }
    }

    /// A bar that shows nothing (the workbench has its own notices).
    pub fn quiet() -> Bar {
        Bar {
            on: false,
            ..Bar::new(String::new())
        }
    }

    /// Show `p` (at most ten times a second, and the last).
    pub fn show(&self, p: Progress) {
        if !self.on {
            return;
        }
        let now = Instant::now();
        {
            let mut last = self.last.lock_or_recover();
            if last.is_some_and(|l| now - l < Duration::from_millis(100)) && p.done < p.total {
                return;
            }
            *last = Some(now);
        }
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        let pct = (p.done * 100).checked_div(p.total).unwrap_or(100);
        let width = 24usize;
        let fill = (pct as usize * width) / 100;
        let mut e = std::io::stderr().lock();
        let _ = write!(
            e,
            "\r{} [{}{}] {pct:>3}% {} / {}  {}/s ",
            self.label,
            "#".repeat(fill),
            " ".repeat(width - fill),
            human(p.done),
            human(p.total),
            human((p.sent as f64 / secs) as u64)
        );
        let _ = e.flush();
    }

    /// End the line.
    pub fn end(&self) {
        if self.on && self.last.lock_or_recover().is_some() {
            eprintln!();
        }
    }
}

/// `n` bytes for people (`3.2 MB`).
pub fn human(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KB", "MB", "GB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Copy one `source` to `dest` through `client`'s host, under `policy` (the laptop's; the
/// host tightens it). `progress` hears how far it is ([`Bar::show`] for a terminal).
pub async fn copy_one(
    client: &Client,
    policy: &SessionPolicy,
    source: &Spot,
    dest: &Spot,
    recursive: bool,
    progress: ProgressFn<'_>,
) -> Result<Summary, String> {
    let (dir, host_path, laptop) = match (source, dest) {
        (Spot::Laptop(l), Spot::Host(h)) => (CopyDir::Upload, h.clone(), l.clone()),
        (Spot::Host(h), Spot::Laptop(l)) => (CopyDir::Download, h.clone(), l.clone()),
        _ => {
            return Err(format!(
                "cannot copy {source} to {dest}: one side must be on the host"
            ))
        }
    };
    if dir == CopyDir::Upload {
        // Checked here first, so a typo does not cost a round trip.
        let meta = std::fs::metadata(&laptop)
            .map_err(|e| format!("cannot read {}: {e}", laptop.display()))?;
        if meta.is_dir() && !recursive {
            return Err(format!(
                "{} is a directory: copy it with -r",
                laptop.display()
            ));
        }
    }
    let open = ChannelOpen::Copy(CopyOpen {
        dir,
        path: host_path.clone(),
        recursive,
        policy: policy.clone(),
    });
    let (accepted, chan) = client
        .open_channel(open, COPY_WINDOW)
        .await
        .map_err(|e| match e {
            reasonix_forward::rpc::CallError::Remote(r) => {
                format!("the host refused the copy: {}", r.message)
            }
            other => format!("the copy could not start: {other}"),
        })?;
    let host_abs = match accepted {
        ChannelAccepted::Copy(a) => a.path,
        other => return Err(format!("the host answered the copy with {other:?}")),
    };
    let show = progress;
    let r = match dir {
        CopyDir::Upload => {
            let ok = |_: &Path| Ok(());
            copy::send(chan, &laptop, recursive, &ok, show).await
        }
        CopyDir::Download => {
            let dest = laptop.to_string_lossy().into_owned();
            copy::receive(chan, &dest, &LaptopPlace, show).await
        }
    };
    r.map_err(|e| match dir {
        CopyDir::Upload => format!("upload of {} to {host_abs} stopped: {e}", laptop.display()),
        CopyDir::Download => format!("download of {host_abs} stopped: {e}"),
    })
}

/// One line about a finished copy (`copied 3 files (52.4 MB, 12.0 MB sent, 40.4 MB holes)
/// to /repo/shots`).
pub fn describe(s: &Summary) -> String {
    let p = s.progress;
    let mut parts = vec![human(p.total)];
    if p.resumed > 0 {
        parts.push(format!("{} resumed", human(p.resumed)));
    }
    if p.holes > 0 {
        parts.push(format!("{} as holes", human(p.holes)));
    }
    let what = if s.files == 1 {
        "1 file".to_string()
    } else {
        format!("{} files", s.files)
    };
    let mut out = format!(
        "copied {what} ({}) to {}, SHA-256 checked",
        parts.join(", "),
        s.dest
    );
    for sk in &s.skipped {
        out.push_str(&format!("\n  skipped {sk}"));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    #[test]
    fn host_paths_start_with_a_colon() {
        assert_eq!(Spot::parse(":shots/"), Spot::Host("shots/".into()));
        assert_eq!(Spot::parse(":"), Spot::Host(String::new()));
        assert_eq!(Spot::parse("./a.png"), Spot::Laptop("./a.png".into()));
    }

    #[test]
    fn the_direction_follows_the_colons() {
        let up = direction(&[Spot::parse("a")], &Spot::parse(":x")).unwrap();
        assert_eq!(up, CopyDir::Upload);
        let down = direction(&[Spot::parse(":a"), Spot::parse(":b")], &Spot::parse(".")).unwrap();
        assert_eq!(down, CopyDir::Download);
        assert!(direction(&[Spot::parse("a")], &Spot::parse("b")).is_err());
        assert!(direction(&[Spot::parse(":a")], &Spot::parse(":b")).is_err());
        assert!(direction(&[Spot::parse(":a"), Spot::parse("b")], &Spot::parse("c")).is_err());
    }
}
