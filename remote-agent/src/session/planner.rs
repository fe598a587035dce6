//! The planner beside the executor in the session (issue 38 §2): routing at submit, and the
//! planner as a second runner of the session, with a conversation and a prefix of its own.
//! The pure part (routing, the planner's prompt and tools, the handoff) is in
//! [`crate::plan::route`] and [`crate::plan::coordinator`].
//!
//! The planner's own events (its turn's user message, its assistant messages, its tool calls
//! and results) are journaled wrapped in [`EventKind::Planner`], so a replay of the journal
//! rebuilds the executor's conversation byte for byte (with the handoff, which is journaled
//! as a plan event) and, separately, the planner's: after a daemon restart or a rewind the
//! planner's next request extends its previous one byte for byte (its provider cache keeps
//! hitting). Its streamed deltas are not journaled.
//!
//! What the user does while the planner works reaches it as it reaches the executor: a
//! steer is injected before the planner's next model step (its `steer_injected` journaled
//! as the planner's, so a replay puts it at the same place in the planner's conversation)
//! and handed over with the plan; the hooks fire for the planner's tool calls with
//! `"agent": "planner"` on stdin; the turn's attachments (files, hook context, recall) ride
//! the planner's user message too.

use super::*;
use crate::plan::coordinator::{self, Handoff};
use crate::plan::route::{self, Decision as RouteDecision, Route};
use crate::runner::{Host, Runner};
use crate::tools::Tool;
use reasonix_forward::proto::{PlanEvent, ReasoningEffort};

/// The planner's conversation and tools, made at its first turn.
pub(super) struct Planner {
    pub(super) conversation: Mutex<Conversation>,
    tools: ToolRegistry,
}

impl Session {
    /// The routing of a turn being submitted, when a planner model is set (under the
    /// session's lock, before the turn is counted). `plan` are the plan events submitted
    /// with the turn: an approved plan's execution goes to the executor as it is.
    pub(super) fn route_turn(
        inner: &Inner,
        text: &str,
        attachments: usize,
        plan: &[PlanEvent],
    ) -> Option<RouteDecision> {
        inner.settings.planner_model.as_ref()?;
        if plan
            .iter()
            .any(|p| matches!(p, PlanEvent::Decided { decision, .. } if *decision == reasonix_forward::proto::PlanDecision::Execute))
        {
            return Some(RouteDecision {
                route: Route::Direct,
                depth: route::Depth::None,
                reason: "approved_plan",
            });
        }
        Some(route::route(
            text,
            route::TurnMeta {
                follow_up: inner.turn > 0,
                attachments,
                plan_mode: inner.plan.on,
            },
        ))
    }

    /// The journal event of a routing decision.
    pub(super) fn routed_event(d: &RouteDecision) -> EventKind {
        EventKind::Plan(PlanEvent::Routed {
            route: d.route.as_str().into(),
            depth: d.depth.as_str().into(),
            reason: d.reason.into(),
        })
    }

    /// Run the planner for this turn's `task` (routed `decision`). `Ok(true)`: the executor
    /// runs next (a handoff was appended, or the planner failed on an ordinary route);
    /// `Ok(false)`: the turn ends here (a plan waits for approval, or nothing may execute).
    /// `Err`: the turn ends with this outcome.
    pub(super) async fn plan_turn(
        &self,
        task: &str,
        decision: RouteDecision,
        cancel: &CancellationToken,
    ) -> Result<bool, (TurnOutcome, Option<String>)> {
        let Some(model) = self.lock().settings.planner_model.clone() else {
            return Ok(true);
        };
        let planner = self.planner();
        // The turn's attachments (mentioned files, `UserPromptSubmit`/`SessionStart` hook
        // context, recall) are the planner's too: the hooks ran once, for the prompt.
        let attachments = self
            .lock()
            .events
            .iter()
            .rev()
            .find_map(|e| match &e.kind {
                EventKind::UserTurn { attachments, .. } => Some(attachments.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let start = {
            // Lock order: the conversation before the session; the message and its event
            // together, so a replay puts it at the same place.
            let mut conv = planner.conversation.lock_or_recover();
            let text = coordinator::planner_turn_text(task, &decision);
            conv.messages.push(agent::user_message(&text, &attachments));
            let turn = Host::turn(self);
            self.record(EventKind::Planner {
                event: Box::new(EventKind::UserTurn {
                    request_id: format!("planner-{turn}"),
                    text,
                    attachments,
                }),
            });
            conv.messages.len()
        };
        let steered = Mutex::new(Vec::new());
        let host = PlannerHost {
            session: self,
            planner: &planner,
            model: model.clone(),
            budget: decision.depth.budget().max(1),
            steered: &steered,
        };
        let (mut outcome, mut detail) = Runner::new(&host, &planner.conversation)
            .run(cancel, true)
            .await;
        if outcome == TurnOutcome::Paused && self.steers_pending() {
            // The user steered during the planner's last step of its budget: one more step,
            // so the steer reaches the planner (as a final answer with a steer pending takes
            // one more step in any runner).
            let last = PlannerHost { budget: 1, ..host };
            (outcome, detail) = Runner::new(&last, &planner.conversation)
                .run(cancel, false)
                .await;
        }
        let steered = std::mem::take(&mut *steered.lock_or_recover());
        if outcome == TurnOutcome::Cancelled {
            return Err((outcome, detail));
        }
        let handoff = (outcome == TurnOutcome::Completed)
            .then(|| {
                let conv = planner.conversation.lock_or_recover();
                let (answer, opened) = answer_of(&conv.messages[start..]);
                Handoff::read(&answer, &opened)
            })
            .flatten();
        let Some(mut handoff) = handoff else {
            let reason = match outcome {
                TurnOutcome::Completed => {
                    "the planner answered without a plan (no goal or steps)".to_string()
                }
                TurnOutcome::Paused => format!(
                    "the planner used its research budget of {} steps without a plan",
                    decision.depth.budget()
                ),
                _ => format!(
                    "the planner's request failed: {}",
                    detail.unwrap_or_else(|| outcome.to_string())
                ),
            };
            let handed_over = coordinator::hand_over_on_failure(decision.route);
            let mut inner = self.lock();
            self.emit(
                &mut inner,
                EventKind::Plan(PlanEvent::PlannerFailed {
                    reason: reason.clone(),
                    handed_over,
                }),
            );
            if handed_over {
                // The executor takes the original task: the steers the planner read go to
                // it too, first, at its first step (journaled as injected there, so a
                // replay of the executor's conversation puts them at the same place).
                let later = std::mem::take(&mut inner.pending.steers);
                inner.pending.steers = steered.into_iter().chain(later).collect();
                return Ok(true);
            }
            drop(inner);
            return Err((
                TurnOutcome::Failed,
                Some(format!("{reason}; nothing was executed (the turn asked for a plan only, or for your approval first)")),
            ));
        };
        handoff.steers = steered.into_iter().map(|(_, text)| text).collect();
        if decision.route.fail_closed() {
            // The §1 card: plan mode holds every writer until the user answers.
            let mut inner = self.lock();
            if !inner.plan.on {
                self.emit(&mut inner, EventKind::Plan(PlanEvent::Mode { on: true }));
            }
            let plan_id = format!("plan-{}-{}", inner.turn, inner.journal.last_seq() + 1);
            self.emit(
                &mut inner,
                EventKind::Plan(PlanEvent::Proposed {
                    plan_id,
                    plan: handoff.plan_markdown(&model, &decision),
                    steps: handoff.steps.clone(),
                }),
            );
            return Ok(false);
        }
        let text = handoff.message(&model, &decision);
        // Lock order: the conversation before the session; the message and its event
        // together, so a replay appends it at the same place.
        let mut conv = self.main.lock_or_recover();
        conv.messages.push(agent::user_message(&text, &[]));
        let mut inner = self.lock();
        self.emit(
            &mut inner,
            EventKind::Plan(PlanEvent::Handoff { model, text }),
        );
        Ok(true)
    }

    /// The planner, made at its first turn after the session opened (or was rewound): its
    /// prefix is its role in front of the executor's system prompt, with plan mode's
    /// read-only tools; its messages are rebuilt from its journaled events.
    fn planner(&self) -> Arc<Planner> {
        let mut slot = self.planner.lock_or_recover();
        if let Some(p) = slot.as_ref() {
            return Arc::clone(p);
        }
        let tools = coordinator::planner_tools(&self.tools);
        let system = coordinator::planner_system(&self.main.lock_or_recover().prefix.system);
        let schemas = tools.schemas();
        let prefix = Prefix {
            system_hash: agent::short_hash(system.as_bytes()),
            tools_hash: agent::short_hash(
                serde_json::to_string(&schemas)
                    .unwrap_or_default()
                    .as_bytes(),
            ),
            system,
            tools: schemas,
        };
        let messages = agent::messages_from_events(&planner_events(&self.lock().events));
        let p = Arc::new(Planner {
            conversation: Mutex::new(Conversation::new(
                &format!("{}-planner", self.id),
                prefix,
                messages,
                self.journal_path
                    .parent()
                    .unwrap_or(std::path::Path::new(".")),
            )),
            tools,
        });
        *slot = Some(Arc::clone(&p));
        p
    }

    /// The planner's part of `/context`.
    pub(super) fn planner_context(&self) -> Option<reasonix_forward::proto::PlannerContext> {
        let model = self.lock().settings.planner_model.clone()?;
        let slot = self.planner.lock_or_recover().clone();
        let (messages, tokens) = slot.map_or((0, 0), |p| {
            let conv = p.conversation.lock_or_recover();
            (conv.messages.len() as u64, conv.next_request_tokens().1)
        });
        Some(reasonix_forward::proto::PlannerContext {
            model,
            messages,
            tokens,
        })
    }
}

/// The planner's own events in `events` (the session's), unwrapped, with the session's
/// `steer` events (their text; only the planner's own `steer_injected` puts one in its
/// conversation): its conversation is `agent::messages_from_events` of them.
pub(super) fn planner_events(events: &[Event]) -> Vec<Event> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Planner { event } => Some(Event {
                kind: (**event).clone(),
                ..e.clone()
            }),
            EventKind::Steer { .. } => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// The planner's last answer in `messages` (this turn's) and the paths its calls opened.
fn answer_of(messages: &[Value]) -> (String, Vec<String>) {
    let mut opened = Vec::new();
    let mut answer = String::new();
    for m in messages {
        if m["role"] != "assistant" {
            continue;
        }
        if let Some(calls) = m["tool_calls"].as_array() {
            for c in calls {
                let name = c["function"]["name"].as_str().unwrap_or("");
                let args: Value = c["function"]["arguments"]
                    .as_str()
                    .and_then(|a| serde_json::from_str(a).ok())
                    .unwrap_or(Value::Null);
                opened.extend(coordinator::opened_path(name, &args));
            }
        }
        if let Some(text) = m["content"].as_str().filter(|t| !t.trim().is_empty()) {
            answer = text.to_string();
        }
    }
    (answer, opened)
}

/// The session as the planner's runner sees it: the planner's model and budget, its
/// read-only tools behind plan mode's gate, and a journal that keeps the planner's own
/// conversation out of the executor's.
struct PlannerHost<'a> {
    session: &'a Session,
    planner: &'a Planner,
    model: String,
    budget: u32,
    /// The steers given to the planner in this turn, (request id, text).
    steered: &'a Mutex<Vec<(String, String)>>,
}

impl PlannerHost<'_> {
    /// Events of the planner's conversation are not the executor's: they are journaled
    /// wrapped in [`EventKind::Planner`] (a replay of the executor's conversation skips
    /// them); its deltas are not journaled. A tool call is also shown as a notice. Usage,
    /// retries and notices are the session's.
    fn keep(&self, kind: EventKind) -> Option<EventKind> {
        match kind {
            EventKind::TextDelta { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::Compacted { .. } => None,
            EventKind::ToolStarted { ref name, .. } => {
                Session::record(
                    self.session,
                    EventKind::Notice {
                        text: format!("planner: {name}"),
                    },
                );
                Some(EventKind::Planner {
                    event: Box::new(kind),
                })
            }
            EventKind::AssistantMessage { .. }
            | EventKind::ToolFinished { .. }
            | EventKind::SteerInjected { .. }
            | EventKind::UserTurn { .. } => Some(EventKind::Planner {
                event: Box::new(kind),
            }),
            other => Some(other),
        }
    }
}

impl Host for PlannerHost<'_> {
    fn turn(&self) -> u64 {
        Host::turn(self.session)
    }
    fn model(&self) -> Option<String> {
        Some(self.model.clone())
    }
    fn max_steps(&self) -> u32 {
        self.budget
    }
    fn context_settings(&self) -> ContextSettings {
        // The executor's window: no compaction of the planner's history (a planner
        // conversation is short; `window = 0` turns the ladder off).
        ContextSettings {
            window: 0,
            ..Host::context_settings(self.session)
        }
    }
    fn effort(&self) -> Option<ReasoningEffort> {
        None
    }
    fn record(&self, kind: EventKind) -> Event {
        match self.keep(kind) {
            Some(k) => Session::record(self.session, k),
            None => Event {
                seq: self.session.last_seq(),
                ts: String::new(),
                turn: Host::turn(self.session),
                kind: EventKind::Notice {
                    text: String::new(),
                },
            },
        }
    }
    fn record_durable(&self, kind: EventKind) -> Barrier {
        if let Some(k) = self.keep(kind) {
            Session::record(self.session, k);
        }
        self.session.lock().journal.barrier()
    }
    fn record_delta(&self, _kind: EventKind) -> Option<Barrier> {
        None
    }
    fn last_seq(&self) -> u64 {
        self.session.last_seq()
    }
    fn journal_failure(&self, what: &str, e: &JournalError) -> String {
        self.session.journal_failure(what, e)
    }
    fn set_state(&self, state: TurnState, detail: Option<String>) {
        let detail =
            detail.or_else(|| (state == TurnState::Running).then(|| "planning".to_string()));
        self.session.set_state(state, detail)
    }
    fn wait_gateway<'a>(
        &'a self,
        cancel: &'a CancellationToken,
    ) -> crate::runner::HostFuture<'a, Option<Arc<dyn DriverLink>>> {
        Box::pin(async move { Host::wait_gateway(self.session, cancel).await })
    }
    fn release_driver(&self, conn_id: u64) {
        self.session.release_driver(conn_id)
    }
    fn inject_steers(&self, estimator: &crate::compaction::Estimator) -> Option<Value> {
        // A steer typed while the planner works is the planner's next step's (then handed
        // over with the plan); its injection is journaled as the planner's.
        let (msg, steers) = self
            .session
            .take_steers(estimator, |k| EventKind::Planner { event: Box::new(k) })?;
        self.steered.lock_or_recover().extend(steers);
        Some(msg)
    }
    fn steers_pending(&self) -> bool {
        self.session.steers_pending()
    }
    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.planner.tools.get(name)
    }
    fn decide(&self, tool: &str, args: &Value, read_only: bool) -> Decision {
        let sandboxed = self.session.tool_ctx.lock_or_recover().sandbox.is_active();
        if let Some(d) = crate::plan::gate::decide(tool, args, read_only, sandboxed) {
            return d;
        }
        self.session.lock().policy.decide(tool, args, read_only)
    }
    fn headless(&self) -> bool {
        self.session.headless()
    }
    fn ask_approval<'a>(
        &'a self,
        call: &'a ToolCall,
        args: &'a Value,
        reason: String,
        cancel: &'a CancellationToken,
    ) -> crate::runner::HostFuture<'a, Result<Option<ApprovalDecision>, JournalError>> {
        Box::pin(async move { self.session.ask_approval(call, args, reason, cancel).await })
    }
    fn tool_ctx(&self) -> ToolContext {
        // Plan mode's context: bash in a read-only sandbox.
        let mut ctx = self.session.tool_ctx();
        ctx.sandbox = Arc::new(ctx.sandbox.read_only());
        ctx
    }
    fn tool_progress(&self, call_id: &str) -> crate::mcp::ProgressSink {
        Host::tool_progress(self.session, call_id)
    }
    fn content_store(&self) -> ContentStore {
        self.session.content_store()
    }
    fn hooks<'a>(
        &'a self,
        input: crate::hooks::Input,
    ) -> crate::runner::HostFuture<'a, crate::hooks::Verdict> {
        Box::pin(async move {
            // The session's hooks, told the call is the planner's (a hook may tell the two
            // apart; its `match` is on the tool name as for any call).
            self.session
                .fire_hooks(input.with("agent", json!(PLANNER_AGENT)))
                .await
        })
    }
}

/// `agent` on a hook's stdin for the planner's tool calls (#38 §2).
pub const PLANNER_AGENT: &str = "planner";
