//! Journal events into transcript entries.

use super::*;

impl Transcript {
    /// Apply one journal event. `ts_ms` is its timestamp (ms since the epoch) when known.
    pub(crate) fn apply(&mut self, kind: &EventKind, ts_ms: Option<i64>, turn: u64) {
        match kind {
            // A steer the planner took (#38 §2) was given to a model like the executor's.
            EventKind::Planner { event } if matches!(**event, EventKind::SteerInjected { .. }) => {
                self.apply(event, ts_ms, turn)
            }
            // Children's events (#33) get their own panel, not the parent's transcript.
            EventKind::SessionStarted { .. }
            | EventKind::Checkpoint { .. }
            | EventKind::ElicitationAnswered { .. }
            | EventKind::Usage { .. }
            | EventKind::Subagent { .. }
            | EventKind::Planner { .. } => {}
            EventKind::ElicitationRequested {
                server, message, ..
            } => {
                self.notice(
                    format!("MCP server `{server}` asks for input: {}", message.trim()),
                    Level::Info,
                );
            }
            EventKind::UserTurn { text, .. } => {
                self.end_streams();
                self.push(EntryKind::User {
                    text: text.clone(),
                    turn,
                });
            }
            EventKind::TextDelta { text } => {
                // Text after reasoning ends the reasoning block (it stays this step's).
                if let Some(r) = self.streaming_reasoning {
                    if let Some(e) = self.entries.get_mut(r) {
                        if let EntryKind::Reasoning { streaming, .. } = &mut e.kind {
                            *streaming = false;
                        }
                        e.touch();
                    }
                }
                let idx = match self.streaming_text {
                    Some(i) => i,
                    None => {
                        let i = self.push(EntryKind::Assistant {
                            text: String::new(),
                            streaming: true,
                        });
                        self.streaming_text = Some(i);
                        i
                    }
                };
                if let Some(e) = self.entries.get_mut(idx) {
                    if let EntryKind::Assistant { text: t, .. } = &mut e.kind {
                        t.push_str(text);
                    }
                    e.touch();
                }
            }
            EventKind::ReasoningDelta { text } => {
                let idx = match self.streaming_reasoning {
                    Some(i) => i,
                    None => {
                        let i = self.push(EntryKind::Reasoning {
                            text: String::new(),
                            streaming: true,
                        });
                        self.streaming_reasoning = Some(i);
                        i
                    }
                };
                if let Some(e) = self.entries.get_mut(idx) {
                    if let EntryKind::Reasoning { text: t, .. } = &mut e.kind {
                        t.push_str(text);
                    }
                    e.touch();
                }
            }
            EventKind::AssistantMessage {
                content,
                reasoning,
                tool_calls,
                ..
            } => {
                // The complete message is authoritative over the deltas seen (a catch-up may
                // have started mid-stream).
                match (self.streaming_reasoning, reasoning) {
                    (Some(i), Some(r)) => {
                        if let Some(e) = self.entries.get_mut(i) {
                            if let EntryKind::Reasoning { text, .. } = &mut e.kind {
                                *text = r.clone();
                            }
                        }
                    }
                    (None, Some(r)) if !r.trim().is_empty() => {
                        self.push(EntryKind::Reasoning {
                            text: r.clone(),
                            streaming: false,
                        });
                    }
                    _ => {}
                }
                match self.streaming_text {
                    Some(i) => {
                        if let Some(e) = self.entries.get_mut(i) {
                            if let EntryKind::Assistant { text, .. } = &mut e.kind {
                                *text = content.clone();
                            }
                        }
                    }
                    None if !content.trim().is_empty() => {
                        self.push(EntryKind::Assistant {
                            text: content.clone(),
                            streaming: false,
                        });
                    }
                    None => {}
                }
                self.end_streams();
                for call in tool_calls {
                    if self.by_call.contains_key(&call.id) {
                        continue;
                    }
                    let i = self.push(EntryKind::Tool(ToolCard {
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        state: ToolState::Queued,
                        output: String::new(),
                        output_ref: None,
                        progress: String::new(),
                        started_ms: None,
                        finished_ms: None,
                        approval_id: None,
                        awaiting_approval: false,
                        decision: None,
                    }));
                    self.by_call.insert(call.id.clone(), i);
                }
            }
            EventKind::ToolStarted {
                call_id,
                name,
                arguments,
            } => {
                self.end_streams();
                if !self.by_call.contains_key(call_id) {
                    let i = self.push(EntryKind::Tool(ToolCard {
                        name: name.clone(),
                        arguments: arguments.clone(),
                        state: ToolState::Queued,
                        output: String::new(),
                        output_ref: None,
                        progress: String::new(),
                        started_ms: None,
                        finished_ms: None,
                        approval_id: None,
                        awaiting_approval: false,
                        decision: None,
                    }));
                    self.by_call.insert(call_id.clone(), i);
                }
                if let Some(e) = self.card_mut(call_id) {
                    if let EntryKind::Tool(c) = &mut e.kind {
                        c.state = ToolState::Running;
                        c.started_ms = ts_ms;
                        c.awaiting_approval = false;
                    }
                    e.touch();
                }
            }
            EventKind::ToolFinished {
                call_id,
                name,
                is_error,
                output,
                output_ref,
                denied: _,
                context_bytes: _,
            } => {
                if !self.by_call.contains_key(call_id) {
                    let i = self.push(EntryKind::Tool(ToolCard {
                        name: name.clone(),
                        arguments: String::new(),
                        state: ToolState::Queued,
                        output: String::new(),
                        output_ref: None,
                        progress: String::new(),
                        started_ms: None,
                        finished_ms: None,
                        approval_id: None,
                        awaiting_approval: false,
                        decision: None,
                    }));
                    self.by_call.insert(call_id.clone(), i);
                }
                if let Some(e) = self.card_mut(call_id) {
                    if let EntryKind::Tool(c) = &mut e.kind {
                        c.state = ToolState::Done {
                            is_error: *is_error,
                        };
                        c.output = output.clone();
                        c.output_ref = output_ref.clone();
                        c.finished_ms = ts_ms;
                        c.awaiting_approval = false;
                    }
                    e.touch();
                }
            }
            EventKind::ApprovalRequested {
                approval_id,
                call_id,
                tool,
                arguments,
                ..
            } => {
                // Mark the queued card this approval is about: the call it names, or (journals
                // older than `call_id`) the queued one with the same tool and arguments.
                let unasked = |e: &Entry| {
                    matches!(&e.kind, EntryKind::Tool(c) if c.state == ToolState::Queued
                        && c.approval_id.is_none())
                };
                let found = match call_id.as_deref() {
                    Some(id) => self.card_mut(id).filter(|e| unasked(e)),
                    None => self.entries.iter_mut().rev().find(|e| {
                        unasked(e)
                            && matches!(&e.kind, EntryKind::Tool(c)
                                if c.name == *tool && c.arguments == *arguments)
                    }),
                };
                if let Some(e) = found {
                    if let EntryKind::Tool(c) = &mut e.kind {
                        c.approval_id = Some(approval_id.clone());
                        c.awaiting_approval = true;
                    }
                    e.touch();
                }
            }
            EventKind::ApprovalAnswered {
                approval_id,
                decision,
                ..
            } => {
                let found = self.entries.iter_mut().rev().find(|e| {
                    matches!(&e.kind, EntryKind::Tool(c) if c.approval_id.as_deref() == Some(approval_id))
                });
                if let Some(e) = found {
                    if let EntryKind::Tool(c) = &mut e.kind {
                        c.awaiting_approval = false;
                        c.decision = Some(*decision);
                    }
                    e.touch();
                }
            }
            EventKind::TurnFinished { outcome, detail } => {
                self.end_streams();
                // Cards that never ran stop spinning.
                for e in self.entries.iter_mut() {
                    if let EntryKind::Tool(c) = &mut e.kind {
                        if matches!(c.state, ToolState::Queued | ToolState::Running) {
                            c.state = ToolState::Done { is_error: true };
                            if c.output.is_empty() {
                                c.output = format!("not finished: turn {outcome}");
                            }
                            c.awaiting_approval = false;
                            e.cache.replace(None);
                        }
                    }
                }
                let detail = detail
                    .as_ref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                match outcome {
                    TurnOutcome::Completed => {}
                    TurnOutcome::Paused => self.notice(
                        format!("turn paused{detail} — type /continue to go on"),
                        Level::Warn,
                    ),
                    TurnOutcome::Cancelled => {
                        self.notice(format!("turn cancelled{detail}"), Level::Warn)
                    }
                    TurnOutcome::Interrupted | TurnOutcome::Failed | TurnOutcome::Unknown => {
                        self.notice(format!("turn {outcome}{detail}"), Level::Error)
                    }
                }
            }
            EventKind::Notice { text } => self.notice(text.clone(), Level::Info),
            EventKind::Plan(p) => {
                use reasonix_forward::proto::PlanEvent;
                match p {
                    PlanEvent::Mode { on } => self.notice(
                        if *on {
                            "plan mode on: nothing changes until you approve a plan".to_string()
                        } else {
                            "plan mode off".to_string()
                        },
                        Level::Info,
                    ),
                    PlanEvent::Proposed { plan, steps, .. } => {
                        self.end_streams();
                        self.push(EntryKind::Assistant {
                            text: format!("**Proposed plan** ({} steps)\n\n{plan}", steps.len()),
                            streaming: false,
                        });
                    }
                    PlanEvent::Routed {
                        route,
                        depth,
                        reason,
                    } => self.notice(
                        crate::plan_lines::route_line(route, depth, reason),
                        Level::Info,
                    ),
                    PlanEvent::Handoff { model, text } => {
                        self.end_streams();
                        self.push(EntryKind::Assistant {
                            text: format!("**Planner handoff** ({model})\n\n{text}"),
                            streaming: false,
                        });
                    }
                    PlanEvent::PlannerFailed {
                        reason,
                        handed_over,
                    } => self.notice(
                        crate::plan_lines::planner_failed_line(reason, *handed_over),
                        Level::Warn,
                    ),
                    PlanEvent::Decided {
                        decision, comment, ..
                    } => self.notice(
                        match comment {
                            Some(c) => format!("plan: {} ({c})", decision.as_str()),
                            None => format!("plan: {}", decision.as_str()),
                        },
                        Level::Info,
                    ),
                }
            }
            EventKind::Goal(g) => self.notice(crate::goal::event_line(g), Level::Info),
            // Mid-stream: the streaming entry keeps taking the deltas.
            EventKind::Steer { request_id, text } => {
                self.push(EntryKind::Steer {
                    request_id: request_id.clone(),
                    text: text.clone(),
                    delivered: false,
                });
            }
            EventKind::SteerInjected { request_ids, .. } => {
                for e in self.entries.iter_mut().rev() {
                    if let EntryKind::Steer {
                        request_id,
                        delivered,
                        ..
                    } = &mut e.kind
                    {
                        if request_ids.contains(request_id) {
                            *delivered = true;
                            e.touch();
                        }
                    }
                }
            }
            EventKind::ShellRan {
                request_id,
                command,
                output,
                is_error,
                added_to_context,
            } => {
                self.pending_shells.remove(request_id);
                let done = EntryKind::Shell {
                    command: command.clone(),
                    output: output.clone(),
                    is_error: *is_error,
                    added_to_context: *added_to_context,
                    running: false,
                };
                match self
                    .shells
                    .remove(request_id)
                    .and_then(|i| self.entries.get_mut(i))
                {
                    // The streamed entry gets the bounded result.
                    Some(e) if matches!(e.kind, EntryKind::Shell { .. }) => {
                        e.kind = done;
                        e.touch();
                    }
                    _ => {
                        self.end_streams();
                        self.push(done);
                    }
                }
            }
            EventKind::ProviderRetry(r) => {
                self.notice(r.describe(r.delay_ms.div_ceil(1000)), Level::Warn)
            }
            EventKind::Compacted {
                kind,
                trigger,
                tokens_before,
                tokens_after,
                snipped,
                archived,
                ..
            } => self.notice(
                crate::context::compaction_line(
                    *kind,
                    *trigger,
                    *tokens_before,
                    *tokens_after,
                    snipped.len().max(archived.len()),
                ),
                Level::Info,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{ctx, text};
    use super::*;
    use reasonix_forward::proto::ToolCall;

    #[test]
    fn a_steer_the_planner_took_is_shown_given_to_the_model() {
        let mut t = Transcript::default();
        t.apply(
            &EventKind::Steer {
                request_id: "s1".into(),
                text: "use tabs".into(),
            },
            None,
            1,
        );
        let delivered = |t: &Transcript| {
            t.entries.iter().any(|e| {
                matches!(e.kind, EntryKind::Steer { delivered: true, ref request_id, .. } if request_id == "s1")
            })
        };
        assert!(!delivered(&t));
        // Another planner event changes nothing in the transcript.
        t.apply(
            &EventKind::Planner {
                event: Box::new(EventKind::ToolStarted {
                    call_id: "p1".into(),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                }),
            },
            None,
            1,
        );
        assert!(!delivered(&t));
        t.apply(
            &EventKind::Planner {
                event: Box::new(EventKind::SteerInjected {
                    request_ids: vec!["s1".into()],
                    est_tokens: 3,
                }),
            },
            None,
            1,
        );
        assert!(delivered(&t));
    }

    #[test]
    fn stream_then_message_then_tools() {
        let mut t = Transcript::default();
        t.apply(
            &EventKind::UserTurn {
                attachments: Vec::new(),
                request_id: "r".into(),
                text: "hi".into(),
            },
            None,
            1,
        );
        t.apply(&EventKind::ReasoningDelta { text: "hmm".into() }, None, 1);
        t.apply(&EventKind::TextDelta { text: "Hel".into() }, None, 1);
        t.apply(&EventKind::TextDelta { text: "lo".into() }, None, 1);
        t.apply(
            &EventKind::AssistantMessage {
                content: "Hello".into(),
                reasoning: Some("hmm".into()),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"ls\"}".into(),
                }],
                provider_replay: None,
            },
            None,
            1,
        );
        t.apply(
            &EventKind::ToolStarted {
                call_id: "c1".into(),
                name: "bash".into(),
                arguments: "{\"command\":\"ls\"}".into(),
            },
            Some(1000),
            1,
        );
        t.apply(
            &EventKind::ToolFinished {
                call_id: "c1".into(),
                name: "bash".into(),
                is_error: false,
                output: "a\nb".into(),
                output_ref: None,
                denied: None,
                context_bytes: None,
            },
            Some(3500),
            1,
        );
        assert_eq!(t.len(), 4);
        assert_eq!(t.last_answer().as_deref(), Some("Hello"));
        let all = text(&t.window(&ctx(60), 100, Scroll::Follow));
        assert!(all.contains(&"  ● bash ls  2.5s".to_string()), "{all:?}");
        assert!(all.contains(&"    │ a".to_string()));
        assert!(all.contains(&"  thought · 1 line (Ctrl-O to show)".to_string()));
    }
}
