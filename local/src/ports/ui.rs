//! `/ports` in the workbench: list, open in the system browser, stop, add.

use super::{parse_spec, Forwards, Source};

/// Run `/ports ARG` and say what happened.
pub async fn command(forwards: &std::sync::Arc<Forwards>, arg: &str) -> String {
    let words: Vec<&str> = arg.split_whitespace().collect();
    let usage =
        "usage: /ports [open N|stop N|add [HOST:]PORT[=LOCAL]] (N: the host or laptop port)";
    match words.as_slice() {
        [] | ["list"] => list(forwards),
        ["open", n] => match n.parse::<u16>().ok().and_then(|n| find(forwards, n)) {
            Some(url) => match open_browser(&url) {
                Ok(()) => format!("opened {url} in the browser"),
                Err(e) => format!("could not open {url}: {e}"),
            },
            None => format!("/ports open: no forward of port {n}\n{}", list(forwards)),
        },
        ["stop", n] => match n.parse::<u16>() {
            Ok(n) => forwards
                .stop(n)
                .unwrap_or_else(|e| format!("/ports stop: {e}")),
            Err(_) => usage.to_string(),
        },
        ["add", spec] => match parse_spec(spec) {
            Ok(_) => forwards
                .add(spec)
                .await
                .unwrap_or_else(|e| format!("/ports add: {e}")),
            Err(e) => e,
        },
        _ => usage.to_string(),
    }
}

fn find(forwards: &Forwards, port: u16) -> Option<String> {
    forwards
        .list()
        .into_iter()
        .find(|f| f.local == port || f.target.port == port)
        .map(|f| f.url())
}

fn list(forwards: &Forwards) -> String {
    let l = forwards.list();
    if l.is_empty() {
        return "no forwarded ports (the host announces the ports its workspace's processes listen on; /ports add [HOST:]PORT forwards one by hand)".into();
    }
    let mut text = String::from("forwarded ports:");
    for f in l {
        let how = match f.source {
            Source::Auto if f.command.is_empty() => "announced".to_string(),
            Source::Auto => format!("announced, {}", f.command),
            Source::User => "added".to_string(),
        };
        text.push_str(&format!(
            "\n  {}:{} on the host → {} ({how})",
            f.target.host,
            f.target.port,
            f.url()
        ));
    }
    text
}

/// Open `url` with the system's browser opener, detached: `$BROWSER` when set (the first
/// of its `:`-separated commands, given the address as its argument), else `open` on macOS,
/// `start` on Windows, `xdg-open` elsewhere.
pub fn open_browser(url: &str) -> std::io::Result<()> {
    let chosen = std::env::var("BROWSER")
        .ok()
        .and_then(|b| b.split(':').next().map(str::trim).map(str::to_string))
        .filter(|b| !b.is_empty());
    let mut cmd = if let Some(browser) = chosen {
        std::process::Command::new(browser)
    } else if cfg!(target_os = "macos") {
        std::process::Command::new("open")
    } else if cfg!(windows) {
        let mut c = std::process::Command::new("cmd");
        c.args(["/C", "start", ""]);
        c
    } else {
        std::process::Command::new("xdg-open")
    };
    cmd.arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(|mut child| {
            // Reaped when it exits (the opener returns at once on every system).
            std::thread::spawn(move || {
                let _ = child.wait();
            });
        })
}
