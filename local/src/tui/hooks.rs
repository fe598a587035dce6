//! The text of `/hooks` and `reasonix hooks list` (#34).

use reasonix_forward::hooks::HooksReport;

/// One block per project hook file (path, trust, SHA-256), then one line per hook (source,
/// event, matcher, command, trusted or not, last run), then the problems found.
pub fn hooks_table(report: &HooksReport) -> String {
    let mut out = String::new();
    if report.hooks.is_empty() && report.files.is_empty() {
        out.push_str("no hooks (declare them under [[hooks]] in your config.toml, or in the workspace's .reasonix/hooks.toml)\n");
    }
    for f in &report.files {
        out.push_str(&format!(
            "{}  {}  sha256 {}\n",
            f.path,
            if f.trusted {
                "trusted"
            } else {
                "NOT TRUSTED: its hooks do not run (`/hooks trust`, `reasonix hooks trust`)"
            },
            f.sha256
        ));
    }
    if !report.hooks.is_empty() {
        out.push_str("hooks:\n");
    }
    for h in &report.hooks {
        out.push_str(&format!(
            "  [{}] {} {} → {}  (timeout {} ms{}){}{}\n",
            h.source,
            h.event,
            h.matcher.as_deref().unwrap_or("*"),
            h.command,
            h.timeout_ms,
            match h.fail {
                reasonix_forward::hooks::HookFail::Closed => ", fail closed",
                reasonix_forward::hooks::HookFail::Open => "",
            },
            if h.trusted {
                ""
            } else {
                "  [skipped: untrusted]"
            },
            h.last_run
                .as_deref()
                .map(|r| format!("  last run: {r}"))
                .unwrap_or_default()
        ));
    }
    for p in &report.problems {
        out.push_str(&format!("problem: {p}\n"));
    }
    out
}
