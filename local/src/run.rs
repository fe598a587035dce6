//! `reasonix run`: one headless turn, printed as it streams (text or JSON lines).

use std::io::Write;
use std::sync::Arc;

use reasonix_forward::proto::{
    Event, EventKind, OpenSession, Request, Response, SessionSettings, TurnOutcome, TurnState,
    Usage,
};
use serde_json::json;

use crate::client::{Client, ClientEvent, ClientOptions, ConnState};
use crate::config::Config;
use crate::connect::Connector;
use crate::exit::Exit;
use crate::gateway::Gateway;

mod compact;
mod goal;
mod subagent;
pub use compact::compact_command;

/// Options of a headless run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The prompt.
    pub prompt: String,
    /// Print JSON lines instead of text.
    pub json: bool,
    /// With `json`: each `tool_finished` line carries the complete output (fetched from the
    /// host by reference when it was stored there).
    pub full_output: bool,
    /// Resume this session.
    pub session: Option<String>,
    /// Resume the most recent session.
    pub continue_last: bool,
    /// Model label.
    pub model: Option<String>,
    /// `--plan`: plan mode on, the prompt is the task to plan.
    pub plan: bool,
    /// `--approve-plan`: execute the plan waiting in the session (no prompt).
    pub approve_plan: bool,
    /// `--allow-memory-writes`: memory writes that need the user's approval are allowed.
    pub allow_memory_writes: bool,
    /// `--goal`: a goal request (start with its budgets, resume, pause, clear) instead of a
    /// prompt; the run returns when the goal ends or pauses.
    pub goal: Option<reasonix_forward::proto::GoalAction>,
    /// `reasonix subagent run|try`: the prompt is the task of one child of this profile,
    /// run by the host as the turn ([`Request::RunSubagent`]).
    pub subagent: Option<SubagentRun>,
}

/// The child of `reasonix subagent run|try`.
#[derive(Debug, Clone)]
pub struct SubagentRun {
    /// The profile (a built-in or a skill).
    pub profile: String,
    /// `try`: read-only.
    pub read_only: bool,
}

/// How a run ended.
#[derive(Debug)]
pub struct RunOutcome {
    /// Process exit code.
    pub exit: Exit,
    /// One-line reason when not successful.
    pub reason: Option<String>,
}

/// Run one turn against the host behind `connector`.
pub async fn run(config: &Config, connector: Arc<dyn Connector>, opts: RunOptions) -> RunOutcome {
    // The user's rules for this workspace apply (#15 "always allow" scope).
    let mut config = config.clone();
    config.apply_workspace(&connector.describe());
    let config = &config;
    // `run "/compact [focus]"` compacts the session instead of sending the text as a turn.
    if let Some(focus) = compact_command(&opts.prompt).filter(|_| !opts.plan && !opts.approve_plan)
    {
        return compact::compact(config, connector, &opts, focus).await;
    }
    let gateway = Arc::new(Gateway::new(config));
    let (client_opts, laptop_mcp) = crate::client::options_for(config);
    let (client, mut events) = Client::start(connector, gateway, client_opts);
    let mut out = Printer {
        json: opts.json,
        ..Printer::default()
    };
    // A writer was denied because nobody can approve it headless: the run exits 4.
    let mut denied_headless: Vec<String> = Vec::new();
    let settings = SessionSettings {
        model: opts.model.clone().or(config.default_model.clone()),
        headless: true,
        max_steps: Some(config.agent.max_steps),
        policy: config.session_policy(),
        laptop_mcp,
        context: config.context_settings(opts.model.as_deref()),
        effort: config.session_effort(opts.model.as_deref()),
        memory: crate::memory::session_settings(&config.home, opts.allow_memory_writes),
        planner_model: config.agent.planner_model.clone(),
        skills: crate::skills::session_settings(config),
        delegation: config.delegation_settings(),
    };
    // Ignored project settings the laptop already printed (local mode reads the same file).
    let mut reported: Vec<reasonix_forward::policy::Ignored> = config.ignored().to_vec();
    let request_id = format!("run-{:016x}", rand::random::<u64>());
    let mut session_id = opts.session.clone();
    let mut our_turn: Option<u64> = None;
    let mut goal_from: Option<u64> = None;
    let mut last_seq = 0u64;
    let mut usage = Usage::default();
    let mut tally = Tally {
        prices: config
            .resolve_model(opts.model.as_deref())
            .ok()
            .and_then(|m| m.prices),
        ..Tally::default()
    };
    let mut model = String::new();
    let mut need_open = true;
    // An OpenSession sent and not answered yet: its notice is still to come.
    let mut open_pending = false;
    let (opened_tx, mut opened_rx) = tokio::sync::mpsc::unbounded_channel();
    // What became of the goal keeper a goal start or resume asked for (its line).
    let (keeper_tx, mut keeper_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    // Ctrl-C / SIGTERM: the first cancels the turn on the host and waits for it to end (so
    // `--continue` does not finish it), the second exits at once.
    let mut signals = crate::platform::signals::StopSignals::new();
    let mut cancel_sent_at: Option<tokio::time::Instant> = None;

    loop {
        if need_open {
            need_open = false;
            let open = OpenSession {
                // Filled in by the client (user hooks and trust records).
                hooks: Default::default(),
                session: session_id.clone(),
                new: session_id.is_none() && !opts.continue_last,
                since: last_seq,
                read_only: false,
                takeover: false,
                settings: settings.clone(),
                keeper: false,
            };
            let c = client.clone();
            let rid = request_id.clone();
            let prompt = opts.prompt.clone();
            let home = config.home.clone();
            let (plan, approve_plan) = (opts.plan, opts.approve_plan);
            let goal = opts.goal.clone();
            let keeper = (config.clone(), keeper_tx.clone());
            let subagent = opts.subagent.clone();
            // Open and submit on a task so connection events keep flowing meanwhile.
            let tx = opened_tx.clone();
            open_pending = true;
            tokio::spawn(async move {
                let opened = match c.request(Request::OpenSession(open)).await {
                    Ok(Response::SessionOpened(o)) => o,
                    Ok(other) => {
                        let _ = tx.send(Ok(Err(format!("unexpected answer {other:?}"))));
                        return;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                // Report the opening (session id, notice) before submitting: after a daemon
                // restart the catch-up alone can end our turn (interrupted), and its notice
                // (why, `loginctl enable-linger`) must not wait for the submit's answer.
                let session = opened.session.clone();
                let _ = tx.send(Ok(Ok(opened)));
                if let Some(action) = goal {
                    let keeps = matches!(
                        action,
                        reasonix_forward::proto::GoalAction::Start { .. }
                            | reasonix_forward::proto::GoalAction::Resume
                    );
                    match c.goal_request(&rid, action).await {
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                        // The goal goes on with this client killed or its terminal closed.
                        Ok(_) if keeps => {
                            let (config, keeper_tx) = keeper;
                            let started = crate::keeper::start(&config, &session);
                            let _ = keeper_tx.send(started.line());
                        }
                        Ok(_) => {}
                    }
                    return;
                }
                if let Some(sub) = subagent {
                    if let Err(e) = subagent::submit(&c, &rid, &sub, &prompt).await {
                        let _ = tx.send(Err(e));
                    }
                    return;
                }
                if approve_plan || plan {
                    use reasonix_forward::proto::{PlanAction, PlanDecision};
                    let action = if approve_plan {
                        PlanAction::Decide {
                            plan_id: None,
                            decision: PlanDecision::Execute,
                            comment: None,
                        }
                    } else {
                        PlanAction::Enter { task: Some(prompt) }
                    };
                    if let Err(e) = c.plan_request(&rid, action).await {
                        let _ = tx.send(Err(e));
                    }
                    return;
                }
                // `/name args` naming a custom command runs its expansion (see
                // `crate::commands`); any other text is sent as typed.
                let prompt = match expand_command(&c, &home, &prompt).await {
                    Ok(p) => p,
                    Err(msg) => {
                        let _ = tx.send(Ok(Err(msg)));
                        return;
                    }
                };
                // A turn still running in a continued session must end first: the shared
                // submit waits while the host says busy (same request id, safe to retry).
                if let Err(e) = c.submit_turn(&rid, &prompt).await {
                    let _ = tx.send(Err(e));
                }
            });
        }
        let cancel_deadline = async {
            match cancel_sent_at {
                Some(at) => tokio::time::sleep_until(at + CANCEL_WAIT).await,
                None => std::future::pending().await,
            }
        };
        let ev = tokio::select! {
            _ = signals.next() => {
                if cancel_sent_at.is_some() || session_id.is_none() {
                    // Second signal, or nothing was started on the host yet.
                    return fail_with(&mut out, Exit::Cancelled, "cancelled".into());
                }
                out.notice("cancelling the turn on the host (press Ctrl-C again to exit at once)");
                cancel_sent_at = Some(tokio::time::Instant::now());
                send_cancel(&client);
                continue;
            }
            _ = cancel_deadline => {
                return fail_with(
                    &mut out,
                    Exit::Cancelled,
                    format!("cancelled; the host did not confirm the end of the turn within {} s", CANCEL_WAIT.as_secs()),
                );
            }
            ev = events.recv() => ev,
            Some(line) = keeper_rx.recv() => {
                out.notice(&line);
                continue;
            }
            Some(r) = opened_rx.recv() => {
                match r {
                    Ok(Ok(opened)) => {
                        open_pending = false;
                        if let Some(n) = &opened.notice {
                            out.notice(n);
                        }
                        report_ignored(&mut out, &opened.ignored, &mut reported);
                        out.session(&opened.session, &opened.sandbox);
                        // A goal's events are the ones after this open (the catch-up may
                        // hold an earlier goal's end).
                        goal_from.get_or_insert(opened.last_seq);
                        session_id = Some(opened.session);
                        continue;
                    }
                    Ok(Err(msg)) => return fail(&mut out, msg),
                    Err(reasonix_forward::rpc::CallError::Remote(e)) => return fail(&mut out, e.message),
                    // The link was replaced; a Reattached event re-opens.
                    Err(reasonix_forward::rpc::CallError::Link(_)) => continue,
                }
            }
        };
        let Some(ev) = ev else {
            return fail(&mut out, "the client stopped unexpectedly".into());
        };
        match ev {
            ClientEvent::Connection(ConnState::Failed { reason, .. }) => {
                return fail_with(&mut out, Exit::Connection, reason)
            }
            ClientEvent::Connection(state) => out.connection(&state),
            ClientEvent::AgentSign(ask) => {
                // Nobody to ask in a headless run: refused (pre-approved keys never get here).
                out.notice(&format!(
                    "refused: {}; a headless run cannot ask (list the key in [sandbox] ssh_agent_approved to allow it)",
                    ask.question()
                ));
                ask.answer.answer(false);
            }
            ClientEvent::Reattached { reason } => {
                out.notice(&format!("{reason}; re-attaching to the session"));
                need_open = true;
            }
            ClientEvent::Event(e) => {
                // Notices made by the client itself (seq 0: the connection fell back to an
                // old build, frames were dropped) belong to no turn: show them as they come.
                if e.seq == 0 {
                    if let EventKind::Notice { text } = &e.kind {
                        out.notice(text);
                    }
                    continue;
                }
                if e.seq > 0 {
                    if e.seq <= last_seq {
                        continue;
                    }
                    last_seq = e.seq;
                }
                if let EventKind::UserTurn {
                    request_id: rid, ..
                } = &e.kind
                {
                    if *rid == request_id {
                        our_turn = Some(e.turn);
                        // Cancelled before the turn began: cancel it now that it exists.
                        if cancel_sent_at.is_some() {
                            send_cancel(&client);
                        }
                    }
                }
                if opts.goal.is_some() && goal_from.is_some_and(|f| e.seq > f) {
                    match goal::follow(&e.kind) {
                        goal::Follow::Turn => our_turn = Some(e.turn),
                        goal::Follow::TurnEnd => {
                            if let EventKind::TurnFinished { outcome, detail } = &e.kind {
                                out.finished(*outcome, detail.as_deref(), &usage, &model, &tally);
                            }
                            continue;
                        }
                        goal::Follow::End(status, detail) => {
                            out.event(&e.kind);
                            client.leave().await;
                            return goal::outcome(status, detail, &denied_headless);
                        }
                        goal::Follow::Show => {
                            out.event(&e.kind);
                            continue;
                        }
                        goal::Follow::Other => {}
                    }
                }
                if our_turn != Some(e.turn) {
                    continue;
                }
                match &e.kind {
                    EventKind::Usage {
                        usage: u,
                        model: m,
                        cache_note,
                        ..
                    } => {
                        usage.prompt_tokens += u.prompt_tokens;
                        usage.completion_tokens += u.completion_tokens;
                        usage.cache_hit_tokens += u.cache_hit_tokens;
                        usage.cache_miss_tokens += u.cache_miss_tokens;
                        usage.reasoning_tokens += u.reasoning_tokens;
                        tally.requests += 1;
                        if let Some(p) = &tally.prices {
                            tally.cost =
                                Some(tally.cost.unwrap_or(0.0) + crate::context::cost_of(u, p));
                        }
                        model = m.clone();
                        if let Some(n) = cache_note {
                            out.notice(n);
                        }
                    }
                    EventKind::Compacted { .. } => {
                        tally.compactions += 1;
                        out.event(&e.kind);
                    }
                    // A subagent's model step (#33): its usage is part of this turn's.
                    EventKind::Subagent { .. } => {
                        if let Some(u) = subagent_usage(&e.kind) {
                            usage.prompt_tokens += u.prompt_tokens;
                            usage.completion_tokens += u.completion_tokens;
                            usage.cache_hit_tokens += u.cache_hit_tokens;
                            usage.cache_miss_tokens += u.cache_miss_tokens;
                            usage.reasoning_tokens += u.reasoning_tokens;
                            tally.requests += 1;
                            if let Some(p) = &tally.prices {
                                tally.cost =
                                    Some(tally.cost.unwrap_or(0.0) + crate::context::cost_of(u, p));
                            }
                        }
                        out.event(&e.kind);
                    }
                    EventKind::TurnFinished { outcome, detail } => {
                        // Catch-up events may overtake the answer to the re-open; its notice
                        // (e.g. the daemon was killed) explains this very outcome, so print
                        // it first.
                        if open_pending {
                            if let Ok(Some(Ok(Ok(opened)))) = tokio::time::timeout(
                                std::time::Duration::from_secs(5),
                                opened_rx.recv(),
                            )
                            .await
                            {
                                if let Some(n) = &opened.notice {
                                    out.notice(n);
                                }
                            }
                        }
                        out.finished(*outcome, detail.as_deref(), &usage, &model, &tally);
                        // The next `run --continue` may attach at once: stop driving first.
                        client.leave().await;
                        return match outcome {
                            TurnOutcome::Completed if !denied_headless.is_empty() => RunOutcome {
                                exit: Exit::NeedsApproval,
                                reason: Some(format!(
                                    "{} needed approval and was denied because the run is headless; rerun with --auto (or --yolo), or allow it in the config",
                                    denied_headless.join(", ")
                                )),
                            },
                            TurnOutcome::Cancelled => RunOutcome {
                                exit: Exit::Cancelled,
                                reason: Some("the turn was cancelled".into()),
                            },
                            TurnOutcome::Completed => RunOutcome {
                                exit: Exit::Completed,
                                reason: None,
                            },
                            TurnOutcome::Paused => RunOutcome {
                                exit: Exit::Paused,
                                reason: Some(detail.clone().unwrap_or_else(|| "paused".into())),
                            },
                            TurnOutcome::Interrupted
                            | TurnOutcome::Failed
                            | TurnOutcome::Unknown => RunOutcome {
                                exit: Exit::Failed,
                                reason: Some(format!(
                                    "turn {outcome}{}",
                                    detail
                                        .as_ref()
                                        .map(|d| format!(": {d}"))
                                        .unwrap_or_default()
                                )),
                            },
                        };
                    }
                    EventKind::ToolFinished {
                        name,
                        denied: Some(reasonix_forward::proto::Denied::Headless),
                        ..
                    } if !denied_headless.contains(name) => {
                        denied_headless.push(name.clone());
                        out.tool_finished(&e.kind, None);
                    }
                    EventKind::ToolFinished { output_ref, .. } if opts.full_output => {
                        let full = match output_ref {
                            Some(r) => client
                                .fetch_content(r)
                                .await
                                .map_err(|e| e.to_string())
                                .and_then(|b| {
                                    String::from_utf8(b)
                                        .map_err(|e| format!("the stored output is not UTF-8: {e}"))
                                }),
                            None => Ok(String::new()),
                        };
                        out.tool_finished(&e.kind, Some(full));
                    }
                    _ => out.event(&e.kind),
                }
            }
            ClientEvent::State { state, detail } => {
                if matches!(
                    state,
                    TurnState::WaitingForLaptop | TurnState::WaitingForApproval
                ) {
                    out.notice(detail.as_deref().unwrap_or("waiting"));
                }
            }
            ClientEvent::Role { reason, .. } => out.notice(&reason),
            ClientEvent::ToolProgress { call_id, message } => out.progress(&call_id, &message),
        }
    }
}

/// How long a cancelled run waits for the host to confirm the end of the turn.
const CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

fn send_cancel(client: &Client) {
    let c = client.clone();
    tokio::spawn(async move {
        let _ = c
            .request(Request::Cancel {
                request_id: format!("cancel-{:016x}", rand::random::<u64>()),
            })
            .await;
    });
}

/// The prompt of `reasonix run`: a custom command's expansion when `prompt` is
/// `/name args` and `name` is a command (skipped files are reported on stderr); an
/// unknown `/name` is an error listing the commands; other text is returned unchanged.
async fn expand_command(
    client: &Client,
    home: &std::path::Path,
    prompt: &str,
) -> Result<String, String> {
    let Some(rest) = prompt.strip_prefix('/') else {
        return Ok(prompt.to_string());
    };
    let name = rest.split(char::is_whitespace).next().unwrap_or("");
    // `/usr/bin is slow`: a path, not a command.
    if name.is_empty() || name.contains('/') {
        return Ok(prompt.to_string());
    }
    // An MCP prompt: the host expands it (and names what is wrong with it).
    if name.starts_with("mcp__") {
        return Ok(prompt.to_string());
    }
    let set = crate::commands::load(client, home, &crate::tui::builtin_command_names()).await;
    for n in &set.notices {
        eprintln!("reasonix: warning: {n}");
    }
    match set.expand_line(prompt) {
        Some(text) => Ok(text),
        None => {
            let names: Vec<String> = set
                .commands
                .iter()
                .map(|c| format!("/{}", c.name))
                .collect();
            Err(format!(
                "unknown command /{name}; {}",
                if names.is_empty() {
                    "no command files in .reasonix/commands/ or ~/.reasonix/commands/".to_string()
                } else {
                    format!("commands: {}", names.join(" "))
                }
            ))
        }
    }
}

fn fail(out: &mut Printer, reason: String) -> RunOutcome {
    fail_with(out, Exit::Failed, reason)
}

fn fail_with(out: &mut Printer, exit: Exit, reason: String) -> RunOutcome {
    out.error(&reason);
    RunOutcome {
        exit,
        reason: Some(reason),
    }
}

#[derive(Default)]
struct Printer {
    json: bool,
    /// Tool calls the model asked for in this turn (id → name, arguments), so a call that
    /// was denied (never started) still gets its `tool_started` line.
    asked: std::collections::HashMap<String, (String, String)>,
    /// Calls whose `tool_started` line went out.
    started: std::collections::HashSet<String>,
}

/// Model text for a terminal: control characters (escape sequences in particular) become
/// `?`, like the TUI shows them; newlines and tabs stay, carriage returns go.
fn terminal_safe(text: &str) -> String {
    text.chars()
        .filter(|c| *c != '\r')
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '?'
            } else {
                c
            }
        })
        .collect()
}

impl Printer {
    fn line(&self, v: serde_json::Value) {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{v}");
        let _ = o.flush();
    }

    fn session(&mut self, id: &str, sandbox: &str) {
        if self.json {
            self.line(json!({"type": "session", "session": id, "sandbox": sandbox}));
        }
    }

    fn warning(&mut self, text: &str) {
        if self.json {
            self.line(json!({"type": "warning", "text": text}));
        } else {
            eprintln!("reasonix: warning: {text}");
        }
    }

    fn notice(&mut self, text: &str) {
        if self.json {
            self.line(json!({"type": "notice", "text": text}));
        } else {
            eprintln!("[reasonix] {text}");
        }
    }

    fn error(&mut self, text: &str) {
        if self.json {
            self.line(json!({"type": "error", "message": text}));
        }
    }

    fn progress(&mut self, call_id: &str, message: &str) {
        if self.json {
            self.line(json!({"type": "tool_progress", "call_id": call_id, "message": message}));
        }
    }

    fn connection(&mut self, state: &ConnState) {
        let v = match state {
            ConnState::Connecting => json!({"type": "connection", "state": "connecting"}),
            ConnState::Connected { resumed } => {
                json!({"type": "connection", "state": "connected", "resumed": resumed})
            }
            ConnState::Reconnecting {
                attempt,
                next_in,
                last_contact_secs,
                reason,
            } => json!({"type": "connection", "state": "reconnecting", "attempt": attempt,
                "next_retry_ms": next_in.as_millis() as u64, "last_contact_secs": last_contact_secs,
                "reason": reason}),
            ConnState::Failed { reason, .. } => {
                json!({"type": "connection", "state": "failed", "reason": reason})
            }
        };
        if self.json {
            self.line(v);
        } else if let ConnState::Reconnecting {
            attempt,
            next_in,
            last_contact_secs,
            reason,
        } = state
        {
            eprintln!(
                "[reasonix] connection lost ({reason}); reconnecting, attempt {attempt}, next in {:.1}s, last contact {last_contact_secs}s ago",
                next_in.as_secs_f64()
            );
        } else if let ConnState::Connected { resumed: true } = state {
            eprintln!("[reasonix] reconnected; session resumed");
        }
    }

    fn event(&mut self, kind: &EventKind) {
        if self.json {
            let v = match kind {
                EventKind::TextDelta { text } => json!({"type": "text", "text": text}),
                EventKind::ReasoningDelta { text } => json!({"type": "reasoning", "text": text}),
                EventKind::ToolStarted {
                    call_id,
                    name,
                    arguments,
                } => {
                    self.started.insert(call_id.clone());
                    json!({"type": "tool_started", "call_id": call_id, "name": name, "arguments": arguments})
                }
                EventKind::AssistantMessage { tool_calls, .. } => {
                    for c in tool_calls {
                        self.asked
                            .insert(c.id.clone(), (c.name.clone(), c.arguments.clone()));
                    }
                    return;
                }
                EventKind::ToolFinished { .. } => {
                    self.tool_finished(kind, None);
                    return;
                }
                EventKind::ApprovalRequested {
                    call_id,
                    tool,
                    arguments,
                    reason,
                    ..
                } => {
                    json!({"type": "approval_requested", "call_id": call_id, "tool": tool, "arguments": arguments, "reason": reason})
                }
                EventKind::Notice { text } => json!({"type": "notice", "text": text}),
                EventKind::Goal(g) => json!({"type": "goal", "goal": g}),
                EventKind::Plan(reasonix_forward::proto::PlanEvent::Proposed {
                    plan_id,
                    plan,
                    steps,
                }) => json!({"type": "plan", "plan_id": plan_id, "plan": plan, "steps": steps}),
                EventKind::Plan(reasonix_forward::proto::PlanEvent::Routed {
                    route,
                    depth,
                    reason,
                }) => json!({"type": "route", "route": route, "depth": depth, "reason": reason}),
                EventKind::Plan(reasonix_forward::proto::PlanEvent::Handoff { model, text }) => {
                    json!({"type": "handoff", "model": model, "text": text})
                }
                EventKind::Plan(reasonix_forward::proto::PlanEvent::PlannerFailed {
                    reason,
                    handed_over,
                }) => {
                    json!({"type": "planner_failed", "reason": reason, "handed_over": handed_over})
                }
                EventKind::ProviderRetry(r) => json!({"type": "provider_retry",
                    "phase": r.phase, "attempt": r.attempt, "max_attempts": r.max_attempts,
                    "delay_ms": r.delay_ms, "reason": r.reason,
                    "text": r.describe(r.delay_ms.div_ceil(1000))}),
                EventKind::Compacted {
                    kind,
                    trigger,
                    tokens_before,
                    tokens_after,
                    snipped,
                    archived,
                    archive,
                    ..
                } => json!({"type": "compacted", "kind": kind, "trigger": trigger,
                    "tokens_before": tokens_before, "tokens_after": tokens_after,
                    "snipped": snipped.len(), "summarised": archived.len(),
                    "archive": archive, "cache_reset": true}),
                // A subagent's event, under its parent's call id; its streamed deltas are
                // left out (its messages carry the same text).
                EventKind::Subagent {
                    call_id,
                    child,
                    event,
                } => {
                    if subagent_delta(event) {
                        return;
                    }
                    json!({"type": "subagent", "call_id": call_id, "child": child,
                        "event": serde_json::to_value(event.as_ref()).unwrap_or_default()})
                }
                _ => return,
            };
            self.line(v);
            return;
        }
        match kind {
            EventKind::TextDelta { text } => {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(terminal_safe(text).as_bytes());
                let _ = o.flush();
            }
            EventKind::ToolStarted {
                name, arguments, ..
            } => {
                eprintln!("[tool] {name} {}", terminal_safe(&summary(arguments)));
            }
            EventKind::ToolFinished {
                name,
                denied: Some(_),
                output,
                ..
            } => {
                eprintln!("[tool] {name} not run: {}", terminal_safe(&summary(output)));
            }
            EventKind::ToolFinished {
                name,
                is_error: true,
                output,
                ..
            } => {
                eprintln!("[tool] {name} failed: {}", terminal_safe(&summary(output)));
            }
            EventKind::Notice { text } => eprintln!("[reasonix] {}", terminal_safe(text)),
            EventKind::Goal(g) => {
                eprintln!("[goal] {}", terminal_safe(&crate::goal::event_line(g)))
            }
            EventKind::Plan(reasonix_forward::proto::PlanEvent::Proposed { plan, .. }) => {
                let mut o = std::io::stdout().lock();
                let _ = writeln!(o, "\n\n--- plan (approve: reasonix run --continue --approve-plan; revise: reasonix run --continue \"comment\") ---\n{}", terminal_safe(plan));
                let _ = o.flush();
            }
            EventKind::Plan(reasonix_forward::proto::PlanEvent::Routed {
                route,
                depth,
                reason,
            }) => eprintln!("[reasonix] route: {route} (plan depth {depth}; {reason})"),
            EventKind::Plan(reasonix_forward::proto::PlanEvent::Handoff { model, .. }) => {
                eprintln!(
                    "[reasonix] the planner ({}) handed its plan to the executor",
                    terminal_safe(model)
                )
            }
            EventKind::Plan(reasonix_forward::proto::PlanEvent::PlannerFailed {
                reason,
                handed_over,
            }) => eprintln!(
                "[reasonix] {}{}",
                terminal_safe(reason),
                if *handed_over {
                    "; the executor takes the task"
                } else {
                    ""
                }
            ),
            EventKind::ProviderRetry(r) => eprintln!(
                "[reasonix] {}",
                terminal_safe(&r.describe(r.delay_ms.div_ceil(1000)))
            ),
            EventKind::Compacted {
                kind,
                trigger,
                tokens_before,
                tokens_after,
                snipped,
                archived,
                ..
            } => eprintln!(
                "[reasonix] {}",
                crate::context::compaction_line(
                    *kind,
                    *trigger,
                    *tokens_before,
                    *tokens_after,
                    snipped.len().max(archived.len())
                )
            ),
            _ => {}
        }
    }

    /// A `tool_finished` line: a summary, the full size and, for outputs stored on the host,
    /// their SHA-256. `full` (with `--full-output`) adds the complete output: `Ok("")` means
    /// "the event's own output is complete".
    fn tool_finished(&mut self, kind: &EventKind, full: Option<Result<String, String>>) {
        let EventKind::ToolFinished {
            call_id,
            name,
            is_error,
            output,
            output_ref,
            denied,
            context_bytes: _,
        } = kind
        else {
            return;
        };
        if !self.json {
            self.event(kind);
            return;
        }
        // A call that never started (denied, unknown tool, bad arguments) still gets its
        // `tool_started` line, so every call is one started/finished pair.
        if !self.started.contains(call_id) {
            let arguments = self
                .asked
                .get(call_id)
                .map(|(_, a)| a.clone())
                .unwrap_or_default();
            self.started.insert(call_id.clone());
            self.line(
                json!({"type": "tool_started", "call_id": call_id, "name": name,
                             "arguments": arguments, "run": false}),
            );
        }
        let bytes = output_ref
            .as_ref()
            .map(|r| r.bytes)
            .unwrap_or(output.len() as u64);
        let mut v = json!({"type": "tool_finished", "call_id": call_id, "name": name,
                           "is_error": is_error, "summary": summary(output), "bytes": bytes});
        if let Some(r) = output_ref {
            v["sha256"] = json!(r.sha256);
        }
        if let Some(d) = denied {
            v["denied"] = json!(d);
            v["reason"] = json!(output);
        }
        match full {
            None => {}
            Some(Ok(text)) if text.is_empty() && output_ref.is_none() => {
                v["output"] = json!(output);
            }
            Some(Ok(text)) => v["output"] = json!(text),
            Some(Err(e)) => v["output_error"] = json!(e),
        }
        self.line(v);
    }

    fn finished(
        &mut self,
        outcome: TurnOutcome,
        detail: Option<&str>,
        usage: &Usage,
        model: &str,
        tally: &Tally,
    ) {
        if self.json {
            let hit_ratio = if usage.prompt_tokens > 0 {
                Some(usage.cache_hit_tokens as f64 / usage.prompt_tokens as f64)
            } else {
                None
            };
            self.line(json!({"type": "turn_finished", "outcome": outcome, "detail": detail,
                "model": model,
                "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                          "cache_hit_tokens": usage.cache_hit_tokens, "cache_miss_tokens": usage.cache_miss_tokens,
                          "reasoning_tokens": usage.reasoning_tokens},
                "requests": tally.requests, "compactions": tally.compactions,
                "cache_hit_ratio": hit_ratio, "cost_usd": tally.cost}));
        } else {
            println!();
            if outcome != TurnOutcome::Completed {
                eprintln!(
                    "[reasonix] turn {outcome}{}",
                    detail.map(|d| format!(": {d}")).unwrap_or_default()
                );
            }
        }
    }
}

/// Per-run figures beyond the token sums.
#[derive(Debug, Default)]
struct Tally {
    /// Model requests of the turn (including compaction summaries).
    requests: u64,
    /// Compaction events of the turn.
    compactions: u64,
    /// Prices of the run's model, when configured.
    prices: Option<crate::config::Prices>,
    /// Cost so far at `prices`.
    cost: Option<f64>,
}

fn summary(text: &str) -> String {
    let first: String = text
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(160)
        .collect();
    if text.len() > first.len() {
        format!("{first}…")
    } else {
        first
    }
}

/// `reasonix rewind`: restore files and/or the conversation of a session to just before turn
/// `to_turn`. Without a session id the most recent session of the workspace is used.
pub async fn rewind(
    config: &Config,
    connector: Arc<dyn Connector>,
    session: Option<String>,
    to_turn: u64,
    scope: reasonix_forward::proto::RewindScope,
    dry_run: bool,
    forget_memory: bool,
) -> RunOutcome {
    let gateway = Arc::new(Gateway::new(config));
    let (client, mut events) = Client::start(connector, gateway, ClientOptions::default());
    let open = OpenSession {
        // Filled in by the client (user hooks and trust records).
        hooks: Default::default(),
        session,
        new: false,
        // The journal follows the open: the facts the rewound turns remembered are read
        // from it (#32).
        since: 0,
        read_only: false,
        takeover: true,
        settings: SessionSettings {
            headless: true,
            policy: config.session_policy(),
            ..SessionSettings::default()
        },
        keeper: false,
    };
    let opened = match client.request(Request::OpenSession(open)).await {
        Ok(Response::SessionOpened(o)) => o,
        Ok(other) => {
            return fail(
                &mut Printer::default(),
                format!("unexpected answer {other:?}"),
            )
        }
        Err(e) => return fail(&mut Printer::default(), e.to_string()),
    };
    let journal = catch_up(&mut events, opened.last_seq).await;
    let req = Request::Rewind {
        request_id: format!("rewind-{:016x}", rand::random::<u64>()),
        to_turn,
        scope,
        dry_run,
    };
    match client.request(req).await {
        Ok(Response::Rewound { summary, paths }) => {
            println!("session {}: {summary}", opened.session);
            for p in paths {
                println!("  {p}");
            }
            let offer = crate::memory::rewind::offer(
                &client,
                &config.home,
                &journal,
                to_turn,
                dry_run,
                forget_memory,
            )
            .await;
            match offer {
                Some((text, true)) => fail(&mut Printer::default(), text),
                Some((text, false)) => {
                    println!("{text}");
                    RunOutcome {
                        exit: Exit::Completed,
                        reason: None,
                    }
                }
                None => RunOutcome {
                    exit: Exit::Completed,
                    reason: None,
                },
            }
        }
        Ok(other) => fail(
            &mut Printer::default(),
            format!("unexpected answer {other:?}"),
        ),
        Err(e) => fail(&mut Printer::default(), e.to_string()),
    }
}

/// The journal events the open sends after its answer, up to `last_seq` (what is there
/// after 30 s when they stop coming).
async fn catch_up(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<ClientEvent>,
    last_seq: u64,
) -> Vec<Event> {
    let mut out = Vec::new();
    if last_seq == 0 {
        return out;
    }
    let limit = tokio::time::sleep(std::time::Duration::from_secs(30));
    tokio::pin!(limit);
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(ClientEvent::Event(e)) => {
                    let seq = e.seq;
                    out.push(e);
                    if seq >= last_seq {
                        return out;
                    }
                }
                Some(_) => {}
                None => return out,
            },
            _ = &mut limit => return out,
        }
    }
}

/// Print the project settings the host refused that were not reported yet: over SSH the
/// laptop never sees the host's `reasonix.toml`, so these are the only report; in local mode
/// they equal what the laptop printed when it loaded the same file, unless it changed since.
fn report_ignored(
    out: &mut Printer,
    ignored: &[reasonix_forward::policy::Ignored],
    reported: &mut Vec<reasonix_forward::policy::Ignored>,
) {
    for i in ignored {
        if !reported.contains(i) {
            out.warning(&format!("host: {i}"));
            reported.push(i.clone());
        }
    }
}

/// The usage of a subagent's model step, however deeply nested (`None`: another event).
fn subagent_usage(kind: &EventKind) -> Option<&reasonix_forward::proto::Usage> {
    match kind {
        EventKind::Usage { usage, .. } => Some(usage),
        EventKind::Subagent { event, .. } => subagent_usage(event),
        _ => None,
    }
}

/// True for a subagent's streamed delta, however deeply nested.
fn subagent_delta(kind: &EventKind) -> bool {
    match kind {
        EventKind::TextDelta { .. } | EventKind::ReasoningDelta { .. } => true,
        EventKind::Subagent { event, .. } => subagent_delta(event),
        _ => false,
    }
}
