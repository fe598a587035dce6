//! Subagent profiles: what a child is told it is (its system prompt text), which model and
//! effort it uses, whether it may write, and which tools it gets. `task{profile}` names one.
//! For now the built-ins `general` and `explore` are known; skills (`SKILL.md`, #33 §3)
//! will add profiles through [`lookup`].

use reasonix_forward::proto::ReasoningEffort;

/// One subagent profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The name `task{profile}` uses.
    pub name: String,
    /// One line shown in `list_subagents` and errors.
    pub description: String,
    /// The profile's part of the child's system prompt (byte-stable: the same profile gives
    /// the same prompt, so children share the provider's cached prefix).
    pub system: String,
    /// The model the child asks for (`None`: the session's).
    pub model: Option<String>,
    /// The child's reasoning effort (`None`: the session's).
    pub effort: Option<ReasoningEffort>,
    /// The child gets read-only tools only.
    pub read_only: bool,
    /// The tools the child may have (`None`: every tool its mode allows).
    pub allowed_tools: Option<Vec<String>>,
}

/// The built-in profiles, by name.
pub fn builtins() -> Vec<Profile> {
    vec![
        Profile {
            name: "general".into(),
            description: "a general-purpose child that may read, search, edit and run commands".into(),
            system: "You are a general-purpose subagent. Do the task you are given completely, using your tools; then answer with what you did and found, briefly and concretely (files, lines, results). Your answer is returned to the agent that delegated the task; it cannot see your tool calls.".into(),
            model: None,
            effort: None,
            read_only: false,
            allowed_tools: None,
        },
        Profile {
            name: "explore".into(),
            description: "read-only research: finds and reads code and returns a map of what it was asked about".into(),
            system: "You are a read-only research subagent. Find and read what the task asks about; you cannot change files or run commands. Answer with a concise map: the relevant files and symbols with paths and line numbers, how they connect, and anything surprising. Your answer is returned to the agent that delegated the task.".into(),
            model: None,
            effort: None,
            read_only: true,
            allowed_tools: None,
        },
    ]
}

/// The profile called `name` (`None`: `general`). `Err` lists the known profiles.
pub fn lookup(name: Option<&str>) -> Result<Profile, String> {
    let name = name.unwrap_or("general");
    let all = builtins();
    all.iter().find(|p| p.name == name).cloned().ok_or_else(|| {
        let known: Vec<String> = all
            .iter()
            .map(|p| format!("{} ({})", p.name, p.description))
            .collect();
        format!(
            "unknown subagent profile {name:?}; the known profiles are: {}",
            known.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn unknown_profile_lists_the_known_ones() {
        assert_eq!(lookup(None).unwrap().name, "general");
        assert!(lookup(Some("explore")).unwrap().read_only);
        let err = lookup(Some("reviewer")).unwrap_err();
        assert!(
            err.contains("\"reviewer\"") && err.contains("general") && err.contains("explore"),
            "{err}"
        );
    }
}
