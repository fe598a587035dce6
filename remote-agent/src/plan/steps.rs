//! The ordered steps of a Markdown plan: the list items under a heading that names steps
//! (`## Steps`, `### Plan`, `## 步骤`), else every numbered item of the plan. They become
//! the todo list when the plan is approved.

/// At most this many steps are taken (a todo list, not a copy of the plan).
pub const MAX_STEPS: usize = 30;

/// The steps of `plan`, in order, without list markers.
pub fn read(plan: &str) -> Vec<String> {
    let mut under_steps: Vec<String> = Vec::new();
    let mut numbered: Vec<String> = Vec::new();
    let mut in_steps = false;
    let mut in_fence = false;
    for line in plan.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        if let Some(h) = t.strip_prefix('#') {
            let h = h.trim_start_matches('#').trim().to_lowercase();
            in_steps = ["step", "plan", "步骤", "计划"]
                .iter()
                .any(|k| h.contains(k))
                && !h.contains("verif");
            continue;
        }
        // Only items at the left margin: sub-points belong to their step.
        if line.starts_with(' ') || line.starts_with('\t') {
            continue;
        }
        if let Some(item) = numbered_item(t) {
            numbered.push(item.to_string());
            if in_steps {
                under_steps.push(item.to_string());
            }
        } else if let Some(item) = bullet_item(t) {
            if in_steps {
                under_steps.push(item.to_string());
            }
        }
    }
    let mut out = if under_steps.is_empty() {
        numbered
    } else {
        under_steps
    };
    out.retain(|s| !s.is_empty());
    out.truncate(MAX_STEPS);
    out
}

/// `1. text` / `1) text` → `text`.
fn numbered_item(t: &str) -> Option<&str> {
    let digits = t.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let rest = &t[digits..];
    let rest = rest
        .strip_prefix(". ")
        .or_else(|| rest.strip_prefix(") "))?;
    Some(strip_checkbox(rest.trim()))
}

/// `- text` / `* text` / `- [ ] text` → `text`.
fn bullet_item(t: &str) -> Option<&str> {
    let rest = t.strip_prefix("- ").or_else(|| t.strip_prefix("* "))?;
    Some(strip_checkbox(rest.trim()))
}

fn strip_checkbox(t: &str) -> &str {
    for b in ["[ ] ", "[x] ", "[X] "] {
        if let Some(r) = t.strip_prefix(b) {
            return r.trim();
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::read;

    #[test]
    fn steps_under_the_steps_heading() {
        let plan = "## Goal\nMake it fast.\n\n## Steps\n1. Read `src/a.rs`\n   - detail\n2. Change the loop\n3) Run tests\n\n## Files to touch\n- src/a.rs\n\n## Verification\n1. cargo test\n";
        assert_eq!(
            read(plan),
            ["Read `src/a.rs`", "Change the loop", "Run tests"]
        );
    }

    #[test]
    fn bullets_under_a_plan_heading_and_chinese_headings() {
        assert_eq!(read("### Plan\n- [ ] one\n- two\n"), ["one", "two"]);
        assert_eq!(read("## 步骤\n1. 读代码\n2. 改\n"), ["读代码", "改"]);
    }

    #[test]
    fn without_a_heading_every_numbered_item() {
        assert_eq!(
            read("Do this:\n1. a\n2. b\n```\n3. not a step\n```\n"),
            ["a", "b"]
        );
        assert!(read("no steps at all").is_empty());
    }
}
