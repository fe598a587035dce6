//! Children running when the host daemon stopped (#33 §1: "after a daemon restart a running
//! child resumes from the journal or is reported failed; it is never run twice"). A child is
//! not resumed: when the session reopens its journal with the turn still open, each child
//! that started and did not end is closed as its own events — its unfinished calls finished
//! as interrupted (never run again), then its `turn_finished` `interrupted` — wrapped in its
//! route, before the parent's calls are closed. Replays (the workbench's child rows, ACP
//! `session/load`, `run --json`) then show it ended, not running for ever.

use reasonix_forward::proto::{Event, EventKind, TurnOutcome};

use super::wrap;

/// A child's route (`(parent call, child)` layers, its own last).
type Route = Vec<(String, String)>;

/// What closes the children of turn `turn` that `events` show started and not ended,
/// deepest first; `interrupted_output(started)` is the text of an unfinished call.
pub(crate) fn close_interrupted_children(
    events: &[Event],
    turn: u64,
    interrupted_output: fn(bool) -> &'static str,
) -> Vec<EventKind> {
    // Each child's own events, by route, in the order the children started.
    let mut routes: Vec<(Route, Vec<Event>)> = Vec::new();
    for e in events.iter().filter(|e| e.turn == turn) {
        let mut route = Vec::new();
        let mut kind = &e.kind;
        while let EventKind::Subagent {
            call_id,
            child,
            event,
        } = kind
        {
            route.push((call_id.clone(), child.clone()));
            kind = event;
        }
        if route.is_empty() {
            continue;
        }
        let inner = Event {
            kind: kind.clone(),
            ..e.clone()
        };
        match routes.iter_mut().find(|(r, _)| *r == route) {
            Some((_, evs)) => evs.push(inner),
            None => routes.push((route, vec![inner])),
        }
    }
    let mut open: Vec<&(Route, Vec<Event>)> = routes
        .iter()
        .filter(|(_, evs)| {
            evs.iter()
                .any(|e| matches!(e.kind, EventKind::UserTurn { .. }))
                && !evs
                    .iter()
                    .any(|e| matches!(e.kind, EventKind::TurnFinished { .. }))
        })
        .collect();
    // A grandchild ends before its parent child.
    reasonix_forward::sort::sort_by_key(&mut open, |(route, _)| std::cmp::Reverse(route.len()));
    let mut out = Vec::new();
    for (route, evs) in open {
        for (call, started) in crate::agent::unfinished_calls(evs) {
            out.push(wrap(
                route,
                EventKind::ToolFinished {
                    call_id: call.id,
                    name: call.name,
                    is_error: true,
                    output: interrupted_output(started).into(),
                    output_ref: None,
                    denied: None,
                    context_bytes: None,
                },
            ));
        }
        out.push(wrap(
            route,
            EventKind::TurnFinished {
                outcome: TurnOutcome::Interrupted,
                detail: Some(
                    "the host daemon stopped while this subagent ran; it was not resumed".into(),
                ),
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use reasonix_forward::proto::ToolCall;

    fn ev(seq: u64, turn: u64, kind: EventKind) -> Event {
        Event {
            seq,
            ts: String::new(),
            turn,
            kind,
        }
    }

    fn route(r: &[(&str, &str)]) -> Vec<(String, String)> {
        r.iter()
            .map(|(c, s)| (c.to_string(), s.to_string()))
            .collect()
    }

    fn start(text: &str) -> EventKind {
        EventKind::UserTurn {
            request_id: text.into(),
            text: text.into(),
            attachments: vec![],
        }
    }

    fn asks(id: &str) -> EventKind {
        EventKind::AssistantMessage {
            content: String::new(),
            reasoning: None,
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "bash".into(),
                arguments: "{}".into(),
            }],
            provider_replay: None,
        }
    }

    fn out(_started: bool) -> &'static str {
        "interrupted"
    }

    #[test]
    fn open_children_are_closed_deepest_first_and_ended_ones_left_alone() {
        let a = route(&[("call_t", "sa-1")]);
        let b = route(&[("call_t", "sa-1"), ("c2", "sa-2")]);
        let done = route(&[("call_p", "sa-3")]);
        let events = vec![
            ev(1, 1, wrap(&a, start("a"))),
            ev(2, 1, wrap(&a, asks("c2"))),
            ev(3, 1, wrap(&b, start("b"))),
            ev(4, 1, wrap(&b, asks("cb"))),
            ev(
                5,
                1,
                wrap(
                    &b,
                    EventKind::ToolStarted {
                        call_id: "cb".into(),
                        name: "bash".into(),
                        arguments: "{}".into(),
                    },
                ),
            ),
            ev(6, 1, wrap(&done, start("done"))),
            ev(
                7,
                1,
                wrap(
                    &done,
                    EventKind::TurnFinished {
                        outcome: TurnOutcome::Completed,
                        detail: None,
                    },
                ),
            ),
            // Another turn's child is not this turn's business.
            ev(8, 2, wrap(&route(&[("x", "sa-9")]), start("later"))),
        ];
        let closed = close_interrupted_children(&events, 1, out);
        let shown: Vec<String> = closed
            .iter()
            .map(|k| serde_json::to_string(k).expect("json"))
            .collect();
        assert_eq!(closed.len(), 4, "{shown:#?}");
        // sa-2 first: its started call, then its end; then sa-1: its call (sa-2's `c2`
        // was never finished), then its end.
        assert!(shown[0].contains("sa-2") && shown[0].contains("\"call_id\":\"cb\""));
        assert!(shown[1].contains("sa-2") && shown[1].contains("\"outcome\":\"interrupted\""));
        assert!(shown[2].contains("\"call_id\":\"c2\"") && !shown[2].contains("sa-2"));
        assert!(shown[3].contains("sa-1") && shown[3].contains("\"outcome\":\"interrupted\""));
        assert!(!shown
            .iter()
            .any(|s| s.contains("sa-3") || s.contains("sa-9")));
    }
}
