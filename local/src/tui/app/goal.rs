//! `/goal` in the workbench (issue 38 §3): `/goal <objective>` starts a goal,
//! `/goal status|pause|resume|clear`; the view is [`crate::goal::GoalView`].

use super::*;
use crate::goal::GoalCommand;
use reasonix_forward::proto::GoalAction;

impl App {
    /// `/goal <objective>` starts a goal; `/goal status|pause|resume|clear`.
    pub(super) fn goal_command(&mut self, arg: &str) -> Vec<Action> {
        let action = match crate::goal::parse(arg) {
            GoalCommand::Status => {
                self.set_hint(self.goal.line());
                return Vec::new();
            }
            GoalCommand::Act(action) => action,
        };
        if self.role == Some(ClientRole::Spectator) {
            self.set_hint("a read-only spectator cannot change the goal; /takeover first");
            return Vec::new();
        }
        if matches!(action, GoalAction::Start { .. }) && self.turn_busy() {
            self.set_hint("a turn is running: wait for it (or cancel it), then /goal OBJECTIVE");
            return Vec::new();
        }
        let request_id = rid("goal");
        if matches!(action, GoalAction::Start { .. }) {
            self.our_requests.insert(request_id.clone());
            self.scroll = Scroll::Follow;
        }
        vec![Action::Goal {
            request_id,
            action,
            model: self.model.clone(),
            session: self.session_id().map(str::to_string),
        }]
    }
}
