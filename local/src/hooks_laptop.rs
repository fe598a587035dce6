//! `Notification` hooks that run on the laptop (#34, `run_on = "laptop"`): a desktop
//! notification fires on the machine the user sits at, not on the host.
//!
//! Only the user's own `[[hooks]]` can say `run_on = "laptop"` (the host refuses it in a
//! project hook file, and this side only ever reads the laptop's config). The host sends the
//! event live ([`reasonix_forward::proto::Notification::HookNotice`], never journaled, so a
//! catch-up does not repeat it) and names no command: each laptop runs the hooks of its own
//! config, in the system's shell, with the event's JSON on stdin (host-made text: a hook
//! must treat it as data). A hook that fails or times out is logged and blocks nothing.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use reasonix_forward::hooks::{HookDecl, HookEvent, HookRunOn, OTHER_TIMEOUT_MS};
use serde_json::Value;

/// The hooks of `user` this laptop runs: well-formed `Notification` hooks with
/// `run_on = "laptop"` (the host checks and lists them; a malformed one is its problem line).
pub fn laptop_hooks(user: &[HookDecl]) -> Vec<HookDecl> {
    user.iter()
        .filter(|d| {
            d.run_on == Some(HookRunOn::Laptop)
                && HookEvent::parse(d.event.trim()) == Some(HookEvent::Notification)
                && !d.command.trim().is_empty()
        })
        .cloned()
        .collect()
}

/// Start every hook of `hooks` for one notification; returns at once (each hook is waited
/// for, and killed at its timeout, on a thread of its own). The process is started and its
/// stdin written before this returns, so a client that exits right after (`reasonix run`
/// at the end of its turn) still leaves the hook running.
pub fn run_all(hooks: &[HookDecl], input: &Value) {
    if hooks.is_empty() {
        return;
    }
    let stdin = serde_json::to_vec(input).unwrap_or_default();
    for hook in hooks {
        if let Err(e) = start(hook, &stdin) {
            tracing::warn!("laptop Notification hook `{}`: {e}", hook.command);
        }
    }
}

fn start(hook: &HookDecl, stdin: &[u8]) -> std::io::Result<()> {
    let (shell, mut cmd) =
        reasonix_bootstrap::platform::shell::shell_command_blocking(&hook.command);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env("REASONIX_HOOK_EVENT", HookEvent::Notification.as_str());
    let mut child = cmd
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("{shell} could not start: {e}")))?;
    if let Some(mut pipe) = child.stdin.take() {
        // A hook that does not read its stdin closes the pipe: not an error.
        let _ = pipe.write_all(stdin);
    }
    let timeout = Duration::from_millis(hook.timeout_ms.unwrap_or(OTHER_TIMEOUT_MS));
    let command = hook.command.clone();
    std::thread::spawn(move || {
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return,
                Ok(Some(status)) => {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut e, &mut err);
                    }
                    tracing::warn!(
                        "laptop Notification hook `{command}` failed ({status}): {}",
                        err.trim()
                    );
                    return;
                }
                Ok(None) if started.elapsed() >= timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    tracing::warn!(
                        "laptop Notification hook `{command}` timed out after {} ms and was stopped",
                        timeout.as_millis()
                    );
                    return;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => {
                    tracing::warn!("laptop Notification hook `{command}`: {e}");
                    return;
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(event: &str, run_on: Option<HookRunOn>, command: &str) -> HookDecl {
        HookDecl {
            event: event.into(),
            matcher: None,
            command: command.into(),
            timeout_ms: None,
            fail: None,
            run_on,
        }
    }

    #[test]
    fn only_laptop_notification_hooks_run_here() {
        let user = [
            decl("Notification", Some(HookRunOn::Laptop), "notify-send hi"),
            decl("Notification", None, "host-side"),
            decl("Notification", Some(HookRunOn::Host), "host-side too"),
            decl("Stop", Some(HookRunOn::Laptop), "refused by the host"),
            decl("Notification", Some(HookRunOn::Laptop), "  "),
        ];
        let mine = laptop_hooks(&user);
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0].command, "notify-send hi");
    }

    #[test]
    fn a_hook_reads_the_event_on_stdin_and_a_slow_one_is_stopped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("event.json");
        let mut slow = decl(
            "Notification",
            Some(HookRunOn::Laptop),
            &format!("sleep 30; touch '{}/late'", dir.path().display()),
        );
        slow.timeout_ms = Some(200);
        let hooks = [
            decl(
                "Notification",
                Some(HookRunOn::Laptop),
                &format!("cat > '{}'", out.display()),
            ),
            slow,
        ];
        run_all(
            &hooks,
            &serde_json::json!({"hook_event_name": "Notification", "message": "the turn finished"}),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        let got = loop {
            match std::fs::read_to_string(&out) {
                Ok(t) if t.ends_with('}') => break t,
                _ if Instant::now() > deadline => panic!("the hook wrote nothing"),
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let v: Value = serde_json::from_str(&got).expect("json");
        assert_eq!(v["message"], "the turn finished");
        // The slow hook is killed at 200 ms, long before its `touch`.
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!dir.path().join("late").exists());
    }
}
