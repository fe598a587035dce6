//! What the session gives the runner of its main conversation ([`crate::runner::Host`]): the
//! journal and state, the driving client's gateway, steers, the policy and approvals, tools.

use super::*;
use crate::runner::Host;
use crate::tools::Tool;

impl Host for Session {
    fn turn(&self) -> u64 {
        self.lock().turn
    }

    fn model(&self) -> Option<String> {
        let inner = self.lock();
        // A skill's model (already checked against the user's configured ones) for its turn.
        match inner.skill.as_ref().and_then(|s| s.model.clone()) {
            Some(m) => Some(m),
            None => inner.settings.model.clone(),
        }
    }

    fn max_steps(&self) -> u32 {
        self.lock()
            .settings
            .max_steps
            .unwrap_or(DEFAULT_MAX_STEPS)
            .max(1)
    }

    fn context_settings(&self) -> ContextSettings {
        self.lock().settings.context
    }

    fn effort(&self) -> Option<reasonix_forward::proto::ReasoningEffort> {
        let inner = self.lock();
        inner
            .skill
            .as_ref()
            .and_then(|s| s.effort)
            .or(inner.settings.effort)
    }

    fn record(&self, kind: EventKind) -> Event {
        Session::record(self, kind)
    }

    fn record_durable(&self, kind: EventKind) -> Barrier {
        let mut inner = self.lock();
        self.emit(&mut inner, kind);
        inner.journal.barrier()
    }

    fn record_delta(&self, kind: EventKind) -> Option<Barrier> {
        let mut inner = self.lock();
        self.emit(&mut inner, kind);
        inner
            .journal
            .over_high_water()
            .then(|| inner.journal.barrier())
    }

    fn last_seq(&self) -> u64 {
        Session::last_seq(self)
    }

    fn journal_failure(&self, what: &str, e: &JournalError) -> String {
        Session::journal_failure(self, what, e)
    }

    fn set_state(&self, state: TurnState, detail: Option<String>) {
        Session::set_state(self, state, detail)
    }

    fn wait_gateway<'a>(
        &'a self,
        cancel: &'a CancellationToken,
    ) -> crate::runner::HostFuture<'a, Option<Arc<dyn DriverLink>>> {
        Box::pin(async move {
            // The driver's gateway, or the laptop's goal keeper standing in for it.
            self.wait_any_gateway(cancel).await
        })
    }

    fn release_driver(&self, conn_id: u64) {
        Session::release_driver(self, conn_id)
    }

    fn inject_steers(&self, estimator: &crate::compaction::Estimator) -> Option<Value> {
        Session::inject_steers(self, estimator)
    }

    fn steers_pending(&self) -> bool {
        Session::steers_pending(self)
    }

    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let laptop = self.laptop_tools.lock_or_recover().clone();
        let late = self.late_tools.lock_or_recover().clone();
        self.tools
            .get(name)
            .or_else(|| laptop.and_then(|r| r.get(name)))
            .or_else(|| late.and_then(|r| r.get(name)))
    }

    fn decide(&self, tool: &str, args: &Value, read_only: bool) -> Decision {
        if let Some(d) = self.skill_gate(tool, args, read_only) {
            return d;
        }
        if let Some(d) = self.plan_gate(tool, args, read_only) {
            return d;
        }
        self.lock().policy.decide(tool, args, read_only)
    }

    fn headless(&self) -> bool {
        Session::headless(self)
    }

    fn ask_approval<'a>(
        &'a self,
        call: &'a ToolCall,
        args: &'a Value,
        reason: String,
        cancel: &'a CancellationToken,
    ) -> crate::runner::HostFuture<'a, Result<Option<ApprovalDecision>, JournalError>> {
        Box::pin(async move { Session::ask_approval(self, call, args, reason, cancel).await })
    }

    fn tool_ctx(&self) -> ToolContext {
        Session::plan_tool_ctx(self)
    }

    fn tool_progress(&self, call_id: &str) -> crate::mcp::ProgressSink {
        let live = self.live.clone();
        let call_id = call_id.to_string();
        Arc::new(move |p: crate::mcp::McpProgress| {
            let _ = live.send(Notification::ToolProgress {
                call_id: call_id.clone(),
                message: p.render(),
            });
        })
    }

    fn content_store(&self) -> ContentStore {
        Session::content_store(self)
    }

    fn hooks<'a>(
        &'a self,
        input: crate::hooks::Input,
    ) -> crate::runner::HostFuture<'a, crate::hooks::Verdict> {
        Box::pin(async move { self.fire_hooks(input).await })
    }
}
