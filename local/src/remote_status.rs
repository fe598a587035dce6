//! The text of `reasonix remote status`: every workspace daemon on the host, one table row
//! per session, then what is installed.

use reasonix_bootstrap::workspaces::HostWorkspaces;
use reasonix_forward::workspaces::StatusLine;

fn state_name(state: reasonix_forward::proto::TurnState) -> &'static str {
    use reasonix_forward::proto::TurnState;
    match state {
        TurnState::Idle => "idle",
        TurnState::Running => "running",
        TurnState::WaitingForLaptop => "waiting for laptop",
        TurnState::WaitingForApproval => "waiting for approval",
        TurnState::Paused => "paused",
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Render the status of `ws` (host `place`, this client's build `build`).
pub fn render(
    place: &str,
    build: &str,
    ws: &HostWorkspaces,
    disk_used: u64,
    bwrap: bool,
) -> String {
    let mut out = format!("host: {place}\n");
    let mut rows: Vec<[String; 6]> = Vec::new();
    let mut unreachable = Vec::new();
    for d in &ws.daemons {
        match d {
            StatusLine::Daemon(d) => {
                let build_col = if d.build_id == build {
                    d.build_id.clone()
                } else {
                    format!("{} (other build)", d.build_id)
                };
                let head = [
                    d.workspace.clone(),
                    build_col,
                    format!(
                        "{} ({} client{})",
                        d.pid,
                        d.clients,
                        if d.clients == 1 { "" } else { "s" }
                    ),
                ];
                if d.sessions.is_empty() {
                    rows.push([
                        head[0].clone(),
                        head[1].clone(),
                        head[2].clone(),
                        "-".into(),
                        "-".into(),
                        String::new(),
                    ]);
                }
                for (i, s) in d.sessions.iter().enumerate() {
                    let h = if i == 0 {
                        head.clone()
                    } else {
                        [String::new(), String::new(), String::new()]
                    };
                    rows.push([
                        h[0].clone(),
                        h[1].clone(),
                        h[2].clone(),
                        s.id.clone(),
                        state_name(s.state).into(),
                        format!(
                            "{} turn{}  {}",
                            s.turns,
                            if s.turns == 1 { "" } else { "s" },
                            clip(&s.title, 40)
                        ),
                    ]);
                }
            }
            StatusLine::Unreachable { socket, reason } => {
                unreachable.push(format!("  {socket}: {reason}"));
            }
        }
    }
    if ws.lister.is_none() {
        out.push_str("workspaces: unknown (no installed reasonix-remote can list them; `reasonix remote ping DEST` installs this build)\n");
    } else if rows.is_empty() {
        out.push_str("workspaces: no daemon running\n");
    } else {
        let header = [
            "WORKSPACE",
            "BUILD",
            "PID",
            "SESSION",
            "STATE",
            "TURNS / TITLE",
        ];
        let mut widths = header.map(str::len);
        for r in &rows {
            for (i, c) in r.iter().enumerate() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |cells: [&str; 6]| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i == 5 {
                    l.push_str(c);
                } else {
                    l.push_str(c);
                    l.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
                }
            }
            l.trim_end().to_string() + "\n"
        };
        out.push_str(&line(header));
        for r in &rows {
            out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]));
        }
    }
    if !unreachable.is_empty() {
        out.push_str("sockets not answering:\n");
        for u in unreachable {
            out.push_str(&u);
            out.push('\n');
        }
    }
    if ws.installed.is_empty() {
        out.push_str("installed: none\n");
    }
    for v in &ws.installed {
        out.push_str(&format!(
            "installed: {} ({:.1} MiB){}\n",
            v.build_id,
            v.size as f64 / 1048576.0,
            if v.build_id == build {
                " — this build"
            } else {
                ""
            }
        ));
    }
    out.push_str(&format!(
        "disk used: {} KiB under ~/.reasonix\n",
        disk_used / 1024
    ));
    out.push_str(&format!(
        "sandbox: {}\n",
        if bwrap {
            "bwrap installed"
        } else {
            "bwrap not found (sandbox.bash = \"enforce\" falls back to Landlock where the kernel has it; \"bwrap\" refuses bash)"
        }
    ));
    // The mechanism each running daemon actually uses (its probe ran on the host).
    for d in &ws.daemons {
        if let StatusLine::Daemon(d) = d {
            if !d.sandbox.is_empty() {
                out.push_str(&format!("sandbox in {}: {}\n", d.workspace, d.sandbox));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use reasonix_forward::workspaces::DaemonReport;

    #[test]
    fn each_daemon_names_its_sandbox_mechanism() {
        let ws = HostWorkspaces {
            daemons: vec![StatusLine::Daemon(DaemonReport {
                socket: "/run/s".into(),
                workspace: "/w".into(),
                build_id: "b".into(),
                pid: 7,
                uptime_secs: 1,
                clients: 0,
                sessions: Vec::new(),
                sandbox: "landlock (ABI 7; bubblewrap unavailable: no user namespaces)".into(),
            })],
            lister: None,
            installed: Vec::new(),
            processes: Vec::new(),
        };
        let text = render("host", "b", &ws, 0, false);
        assert!(
            text.contains(
                "sandbox in /w: landlock (ABI 7; bubblewrap unavailable: no user namespaces)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("bwrap not found (sandbox.bash = \"enforce\" falls back to Landlock"),
            "{text}"
        );
        assert!(render("host", "b", &ws, 0, true).contains("sandbox: bwrap installed\n"));
    }
}
