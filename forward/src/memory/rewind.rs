//! Which facts a rewind may forget (#32): a rewind to just before turn N offers to forget the
//! facts that `remember` calls of turn N and later wrote. The TUI, ACP and `reasonix rewind`
//! read them from the session's events: a successful `remember` result names its fact
//! (`remembered project fact ID (…` / `remembered global fact ID (…`).

use crate::proto::{Event, EventKind};

/// The fact id a successful `remember` result names; `None` for any other event.
pub fn remembered_fact(kind: &EventKind) -> Option<String> {
    let EventKind::ToolFinished {
        name,
        is_error: false,
        output,
        ..
    } = kind
    else {
        return None;
    };
    if name != "remember" {
        return None;
    }
    let mut w = output.split_whitespace();
    match (w.next(), w.next(), w.next(), w.next()) {
        (Some("remembered"), Some("project" | "global"), Some("fact"), Some(id)) => {
            Some(id.to_string())
        }
        _ => None,
    }
}

/// The facts turns `turn` and later remembered, in order, each once.
pub fn remembered_since(events: &[Event], turn: u64) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events.iter().filter(|e| e.turn >= turn) {
        if let Some(id) = remembered_fact(&e.kind) {
            if !out.contains(&id) {
                out.push(id);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(turn: u64, name: &str, is_error: bool, output: &str) -> Event {
        Event {
            seq: turn,
            ts: String::new(),
            turn,
            kind: EventKind::ToolFinished {
                call_id: format!("c{turn}"),
                name: name.into(),
                is_error,
                output: output.into(),
                output_ref: None,
                denied: None,
                context_bytes: None,
            },
        }
    }

    #[test]
    fn only_successful_remembers_of_the_rewound_turns_count() {
        let events = vec![
            finished(
                1,
                "remember",
                false,
                "remembered project fact p-early (new)",
            ),
            finished(
                2,
                "remember",
                false,
                "remembered global fact g-2 (new); the laptop keeps it",
            ),
            finished(2, "remember", true, "remembered project fact p-failed (x)"),
            finished(
                3,
                "memory",
                false,
                "remembered project fact p-not-a-remember (x)",
            ),
            finished(3, "remember", false, "refused: looks like a secret"),
            finished(4, "remember", false, "remembered project fact p-4 (new)"),
            finished(5, "remember", false, "remembered project fact p-4 (again)"),
        ];
        assert_eq!(remembered_since(&events, 2), vec!["g-2", "p-4"]);
        assert_eq!(remembered_since(&events, 1)[0], "p-early");
        assert!(remembered_since(&events, 6).is_empty());
    }
}
