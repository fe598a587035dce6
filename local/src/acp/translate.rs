//! Journal events of the daemon protocol as ACP session updates: text and reasoning chunks,
//! tool calls with their kind, locations and diffs, command output, and the plan of
//! `todo_write`. Pure and stateful per session (it remembers each call's arguments), so it
//! is unit-tested without a link.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema as acp;
use reasonix_forward::proto::{EventKind, ToolCall as HostCall};
use serde_json::Value;

/// One tool call the translator has seen, by call id.
#[derive(Debug, Clone)]
struct CallInfo {
    name: String,
    arguments: String,
    started: bool,
}

/// Turns the events of one session into ACP updates.
#[derive(Debug)]
pub struct Translator {
    /// Absolute workspace root on the host: ACP paths must be absolute.
    workspace: PathBuf,
    calls: HashMap<String, CallInfo>,
    /// Subagents, each a tool call of its own (#33 §2).
    children: super::children::Children,
}

impl Translator {
    /// A translator for a session whose workspace root (on the host) is `workspace`.
    pub fn new(workspace: PathBuf) -> Self {
        Self {
            workspace,
            calls: HashMap::new(),
            children: Default::default(),
        }
    }

    /// Set the workspace root once the session says where it is (`SessionStarted`).
    pub fn set_workspace(&mut self, workspace: PathBuf) {
        self.workspace = workspace;
    }

    /// The updates for one event. `own_prompt` is true for the `UserTurn` the editor itself
    /// sent (the editor already shows it, so it is not echoed back).
    pub fn event(&mut self, kind: &EventKind, own_prompt: bool) -> Vec<acp::SessionUpdate> {
        match kind {
            EventKind::SessionStarted { workspace, .. } => {
                if Path::new(workspace).is_absolute() {
                    self.workspace = PathBuf::from(workspace);
                }
                Vec::new()
            }
            EventKind::UserTurn { text, .. } => {
                if own_prompt {
                    Vec::new()
                } else {
                    vec![acp::SessionUpdate::UserMessageChunk(chunk(text))]
                }
            }
            EventKind::TextDelta { text } => {
                vec![acp::SessionUpdate::AgentMessageChunk(chunk(text))]
            }
            EventKind::ReasoningDelta { text } => {
                vec![acp::SessionUpdate::AgentThoughtChunk(chunk(text))]
            }
            EventKind::AssistantMessage { tool_calls, .. } => {
                let mut out = Vec::new();
                for c in tool_calls {
                    if self.calls.contains_key(&c.id) {
                        continue;
                    }
                    self.calls.insert(
                        c.id.clone(),
                        CallInfo {
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                            started: false,
                        },
                    );
                    out.push(acp::SessionUpdate::ToolCall(self.tool_call(c)));
                }
                out
            }
            EventKind::ToolStarted {
                call_id,
                name,
                arguments,
            } => {
                let mut out = Vec::new();
                match self.calls.get_mut(call_id) {
                    Some(info) => info.started = true,
                    None => {
                        // A call whose assistant message this client never saw (it cannot
                        // happen with a full catch-up, but an update must never name an
                        // unknown call).
                        let c = HostCall {
                            id: call_id.clone(),
                            name: name.clone(),
                            arguments: arguments.clone(),
                        };
                        self.calls.insert(
                            call_id.clone(),
                            CallInfo {
                                name: name.clone(),
                                arguments: arguments.clone(),
                                started: true,
                            },
                        );
                        out.push(acp::SessionUpdate::ToolCall(self.tool_call(&c)));
                    }
                }
                out.push(acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(
                        call_id.clone(),
                        acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::InProgress),
                    ),
                ));
                out
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
                let mut out = Vec::new();
                let status = if *is_error {
                    acp::ToolCallStatus::Failed
                } else {
                    acp::ToolCallStatus::Completed
                };
                let mut fields = acp::ToolCallUpdateFields::new()
                    .status(status)
                    .raw_output(Value::String(output.clone()));
                let edits = matches!(name.as_str(), "edit_file" | "multi_edit" | "write_file");
                // An edit keeps its diff as content; everything else (and a failed edit) shows
                // the output the model saw.
                if *is_error || !edits {
                    let mut text = if name == "bash" || name == "bash_output" {
                        fence(output)
                    } else {
                        output.clone()
                    };
                    if let Some(r) = output_ref {
                        text.push_str(&format!(
                            "\n\n[{} bytes in full, kept on the host; this is the bounded view the model saw]",
                            r.bytes
                        ));
                    }
                    let mut content = Vec::new();
                    if *is_error && edits {
                        if let Some(info) = self.calls.get(call_id) {
                            content.extend(edit_content(
                                &self.workspace,
                                &info.name,
                                &parse(&info.arguments),
                            ));
                        }
                    }
                    content.push(acp::ToolCallContent::from(text));
                    fields = fields.content(content);
                }
                out.push(acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(call_id.clone(), fields),
                ));
                if name == "todo_write" && !*is_error {
                    if let Some(plan) = self
                        .calls
                        .get(call_id)
                        .and_then(|info| plan_of(&parse(&info.arguments)))
                    {
                        out.push(acp::SessionUpdate::Plan(plan));
                    }
                }
                out
            }
            // A proposed plan is the ACP plan (its steps, pending) until the user answers.
            EventKind::Plan(reasonix_forward::proto::PlanEvent::Proposed { steps, .. }) => {
                let todos: Vec<Value> = steps
                    .iter()
                    .map(|s| serde_json::json!({"content": s, "status": "pending"}))
                    .collect();
                plan_of(&serde_json::json!({ "todos": todos }))
                    .map(|p| vec![acp::SessionUpdate::Plan(p)])
                    .unwrap_or_default()
            }
            // The planner's route (#38 §2): route, depth and reason, never the user's text;
            // a thought, not part of the answer.
            EventKind::Plan(reasonix_forward::proto::PlanEvent::Routed {
                route,
                depth,
                reason,
            }) => vec![acp::SessionUpdate::AgentThoughtChunk(chunk(&format!(
                "[reasonix] {}\n",
                crate::plan_lines::route_line(route, depth, reason)
            )))],
            EventKind::Plan(reasonix_forward::proto::PlanEvent::PlannerFailed {
                reason,
                handed_over,
            }) => vec![acp::SessionUpdate::AgentThoughtChunk(chunk(&format!(
                "[reasonix] {}\n",
                crate::plan_lines::planner_failed_line(reason, *handed_over)
            )))],
            EventKind::Plan(_) => Vec::new(),
            EventKind::Goal(g) => vec![acp::SessionUpdate::AgentMessageChunk(chunk(&format!(
                "\n[reasonix] {}\n",
                crate::goal::event_line(g)
            )))],
            EventKind::ApprovalRequested { .. }
            | EventKind::ApprovalAnswered { .. }
            | EventKind::ElicitationRequested { .. }
            | EventKind::ElicitationAnswered { .. }
            | EventKind::Usage { .. }
            | EventKind::TurnFinished { .. }
            | EventKind::Notice { .. }
            | EventKind::ProviderRetry(_)
            | EventKind::Compacted { .. }
            | EventKind::Checkpoint { .. }
            | EventKind::SteerInjected { .. }
            | EventKind::ShellRan { .. }
            | EventKind::Planner { .. } => Vec::new(),
            EventKind::Subagent {
                call_id,
                child,
                event,
            } => self.children.event(call_id, child, event),
            // A steer sent by another client (the TUI) shows as the user's words.
            EventKind::Steer { text, .. } => {
                vec![acp::SessionUpdate::UserMessageChunk(chunk(text))]
            }
        }
    }

    /// The call an approval is about when the event names none (journals older than
    /// `ApprovalRequested::call_id`): the not yet started call with this tool and these
    /// arguments.
    pub fn call_for_approval(&self, tool: &str, arguments: &str) -> Option<String> {
        let mut ids: Vec<&String> = self
            .calls
            .iter()
            .filter(|(_, c)| !c.started && c.name == tool && c.arguments == arguments)
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        ids.first().map(|s| s.to_string())
    }

    /// The tool call as it is shown in a permission request.
    pub fn permission_call(
        &self,
        call_id: &str,
        tool: &str,
        arguments: &str,
    ) -> acp::ToolCallUpdate {
        let c = HostCall {
            id: call_id.to_string(),
            name: tool.to_string(),
            arguments: arguments.to_string(),
        };
        let full = self.tool_call(&c);
        acp::ToolCallUpdate::new(
            call_id.to_string(),
            acp::ToolCallUpdateFields::new()
                .title(full.title)
                .kind(full.kind)
                .content(full.content)
                .locations(full.locations)
                .raw_input(full.raw_input),
        )
    }

    fn tool_call(&self, c: &HostCall) -> acp::ToolCall {
        let args = parse(&c.arguments);
        let path = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_string);
        let (kind, title) = match c.name.as_str() {
            "read_file" => (acp::ToolKind::Read, label("Read", path("path"))),
            "ls" => (acp::ToolKind::Read, label("List", path("path"))),
            "glob" => (acp::ToolKind::Search, label("Find", path("pattern"))),
            "grep" => (acp::ToolKind::Search, label("Search", path("pattern"))),
            "edit_file" | "multi_edit" => (acp::ToolKind::Edit, label("Edit", path("path"))),
            "write_file" => (acp::ToolKind::Edit, label("Write", path("path"))),
            "notebook_edit" => (acp::ToolKind::Edit, label("Edit notebook", path("path"))),
            "web_fetch" => (acp::ToolKind::Fetch, label("Fetch", path("url"))),
            "move_file" => (
                acp::ToolKind::Move,
                format!(
                    "Move {} → {}",
                    path("source_path").unwrap_or_default(),
                    path("destination_path").unwrap_or_default()
                ),
            ),
            "bash" => (
                acp::ToolKind::Execute,
                path("command")
                    .map(|c| format!("`{}`", first_line(&c)))
                    .unwrap_or_else(|| "bash".into()),
            ),
            "bash_output" | "kill_shell" | "wait" => (acp::ToolKind::Execute, c.name.clone()),
            "todo_write" => (acp::ToolKind::Think, "Update the plan".into()),
            _ => (acp::ToolKind::Other, c.name.clone()),
        };
        let mut locations = Vec::new();
        for key in ["path", "source_path", "destination_path"] {
            if let Some(p) = path(key) {
                if c.name != "glob" && c.name != "grep" || key != "path" || !p.is_empty() {
                    locations.push(acp::ToolCallLocation::new(self.abs(&p)));
                }
            }
        }
        acp::ToolCall::new(c.id.clone(), title)
            .kind(kind)
            .status(acp::ToolCallStatus::Pending)
            .content(edit_content(&self.workspace, &c.name, &args))
            .locations(locations)
            .raw_input(args)
    }

    fn abs(&self, p: &str) -> PathBuf {
        abs(&self.workspace, p)
    }
}

fn abs(workspace: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        workspace.join(p)
    }
}

/// The diffs of an edit, from its own arguments: `edit_file` and `multi_edit` show the text
/// they replace and its replacement, `write_file` the new content (the old one is on the
/// host, which this side cannot read).
fn edit_content(workspace: &Path, tool: &str, args: &Value) -> Vec<acp::ToolCallContent> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let Some(path) = s(args, "path").map(|p| abs(workspace, &p)) else {
        return Vec::new();
    };
    match tool {
        "edit_file" => match (s(args, "old_string"), s(args, "new_string")) {
            (Some(old), Some(new)) => vec![acp::ToolCallContent::Diff(
                acp::Diff::new(path, new).old_text(old),
            )],
            _ => Vec::new(),
        },
        "multi_edit" => args
            .get("edits")
            .and_then(Value::as_array)
            .map(|edits| {
                edits
                    .iter()
                    .filter_map(|e| Some((s(e, "old_string")?, s(e, "new_string")?)))
                    .map(|(old, new)| {
                        acp::ToolCallContent::Diff(acp::Diff::new(path.clone(), new).old_text(old))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        "write_file" => s(args, "content")
            .map(|new| vec![acp::ToolCallContent::Diff(acp::Diff::new(path, new))])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The plan of a `todo_write` call.
fn plan_of(args: &Value) -> Option<acp::Plan> {
    let todos = args.get("todos")?.as_array()?;
    let entries = todos
        .iter()
        .filter_map(|t| {
            let content = t.get("content")?.as_str()?.to_string();
            let status = match t.get("status").and_then(Value::as_str) {
                Some("completed") => acp::PlanEntryStatus::Completed,
                Some("in_progress") => acp::PlanEntryStatus::InProgress,
                _ => acp::PlanEntryStatus::Pending,
            };
            Some(acp::PlanEntry::new(
                content,
                acp::PlanEntryPriority::Medium,
                status,
            ))
        })
        .collect();
    Some(acp::Plan::new(entries))
}

fn parse(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()))
}

fn label(verb: &str, what: Option<String>) -> String {
    match what {
        Some(w) if !w.is_empty() => format!("{verb} {w}"),
        _ => verb.to_string(),
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    let short: String = line.chars().take(120).collect();
    if short.len() < s.trim_end().len() {
        format!("{short}…")
    } else {
        short
    }
}

/// Command output as a fenced block that its own backticks cannot close.
fn fence(output: &str) -> String {
    let mut ticks = 3;
    while output.contains(&"`".repeat(ticks)) {
        ticks += 1;
    }
    let f = "`".repeat(ticks);
    format!("{f}\n{}\n{f}", output.trim_end_matches('\n'))
}

/// A text content chunk.
pub fn chunk(text: &str) -> acp::ContentChunk {
    acp::ContentChunk::new(acp::ContentBlock::from(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, name: &str, args: Value) -> HostCall {
        HostCall {
            id: id.into(),
            name: name.into(),
            arguments: args.to_string(),
        }
    }

    fn wire(u: &acp::SessionUpdate) -> Value {
        serde_json::to_value(u).expect("serialize")
    }

    #[test]
    fn edit_is_a_pending_call_with_a_diff_then_progress_then_completion() {
        let mut t = Translator::new("/ws".into());
        let args = json!({"path": "src/a.rs", "old_string": "one", "new_string": "two"});
        let ups = t.event(
            &EventKind::AssistantMessage {
                content: String::new(),
                reasoning: None,
                tool_calls: vec![call("c1", "edit_file", args.clone())],
                provider_replay: None,
            },
            false,
        );
        assert_eq!(ups.len(), 1);
        let v = wire(&ups[0]);
        assert_eq!(v["sessionUpdate"], "tool_call");
        assert_eq!(v["toolCallId"], "c1");
        assert_eq!(v["kind"], "edit");
        assert!(
            v.get("status").is_none(),
            "pending is the default, left out: {v}"
        );
        assert_eq!(v["locations"][0]["path"], "/ws/src/a.rs");
        assert_eq!(v["content"][0]["type"], "diff");
        assert_eq!(v["content"][0]["oldText"], "one");
        assert_eq!(v["content"][0]["newText"], "two");
        assert_eq!(
            t.call_for_approval("edit_file", &args.to_string())
                .as_deref(),
            Some("c1")
        );
        let ups = t.event(
            &EventKind::ToolStarted {
                call_id: "c1".into(),
                name: "edit_file".into(),
                arguments: args.to_string(),
            },
            false,
        );
        assert_eq!(wire(&ups[0])["status"], "in_progress");
        assert_eq!(t.call_for_approval("edit_file", &args.to_string()), None);
        let ups = t.event(
            &EventKind::ToolFinished {
                call_id: "c1".into(),
                name: "edit_file".into(),
                is_error: false,
                output: "edited src/a.rs at line 1".into(),
                output_ref: None,
                denied: None,
                context_bytes: None,
            },
            false,
        );
        let v = wire(&ups[0]);
        assert_eq!(v["status"], "completed");
        assert!(v.get("content").is_none(), "the diff stays: {v}");
    }

    #[test]
    fn bash_output_is_fenced_and_failures_are_failed() {
        let mut t = Translator::new("/ws".into());
        t.event(
            &EventKind::AssistantMessage {
                content: String::new(),
                reasoning: None,
                tool_calls: vec![call("b", "bash", json!({"command": "echo ```hi"}))],
                provider_replay: None,
            },
            false,
        );
        let ups = t.event(
            &EventKind::ToolFinished {
                call_id: "b".into(),
                name: "bash".into(),
                is_error: true,
                output: "```hi\nexit 1\n".into(),
                output_ref: None,
                denied: None,
                context_bytes: None,
            },
            false,
        );
        let v = wire(&ups[0]);
        assert_eq!(v["status"], "failed");
        assert_eq!(
            v["content"][0]["content"]["text"],
            "````\n```hi\nexit 1\n````"
        );
    }

    #[test]
    fn todo_write_becomes_a_plan() {
        let mut t = Translator::new("/ws".into());
        let args = json!({"todos": [
            {"content": "read", "status": "completed"},
            {"content": "edit", "status": "in_progress", "active_form": "editing"},
            {"content": "test", "status": "pending"}]});
        t.event(
            &EventKind::AssistantMessage {
                content: String::new(),
                reasoning: None,
                tool_calls: vec![call("t", "todo_write", args)],
                provider_replay: None,
            },
            false,
        );
        let ups = t.event(
            &EventKind::ToolFinished {
                call_id: "t".into(),
                name: "todo_write".into(),
                is_error: false,
                output: "(1/3 done)".into(),
                output_ref: None,
                denied: None,
                context_bytes: None,
            },
            false,
        );
        let v = wire(&ups[1]);
        assert_eq!(v["sessionUpdate"], "plan");
        let statuses: Vec<&str> = v["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| e["status"].as_str().expect("status"))
            .collect();
        assert_eq!(statuses, ["completed", "in_progress", "pending"]);
    }

    #[test]
    fn own_prompt_is_not_echoed_but_replayed_turns_are() {
        let mut t = Translator::new("/ws".into());
        let turn = EventKind::UserTurn {
            request_id: "r".into(),
            text: "hi".into(),
            attachments: Vec::new(),
        };
        assert!(t.event(&turn, true).is_empty());
        assert_eq!(
            wire(&t.event(&turn, false)[0])["sessionUpdate"],
            "user_message_chunk"
        );
        let v = wire(&t.event(&EventKind::ReasoningDelta { text: "hm".into() }, false)[0]);
        assert_eq!(v["sessionUpdate"], "agent_thought_chunk");
        assert_eq!(v["content"]["text"], "hm");
    }
}
