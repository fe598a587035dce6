//! Where a session's hooks fire (#34): the glue between [`crate::hooks`] and the session's
//! policy, sandbox, journal and turn life. A submitted prompt runs `SessionStart` (first turn
//! in this daemon) and `UserPromptSubmit` before it is admitted; the runner runs the tool
//! hooks and `PreCompact` through [`crate::runner::Host::hooks`]; a turn's end runs `Stop`
//! and a `Notification`; an approval question runs a `Notification` too.

use reasonix_forward::hooks::{HookEvent, HookSettings, HooksReport};
use reasonix_forward::proto::Attachment;

use super::*;
use crate::hooks::{FireEnv, Input, Verdict};

/// Attachment paths of hook context start with this (`hook:SessionStart`).
pub const HOOK_PREFIX: &str = "hook:";

impl Session {
    /// The driver's hooks and trust records (every open and takeover replaces them).
    pub fn set_hook_settings(&self, settings: HookSettings) {
        self.hooks.set_settings(settings);
    }

    /// The `/hooks` report; `settings` (the laptop's user hooks and trust records now) are
    /// adopted first.
    pub fn hooks_report(&self, settings: HookSettings) -> HooksReport {
        self.hooks.set_settings(settings);
        self.hooks.report()
    }

    fn hook_env(&self) -> FireEnv {
        let notices = Arc::clone(&self.tool_ctx().notices);
        self.hook_env_to(Arc::new(move |text| notices.notice(text)))
    }

    fn hook_env_to(&self, notice: crate::hooks::NoticeFn) -> FireEnv {
        let ctx = self.tool_ctx();
        let policy = self.lock().policy.clone();
        FireEnv {
            session_id: self.id.clone(),
            ctx,
            // The hook's command is a bash command under the session's rules: a deny rule
            // refuses it. An `ask` does not prompt: the user declared or trusted the hook.
            denied: Arc::new(move |command: &str| {
                match policy.decide("bash", &json!({ "command": command }), false) {
                    Decision::Deny { reason } => Some(reason),
                    Decision::Allow | Decision::Ask { .. } => None,
                }
            }),
            notice,
        }
    }

    /// Run the hooks of `input`'s event and wait for them.
    pub(crate) async fn fire_hooks(&self, input: Input) -> Verdict {
        let env = self.hook_env();
        self.hooks.fire(input, env).await
    }

    /// [`fire_hooks`](Self::fire_hooks) with the notices kept in `told` instead of journaled
    /// (the prompt's hooks run before its turn exists; their notices follow the turn).
    async fn fire_hooks_told(&self, input: Input, told: &Arc<Mutex<Vec<String>>>) -> Verdict {
        let sink = Arc::clone(told);
        let env = self.hook_env_to(Arc::new(move |text| sink.lock_or_recover().push(text)));
        self.hooks.fire(input, env).await
    }

    /// Run the hooks of `input`'s event on a task of their own (notifications: nothing
    /// waits for them).
    pub(super) fn fire_hooks_detached(&self, input: Input) {
        let env = self.hook_env();
        let hooks = Arc::clone(&self.hooks);
        tokio::spawn(async move {
            hooks.fire(input, env).await;
        });
    }

    /// Before a prompt becomes a turn: `SessionStart` (the first turn of this session in this
    /// daemon) and `UserPromptSubmit`. Their stdout is returned as attachments of the turn
    /// (context of that user message, never of the stable prefix); `Err` is why a hook
    /// refused the prompt (the user sees it; no turn is started). A prompt that would not be
    /// admitted anyway (a repeat, a busy session) runs no hook. The notices the hooks gave
    /// are returned to be journaled right after the turn (so every client of the turn,
    /// `reasonix run` included, shows them).
    pub async fn prompt_hooks(
        &self,
        request_id: &str,
        text: &str,
    ) -> Result<(Vec<Attachment>, Vec<String>), String> {
        let resume = {
            let inner = self.lock();
            if inner.seen_requests.contains(request_id)
                || !matches!(inner.state, TurnState::Idle | TurnState::Paused)
            {
                return Ok((Vec::new(), Vec::new()));
            }
            inner.turn > 0
        };
        let told = Arc::new(Mutex::new(Vec::new()));
        let mut out = Vec::new();
        if self.hooks.take_start() {
            let v = self
                .fire_hooks_told(
                    Input::new(HookEvent::SessionStart)
                        .with("source", json!(if resume { "resume" } else { "startup" })),
                    &told,
                )
                .await;
            out.extend(as_attachments(HookEvent::SessionStart, v.context));
        }
        let v = self
            .fire_hooks_told(
                Input::new(HookEvent::UserPromptSubmit)
                    .subject(text)
                    .with("prompt", json!(text)),
                &told,
            )
            .await;
        let told = std::mem::take(&mut *told.lock_or_recover());
        if let Some(why) = v.block {
            for text in told {
                self.record(EventKind::Notice { text });
            }
            return Err(format!("a UserPromptSubmit hook refused the prompt: {why}"));
        }
        out.extend(as_attachments(HookEvent::UserPromptSubmit, v.context));
        Ok((out, told))
    }

    /// A turn ended: `Stop`, then a `Notification` (neither is waited for).
    pub(super) fn turn_end_hooks(&self, outcome: TurnOutcome) {
        self.fire_hooks_detached(Input::new(HookEvent::Stop).with("outcome", json!(outcome)));
        self.fire_hooks_detached(turn_finished(outcome));
    }

    /// The laptop's `Notification` hooks for the end of a turn: sent before the
    /// `TurnFinished` event, so a client that leaves when it sees the turn end (`reasonix
    /// run`) has the notice first.
    pub(super) fn turn_end_laptop_notice(&self, outcome: TurnOutcome) {
        self.laptop_notice(&turn_finished(outcome));
    }

    /// An approval waits for the user: a `Notification` (not waited for), on the host and on
    /// the laptops.
    pub(super) fn approval_hooks(&self, tool: &str) {
        let input = Input::new(HookEvent::Notification)
            .with("message", json!(format!("{tool} needs your approval")))
            .with("tool_name", json!(tool));
        self.laptop_notice(&input);
        self.fire_hooks_detached(input);
    }

    /// A `Notification` for the attached laptops' own `run_on = "laptop"` hooks: live only
    /// (never journaled, so a later catch-up does not repeat it); each laptop runs the hooks
    /// of its own config, the host names no command.
    fn laptop_notice(&self, input: &Input) {
        let input = input.payload(&self.id, self.hooks.workspace());
        let _ = self.live.send(Notification::HookNotice { input });
    }
}

fn turn_finished(outcome: TurnOutcome) -> Input {
    Input::new(HookEvent::Notification)
        .with("message", json!("the turn finished"))
        .with("outcome", json!(outcome))
}

fn as_attachments(event: HookEvent, context: Vec<String>) -> Vec<Attachment> {
    context
        .into_iter()
        .map(|content| Attachment {
            path: format!("{HOOK_PREFIX}{event}"),
            content,
            truncated: false,
        })
        .collect()
}
