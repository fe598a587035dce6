//! The planner beside the executor (issue 38 §2), the pure part: the planner's stable prefix
//! and tools, the text of a planning turn, and the handoff read from the planner's answer.
//! The session glue (`session/planner.rs`) runs the planner as a second runner of the session
//! and journals what is decided here.
//!
//! The planner and the executor are two conversations with their own prefixes: the
//! planner's system prompt is its role in front of the executor's (so the standing
//! instructions are the same), and its tools are plan mode's read-only set. Nothing of a
//! turn goes into either prefix: the depth's instructions ride the planner's user message,
//! the handoff rides the executor's.

use serde_json::Value;

use super::route::{Decision, Depth, Route};
use crate::tools::ToolRegistry;

/// The planner's role, in front of the executor's system prompt.
pub const PLANNER_ROLE: &str = "You are the PLANNER of a coding agent. Another model, the executor, will do the work \
from your plan. You change nothing: research with the read-only tools (bash runs in a read-only sandbox), \
keep it short (you have a small budget of steps), then answer with the plan in Markdown under exactly these \
headings: ## Goal, ## Steps (an ordered, numbered list), ## Touch points (one file path per line, with what \
changes there), ## Verification (the commands that prove it works). Mark a touch point `(verified)` only when \
you read that file in this conversation. For a full plan also add ## Risks, ## Acceptance criteria and \
## Rollback. Do not write code in the plan beyond short snippets.\n\n";

/// Tools that are read-only but belong to the executor: it alone ends plan mode and keeps
/// the todo list.
const NOT_FOR_PLANNER: &[&str] = &[super::EXIT_TOOL, "todo_write", "kill_shell"];

/// The planner's tools from the session's: plan mode's read-only set (read-only tools, and
/// bash, which runs in a read-only sandbox behind plan mode's gate). Sorted like every
/// registry's, so the schemas are byte-stable.
pub fn planner_tools(all: &ToolRegistry) -> ToolRegistry {
    let mut out = ToolRegistry::new();
    for name in all.names() {
        let Some(tool) = all.get(name) else { continue };
        if NOT_FOR_PLANNER.contains(&name) {
            continue;
        }
        if tool.read_only() || name == "bash" {
            out.register(tool);
        }
    }
    out
}

/// The planner's system prompt: its role, then the executor's prompt (base prompt, workspace,
/// standing instructions).
pub fn planner_system(executor_system: &str) -> String {
    format!("{PLANNER_ROLE}{executor_system}")
}

/// The user message of a planning turn: what to plan and how deep.
pub fn planner_turn_text(task: &str, decision: &Decision) -> String {
    let depth = match decision.depth {
        Depth::Full => "full plan: 3–10 steps, with ## Risks, ## Acceptance criteria, ## Verification commands and ## Rollback",
        Depth::Light | Depth::None => "light plan: 1–4 steps, only the research you need",
    };
    format!(
        "[planner: {depth}; at most {} research steps] Plan this task for the executor:\n\n{task}",
        decision.depth.budget()
    )
}

/// What the planner handed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// The goal, one paragraph.
    pub goal: String,
    /// The ordered steps.
    pub steps: Vec<String>,
    /// Touch points the planner read.
    pub verified: Vec<String>,
    /// Touch points it names without having read them.
    pub candidate: Vec<String>,
    /// How to verify.
    pub verification: Vec<String>,
    /// The sections of a full plan (risks, acceptance criteria, rollback), as written.
    pub extra: Vec<(String, String)>,
    /// What the user steered while the planner worked (given to the planner at its next
    /// step, in arrival order): handed over with the plan, so the executor reads the
    /// user's own words too.
    pub steers: Vec<String>,
}

impl Handoff {
    /// Read the planner's answer; `None` when it is no plan (no goal or no steps): the
    /// planner did not converge. `read`: the paths its tool calls opened.
    pub fn read(answer: &str, read: &[String]) -> Option<Handoff> {
        let sections = sections(answer);
        let get = |keys: &[&str]| {
            sections
                .iter()
                .find(|(h, _)| keys.iter().any(|k| h.contains(k)))
                .map(|(_, b)| b.trim().to_string())
                .unwrap_or_default()
        };
        let goal = get(&["goal", "目标"]);
        let steps = super::steps::read(answer);
        if goal.is_empty() || steps.is_empty() {
            return None;
        }
        let (mut verified, mut candidate) = (Vec::new(), Vec::new());
        for line in get(&["touch", "file", "文件"]).lines() {
            let item = line
                .trim()
                .trim_start_matches(['-', '*', '+'])
                .trim()
                .to_string();
            if item.is_empty() {
                continue;
            }
            let path = item
                .split(|c: char| c.is_whitespace() || c == ':' || c == '—')
                .next()
                .unwrap_or("")
                .trim_matches('`')
                .to_string();
            // A path counts as verified only when the planner's own calls opened it,
            // whatever the answer claims.
            if read.iter().any(|r| same_path(r, &path)) {
                verified.push(path);
            } else {
                candidate.push(path);
            }
        }
        let verification = get(&["verif", "验证"])
            .lines()
            .map(|l| l.trim().trim_start_matches(['-', '*']).trim().to_string())
            .filter(|l| !l.is_empty() && !l.starts_with("```"))
            .collect();
        let extra = sections
            .iter()
            .filter(|(h, _)| {
                ["risk", "accept", "rollback", "风险", "验收", "回滚"]
                    .iter()
                    .any(|k| h.contains(k))
            })
            .map(|(h, b)| (h.clone(), b.trim().to_string()))
            .collect();
        Some(Handoff {
            goal,
            steps,
            verified,
            candidate,
            verification,
            extra,
            steers: Vec::new(),
        })
    }

    /// The one structured message appended to the executor's conversation.
    pub fn message(&self, model: &str, decision: &Decision) -> String {
        let mut out = format!(
            "[planner handoff] The planner ({model}, {} plan) researched this task; do not repeat its research. \
             Execute the steps in order, keep the todo list current, and run the verification at the end.\n\n## Goal\n{}\n\n## Steps\n",
            decision.depth.as_str(),
            self.goal
        );
        for (i, s) in self.steps.iter().enumerate() {
            out.push_str(&format!("{}. {s}\n", i + 1));
        }
        out.push_str("\n## Touch points (verified: the planner read them)\n");
        list(&mut out, &self.verified);
        out.push_str("\n## Touch points (candidates: check before relying on them)\n");
        list(&mut out, &self.candidate);
        out.push_str("\n## Verification\n");
        list(&mut out, &self.verification);
        for (h, b) in &self.extra {
            out.push_str(&format!("\n## {h}\n{b}\n"));
        }
        if !self.steers.is_empty() {
            out.push_str(STEERS_HEADING);
            for s in &self.steers {
                out.push_str(&format!("\n{}\n", s.trim_end()));
            }
        }
        out
    }

    /// The plan as the approval card shows it (plan-only and approval routes).
    pub fn plan_markdown(&self, model: &str, decision: &Decision) -> String {
        self.message(model, decision)
            .split_once("\n\n")
            .map(|(_, rest)| rest.to_string())
            .unwrap_or_default()
    }
}

/// The handoff's section with the user's steers (the planner saw them; the plan takes
/// them into account).
pub const STEERS_HEADING: &str =
    "\n## The user's messages while the planner worked (the plan already takes them into account)\n";

fn list(out: &mut String, items: &[String]) {
    if items.is_empty() {
        out.push_str("- (none)\n");
    }
    for i in items {
        out.push_str(&format!("- {i}\n"));
    }
}

fn same_path(a: &str, b: &str) -> bool {
    let norm = |p: &str| p.trim().trim_start_matches("./").to_string();
    !b.is_empty() && (norm(a) == norm(b) || norm(a).ends_with(&format!("/{}", norm(b))))
}

/// The `#` sections of `text`: (heading lowercased, body).
fn sections(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(h) = line.trim_start().strip_prefix('#') {
            out.push((
                h.trim_start_matches('#').trim().to_lowercase(),
                String::new(),
            ));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

/// The paths a planner tool call opened (`read_file`'s `path`, `ls`/`glob`/`grep`'s `path`).
pub fn opened_path(tool: &str, args: &Value) -> Option<String> {
    match tool {
        "read_file" | "notebook_read" => {
            args.get("path").and_then(Value::as_str).map(str::to_string)
        }
        _ => None,
    }
}

/// What happens to a turn whose planner did not converge: the executor takes the original
/// task (ordinary routes), or nothing executes (plan only, approval).
pub fn hand_over_on_failure(route: Route) -> bool {
    !route.fail_closed()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap
    use super::*;

    const ANSWER: &str = "## Goal\nAdd a --quiet flag.\n\n## Steps\n1. Parse the flag in cli.rs\n2. Silence notices\n\n\
## Touch points\n- src/cli.rs (verified): the flag\n- src/run.rs: the notices\n\n## Verification\n- cargo test -p x\n";

    fn light() -> Decision {
        Decision {
            route: Route::Plan,
            depth: Depth::Light,
            reason: "bounded_work",
        }
    }

    #[test]
    fn the_handoff_tells_verified_from_candidate_touch_points() {
        let h = Handoff::read(ANSWER, &["src/cli.rs".into()]).unwrap();
        assert_eq!(h.goal, "Add a --quiet flag.");
        assert_eq!(h.steps, vec!["Parse the flag in cli.rs", "Silence notices"]);
        assert_eq!(h.verified, vec!["src/cli.rs"]);
        assert_eq!(h.candidate, vec!["src/run.rs"]);
        assert_eq!(h.verification, vec!["cargo test -p x"]);
        let m = h.message("planner-model", &light());
        assert!(m.starts_with("[planner handoff]"), "{m}");
        assert!(m.contains("## Steps\n1. Parse the flag in cli.rs\n2. Silence notices\n"));
        assert!(m.contains("(verified: the planner read them)\n- src/cli.rs\n"));
        assert!(m.contains("(candidates: check before relying on them)\n- src/run.rs\n"));
        // A claim of "(verified)" without having read the file is only a candidate.
        let h = Handoff::read(ANSWER, &[]).unwrap();
        assert!(h.verified.is_empty() && h.candidate.len() == 2);
    }

    #[test]
    fn steers_given_to_the_planner_are_handed_over_in_the_users_words() {
        let mut h = Handoff::read(ANSWER, &[]).unwrap();
        let plain = h.message("p", &light());
        assert!(!plain.contains(STEERS_HEADING.trim()));
        h.steers = vec!["use tabs\n".into(), "and keep it short".into()];
        let m = h.message("p", &light());
        assert!(m.starts_with(&plain), "the steers come last: {m}");
        assert!(
            m.ends_with(&format!(
                "{STEERS_HEADING}\nuse tabs\n\nand keep it short\n"
            )),
            "{m}"
        );
        assert!(h.plan_markdown("p", &light()).contains("and keep it short"));
    }

    #[test]
    fn an_answer_without_goal_or_steps_did_not_converge() {
        assert!(Handoff::read("I looked around but found nothing.", &[]).is_none());
        assert!(Handoff::read("## Goal\nx\n", &[]).is_none());
    }

    #[test]
    fn the_planner_gets_plan_modes_read_only_tools() {
        let t = planner_tools(&ToolRegistry::builtin());
        let names = t.names();
        for n in ["read_file", "grep", "glob", "ls", "bash"] {
            assert!(names.contains(&n), "{names:?}");
        }
        for n in [
            "write_file",
            "edit_file",
            "multi_edit",
            "exit_plan_mode",
            "todo_write",
        ] {
            assert!(!names.contains(&n), "{names:?}");
        }
        assert_eq!(
            t.schemas(),
            planner_tools(&ToolRegistry::builtin()).schemas()
        );
    }

    #[test]
    fn depth_rides_the_user_message_not_the_prefix() {
        let t = planner_turn_text("do x", &light());
        assert!(t.starts_with("[planner: light plan") && t.ends_with("\n\ndo x"));
        assert!(planner_system("SYS").ends_with("SYS"));
    }
}
