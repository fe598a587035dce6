//! One tool call of a model step: looked up, its arguments parsed, decided by the policy
//! (asking the user through the host when it says so), its start journaled durably, run,
//! and its result added to the conversation.

use reasonix_forward::content::EXTERNALIZE_OVER;
use reasonix_forward::hooks::HookEvent;
use reasonix_forward::proto::{ApprovalDecision, Denied, EventKind, ToolCall};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::Runner;
use crate::agent;
use crate::hooks::Input;
use crate::policy::Decision;

impl Runner<'_> {
    pub(super) async fn finish_tool(&self, call: &ToolCall, is_error: bool, output: String) {
        self.finish_tool_as(call, is_error, output, None).await
    }

    /// A call that was not run because it was denied (`why`): an error result for the model,
    /// and the typed reason in the event (`reasonix run` exits 4 for [`Denied::Headless`]).
    async fn finish_denied(&self, call: &ToolCall, why: Denied, output: String) {
        self.finish_tool_as(call, true, output, Some(why)).await
    }

    async fn finish_tool_as(
        &self,
        call: &ToolCall,
        is_error: bool,
        output: String,
        denied: Option<Denied>,
    ) {
        // A big output goes to the content store (off the async threads) and the event carries
        // the bounded view plus a reference, so no event is too big for a frame.
        let (output, output_ref) = if output.len() > EXTERNALIZE_OVER {
            let store = self.host.content_store();
            tokio::task::spawn_blocking(move || store.externalize_output(output))
                .await
                .unwrap_or_else(|e| {
                    (
                        format!("internal error: storing the tool output failed: {e}"),
                        None,
                    )
                })
        } else {
            (output, None)
        };
        let window = self.host.context_settings().window;
        let mut conv = self.conversation();
        let context_bytes = super::compact::small_window_bound(&conv, window);
        conv.messages.push(agent::tool_result_message(
            &call.id,
            &output,
            output_ref.is_some(),
            context_bytes,
        ));
        self.host.record(EventKind::ToolFinished {
            call_id: call.id.clone(),
            name: call.name.clone(),
            is_error,
            output,
            output_ref,
            denied,
            context_bytes,
        });
    }

    /// Decide, ask if needed, journal the start durably and run one tool call. `Err` carries
    /// the user-facing text when the journal could not be written at a durability point: the
    /// tool did not run and the turn must end.
    pub(super) async fn run_tool(
        &self,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let Some(tool) = self.host.tool(&call.name) else {
            self.finish_tool(
                call,
                true,
                format!(
                    "unknown tool {:?}; the available tools are listed in your tool definitions",
                    call.name
                ),
            )
            .await;
            return Ok(());
        };
        let args: Value = match serde_json::from_str(if call.arguments.trim().is_empty() {
            "{}"
        } else {
            &call.arguments
        }) {
            Ok(v) => v,
            Err(e) => {
                self.finish_tool(
                    call,
                    true,
                    format!("the arguments are not valid JSON ({e}); send a JSON object matching the tool's schema"),
                )
                .await;
                return Ok(());
            }
        };
        // PreToolUse hooks before the policy: a call a hook refuses is never put to the user.
        let pre = self
            .host
            .hooks(
                Input::new(HookEvent::PreToolUse)
                    .subject(&call.name)
                    .with("tool_name", json!(call.name))
                    .with("tool_input", args.clone()),
            )
            .await;
        if let Some(why) = pre.block {
            self.finish_tool(call, true, format!("blocked by a PreToolUse hook: {why}"))
                .await;
            return Ok(());
        }
        let mut decision = self.host.decide(&call.name, &args, tool.read_only());
        if crate::memory::gate::gated(&call.name) {
            use crate::memory::gate::{check, Gate};
            let ctx = self.host.tool_ctx();
            match check(&call.name, &args, &ctx, decision, self.host.headless()) {
                Gate::Proceed(d) => decision = d,
                Gate::Refuse(text) => {
                    self.finish_tool(call, true, text).await;
                    return Ok(());
                }
                Gate::Headless(text) => {
                    self.finish_denied(call, Denied::Headless, text).await;
                    return Ok(());
                }
            }
        }
        match decision {
            Decision::Allow => {}
            Decision::Deny { reason } => {
                self.finish_denied(
                    call,
                    Denied::Policy,
                    format!("denied by the permission policy: {reason}"),
                )
                .await;
                return Ok(());
            }
            Decision::Ask { reason } => {
                let headless_denied = self.host.headless();
                let ask_reason = reason.clone();
                let answer = match self.host.ask_approval(call, &args, reason, cancel).await {
                    Ok(a) => a,
                    Err(e) => {
                        let msg = self.host.journal_failure(
                            &format!(
                                "{} was not run (its approval request could not be saved)",
                                call.name
                            ),
                            &e,
                        );
                        self.finish_tool(call, true, self.host.journal_failure("not run", &e))
                            .await;
                        return Err(msg);
                    }
                };
                match answer {
                    Some(ApprovalDecision::AllowOnce)
                    | Some(ApprovalDecision::AllowSession)
                    | Some(ApprovalDecision::AllowAlways) => {}
                    Some(ApprovalDecision::Deny) => {
                        self.finish_denied(call, Denied::User, "the user denied this tool call; do not retry it unchanged — ask the user or take another approach".into()).await;
                        return Ok(());
                    }
                    None if headless_denied => {
                        self.finish_denied(call, Denied::Headless, format!("denied: {} needs approval ({ask_reason}) and this run is headless, so nobody can approve it; do not retry it — finish without it or say what the user must allow", call.name)).await;
                        return Ok(());
                    }
                    None => {
                        self.finish_denied(
                            call,
                            Denied::Cancelled,
                            "cancelled before approval".into(),
                        )
                        .await;
                        return Ok(());
                    }
                }
            }
        }
        let started = self.host.record_durable(EventKind::ToolStarted {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        // Durability point: the start is on disk before the tool runs, so after a crash we
        // know it may have run and never run it again. No durable start, no run.
        if let Err(e) = started.wait().await {
            let msg = self
                .host
                .journal_failure(&format!("{} was not run", call.name), &e);
            self.finish_tool(call, true, self.host.journal_failure("not run", &e))
                .await;
            return Err(msg);
        }
        let sink = self.host.tool_progress(&call.id);
        let mut ctx = self.host.tool_ctx();
        // Children a delegation tool starts name this call as their parent.
        if let Some(scope) = ctx.delegate.as_mut() {
            scope.call_id = call.id.clone();
        }
        let out = tokio::select! {
            out = crate::mcp::with_progress(sink, tool.run(args.clone(), &ctx)) => out,
            _ = cancel.cancelled() => {
                self.finish_tool(call, true, "cancelled by the user while running".into()).await;
                return Ok(());
            }
        };
        let post = self
            .host
            .hooks(
                Input::new(HookEvent::PostToolUse)
                    .subject(&call.name)
                    .with("tool_name", json!(call.name))
                    .with("tool_input", args)
                    .with(
                        "tool_response",
                        json!({"output": crate::tools::bound_for_context(&out.text), "is_error": out.is_error}),
                    ),
            )
            .await;
        let mut text = out.text;
        for note in post.model_notes {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("[PostToolUse hook: {note}]"));
        }
        self.finish_tool(call, out.is_error, text).await;
        Ok(())
    }
}
