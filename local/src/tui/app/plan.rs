//! Plan mode in the workbench (issue 38 §1): `/plan [task]`, Shift+Tab cycling
//! ask → auto → plan, the approval card of a proposed plan (execute / revise / cancel), and
//! the step in progress for the status bar. The state is read from the session's events, so
//! a reattach, a takeover or another client's answer shows the same thing.

use reasonix_forward::proto::{PlanAction, PlanDecision, PlanEvent};

use super::*;

/// A proposed plan waiting for the user's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingPlan {
    pub(crate) plan_id: String,
    pub(crate) plan: String,
    pub(crate) steps: Vec<String>,
}

/// Plan mode as the session's events say.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlanView {
    /// Plan mode is on in the session.
    pub(crate) on: bool,
    /// The plan waiting for an answer.
    pub(crate) pending: Option<PendingPlan>,
    /// The user chose "revise" and is typing the comment: the card stays closed meanwhile.
    pub(crate) revising: bool,
    /// The todo list of the work in progress (content, status), from the approved plan and
    /// then each `todo_write`.
    pub(crate) todos: Vec<(String, String)>,
    /// Card selection (0 execute, 1 revise, 2 cancel).
    pub(crate) sel: usize,
}

/// The card's answers, in order.
pub(crate) const ANSWERS: [(&str, &str); 3] = [
    (
        "1 e",
        "execute it (plan mode off; runs in the mode chosen before planning)",
    ),
    ("2 r", "revise it: type what to change, then Enter"),
    ("3 c", "cancel (plan mode off, nothing runs)"),
];

impl PlanView {
    /// Apply one session event.
    pub(crate) fn observe(&mut self, kind: &EventKind) {
        match kind {
            EventKind::Plan(PlanEvent::Mode { on }) => {
                self.on = *on;
                if !on {
                    self.pending = None;
                    self.revising = false;
                }
            }
            EventKind::Plan(PlanEvent::Proposed {
                plan_id,
                plan,
                steps,
            }) => {
                self.pending = Some(PendingPlan {
                    plan_id: plan_id.clone(),
                    plan: plan.clone(),
                    steps: steps.clone(),
                });
                self.revising = false;
                self.sel = 0;
            }
            EventKind::Plan(PlanEvent::Decided { decision, .. }) => {
                let steps = self.pending.take().map(|p| p.steps).unwrap_or_default();
                self.revising = false;
                match decision {
                    PlanDecision::Execute => {
                        self.on = false;
                        self.todos = steps
                            .into_iter()
                            .enumerate()
                            .map(|(i, s)| {
                                let st = if i == 0 { "in_progress" } else { "pending" };
                                (s, st.to_string())
                            })
                            .collect();
                    }
                    PlanDecision::Cancel => self.on = false,
                    PlanDecision::Revise => {}
                }
            }
            EventKind::ToolStarted {
                name, arguments, ..
            } if name == "todo_write" => {
                let v: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
                if let Some(items) = v.get("todos").and_then(|t| t.as_array()) {
                    self.todos = items
                        .iter()
                        .filter_map(|t| {
                            Some((
                                t.get("content")?.as_str()?.to_string(),
                                t.get("status")?.as_str()?.to_string(),
                            ))
                        })
                        .collect();
                }
            }
            _ => {}
        }
    }

    /// `step i/n: text` of the step in progress (the status bar), if any.
    pub(crate) fn step_in_progress(&self) -> Option<String> {
        let n = self.todos.len();
        let (i, (text, _)) = self
            .todos
            .iter()
            .enumerate()
            .find(|(_, (_, s))| s == "in_progress")?;
        Some(format!("step {}/{n}: {text}", i + 1))
    }
}

impl App {
    /// The plan card to show: a plan waits, this client drives, and no revise is being typed.
    pub(crate) fn plan_card(&self) -> Option<&PendingPlan> {
        if self.role == Some(ClientRole::Spectator) || self.plan.revising {
            return None;
        }
        self.plan.pending.as_ref()
    }

    /// `/plan [task]`: plan mode on (and the task sent as the message to plan).
    pub(super) fn plan_command(&mut self, arg: &str) -> Vec<Action> {
        if self.role == Some(ClientRole::Spectator) {
            self.set_hint("a read-only spectator cannot start planning; /takeover first");
            return Vec::new();
        }
        let task = (!arg.trim().is_empty()).then(|| arg.trim().to_string());
        if task.is_some() && self.turn_busy() {
            self.set_hint("a turn is running: wait for it (or cancel it), then /plan TASK");
            return Vec::new();
        }
        if task.is_none() && self.plan.on {
            self.set_hint("plan mode is already on: type the task to plan");
            return Vec::new();
        }
        let request_id = rid("plan");
        if task.is_some() {
            self.our_requests.insert(request_id.clone());
            self.scroll = Scroll::Follow;
        }
        vec![Action::Plan {
            request_id,
            action: PlanAction::Enter { task },
        }]
    }

    /// Shift+Tab: ask → auto → plan → ask. Plan mode keeps the mode below it (execution
    /// after approval runs in it); leaving plan mode this way goes back to `ask`.
    pub(super) fn cycle_mode(&mut self) -> Vec<Action> {
        if self.role == Some(ClientRole::Spectator) {
            self.set_hint("a read-only spectator cannot change the mode; /takeover first");
            return Vec::new();
        }
        if self.plan.on {
            let mut out = vec![Action::Plan {
                request_id: rid("plan"),
                action: PlanAction::Leave,
            }];
            out.extend(self.set_mode("ask"));
            self.set_hint("mode: ask (plan mode off)");
            return out;
        }
        if self.settings.mode == "ask" {
            self.set_hint("mode: auto (writers run without asking; Shift+Tab for plan)");
            return self.set_mode("auto");
        }
        self.set_hint(format!(
            "mode: plan (nothing changes until you approve a plan; it then runs in {})",
            self.settings.mode
        ));
        vec![Action::Plan {
            request_id: rid("plan"),
            action: PlanAction::Enter { task: None },
        }]
    }

    fn set_mode(&mut self, mode: &str) -> Vec<Action> {
        if self.settings.mode == mode {
            return Vec::new();
        }
        self.settings.mode = mode.to_string();
        let mut out = vec![Action::SetMode(mode.to_string())];
        out.extend(self.reopen_with_settings());
        out
    }

    /// A key while the plan card is open.
    pub(super) fn plan_card_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let choice = match key.code {
            KeyCode::Char('1') | KeyCode::Char('e') | KeyCode::Char('y') => Some(0),
            KeyCode::Char('2') | KeyCode::Char('r') => Some(1),
            KeyCode::Char('3') | KeyCode::Char('c') | KeyCode::Esc => Some(2),
            KeyCode::Up => {
                self.plan.sel = self.plan.sel.saturating_sub(1);
                None
            }
            KeyCode::Down | KeyCode::Tab => {
                self.plan.sel = (self.plan.sel + 1).min(ANSWERS.len() - 1);
                None
            }
            KeyCode::Enter => Some(self.plan.sel),
            _ => None,
        };
        let Some(choice) = choice else {
            return Vec::new();
        };
        let Some(p) = self.plan.pending.clone() else {
            return Vec::new();
        };
        match choice {
            1 => {
                // The next message is the comment: a message while a plan waits revises it.
                self.plan.revising = true;
                self.set_hint(
                    "revise: type what to change and press Enter (the plan stays unapproved)",
                );
                Vec::new()
            }
            c => {
                let decision = if c == 0 {
                    PlanDecision::Execute
                } else {
                    PlanDecision::Cancel
                };
                let request_id = rid("plan");
                if decision == PlanDecision::Execute {
                    self.our_requests.insert(request_id.clone());
                    self.scroll = Scroll::Follow;
                }
                // Answered: closed at once (the host's event confirms it).
                self.plan.revising = true;
                vec![Action::Plan {
                    request_id,
                    action: PlanAction::Decide {
                        plan_id: Some(p.plan_id),
                        decision,
                        comment: None,
                    },
                }]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_follows_plan_events_and_todos() {
        let mut v = PlanView::default();
        v.observe(&EventKind::Plan(PlanEvent::Mode { on: true }));
        assert!(v.on);
        v.observe(&EventKind::Plan(PlanEvent::Proposed {
            plan_id: "p".into(),
            plan: "## Steps\n1. a\n2. b".into(),
            steps: vec!["a".into(), "b".into()],
        }));
        assert!(v.pending.is_some());
        v.observe(&EventKind::Plan(PlanEvent::Decided {
            plan_id: "p".into(),
            decision: PlanDecision::Execute,
            comment: None,
        }));
        assert!(!v.on && v.pending.is_none());
        assert_eq!(v.step_in_progress().as_deref(), Some("step 1/2: a"));
        v.observe(&EventKind::ToolStarted {
            call_id: "t".into(),
            name: "todo_write".into(),
            arguments: r#"{"todos":[{"content":"a","status":"completed"},{"content":"b","status":"in_progress"}]}"#.into(),
        });
        assert_eq!(v.step_in_progress().as_deref(), Some("step 2/2: b"));
    }
}
