//! `reasonix subagent run|try PROFILE "task"` (#33 §3): one subagent as a turn of the
//! session. The turn's user message names the profile and the task; the turn runs the
//! `task` tool (`read_only_task` for `try`) itself, without a model step of the parent
//! ([`crate::runner::Runner::run_direct`]), so the child's events are journaled under that
//! call exactly as when the model delegates, and the child's answer is the turn's answer.

use super::*;
use reasonix_forward::proto::ToolCall;

impl Session {
    /// Check that `profile` names a built-in profile or a skill of this session; `Err` lists
    /// the known ones (nothing was started).
    pub fn check_subagent_profile(&self, profile: &str) -> Result<(), String> {
        let skills = self.skills().skills;
        crate::delegate::profile::lookup_with(Some(profile), &skills, &self.skill_models())
            .map(|_| ())
    }

    /// Submit a turn that runs one child of `profile` on `task` (read-only when
    /// `read_only`). A repeated `request_id` is a no-op answered with `Ok(false)`.
    pub fn submit_subagent(
        self: &Arc<Self>,
        request_id: &str,
        profile: &str,
        task: &str,
        read_only: bool,
    ) -> Result<bool, SessionError> {
        let (verb, tool) = if read_only {
            ("try", "read_only_task")
        } else {
            ("run", "task")
        };
        let call = ToolCall {
            id: format!("sub-{request_id}"),
            name: tool.into(),
            arguments: serde_json::json!({
                "prompt": task,
                "description": description_of(task),
                "profile": profile,
            })
            .to_string(),
        };
        let text = format!("[reasonix subagent {verb} {profile}] {task}");
        self.submit_inner(
            request_id,
            &text,
            Vec::new(),
            Vec::new(),
            Vec::new(),
            None,
            Some(call),
        )
    }
}

impl Session {
    /// Cancel running child `child` (the workbench's child view). Deduplicated by
    /// `request_id` (`Ok(false)` for a repeat); `Err` says why nothing was cancelled.
    pub fn cancel_subagent(&self, request_id: &str, child: &str) -> Result<bool, String> {
        if !self.lock().seen_requests.insert(request_id.to_string()) {
            return Ok(false);
        }
        let board = self
            .tool_ctx()
            .delegate
            .as_ref()
            .map(|s| Arc::clone(s.board()))
            .ok_or_else(|| "this session runs no subagents".to_string())?;
        board.cancel(child)?;
        self.record(EventKind::Notice {
            text: format!("subagent {child} cancelled by the user"),
        });
        Ok(true)
    }
}

/// A few words naming the task: its first line, at most 60 characters.
fn description_of(task: &str) -> String {
    let line = task
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("task");
    let mut d: String = line.trim().chars().take(60).collect();
    if line.trim().chars().count() > 60 {
        d.push('…');
    }
    d
}

#[cfg(test)]
mod tests {
    use super::description_of;

    #[test]
    fn the_description_is_the_first_line_bounded() {
        assert_eq!(
            description_of("\n  map the parser \nmore"),
            "map the parser"
        );
        let long = "x".repeat(80);
        assert_eq!(description_of(&long).chars().count(), 61);
    }
}
