//! Subagent profiles: what a child is told it is (its system prompt text), which model and
//! effort it uses, whether it may write, and which tools it gets. `task{profile}` names one.
//! The built-ins `general` and `explore` come first; then the session's skills (`SKILL.md`,
//! #33 §3), whose instructions become the child's profile text ([`from_skill`]).

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

/// The profile called `name` (`None`: `general`) among the built-ins. `Err` lists the known
/// profiles.
pub fn lookup(name: Option<&str>) -> Result<Profile, String> {
    lookup_with(name, &[], &[])
}

/// The profile called `name` (`None`: `general`): a built-in, else one of `skills` (a
/// skill's model must be one of `models`, the labels the user configured). `Err` lists the
/// known profiles.
pub fn lookup_with(
    name: Option<&str>,
    skills: &[crate::skills::SkillProfile],
    models: &[String],
) -> Result<Profile, String> {
    let name = name.unwrap_or("general");
    if let Some(p) = builtins().into_iter().find(|p| p.name == name) {
        return Ok(p);
    }
    if let Some(skill) = skills.iter().find(|s| s.name == name) {
        return from_skill(skill, models);
    }
    let mut known: Vec<String> = builtins()
        .iter()
        .map(|p| format!("{} ({})", p.name, p.description))
        .collect();
    known.extend(
        skills
            .iter()
            .map(|s| format!("{} (skill: {})", s.name, s.description)),
    );
    Err(format!(
        "unknown subagent profile {name:?}; the known profiles are: {}",
        known.join("; ")
    ))
}

/// A skill as a child's profile: its instructions are the profile text (byte-stable: the
/// same skill gives the same prompt; `$ARGUMENTS` and `$1`… are empty there, the task comes
/// as the child's user message), its front matter narrows the child as it narrows an
/// inline skill turn. A model the user did not configure is refused, naming the ones that
/// are.
pub fn from_skill(
    skill: &crate::skills::SkillProfile,
    models: &[String],
) -> Result<Profile, String> {
    crate::skills::check_model(skill, models)?;
    Ok(Profile {
        name: skill.name.clone(),
        description: skill.description.clone(),
        system: format!(
            "You are the `{}` subagent (a skill). Follow its instructions for the task you are given; your answer is returned to the agent that delegated the task, which cannot see your tool calls.\n\n<skill-instructions>\n{}\n</skill-instructions>",
            skill.name,
            crate::skills::substitute(&skill.body, "").trim_end()
        ),
        model: skill.model.clone(),
        effort: skill.effort,
        read_only: skill.read_only,
        allowed_tools: skill.allowed_tools.clone(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_skill_is_a_profile_and_narrows_like_its_front_matter() {
        let skills =
            crate::skills::Skills::merge(crate::skills::builtin::files(), vec![], &[], vec![], &[])
                .skills;
        let review = lookup_with(Some("review"), &skills, &[]).unwrap();
        assert!(review.read_only, "the review skill is read-only");
        let body = &skills.iter().find(|s| s.name == "review").unwrap().body;
        let first = body.lines().find(|l| !l.trim().is_empty()).unwrap();
        assert!(review.system.contains(first.trim()), "{}", review.system);
        // Byte-stable: the same skill gives the same profile text.
        assert_eq!(
            review.system,
            lookup_with(Some("review"), &skills, &[]).unwrap().system
        );
        // A built-in profile wins over a skill of the same name.
        assert_eq!(
            lookup_with(Some("explore"), &skills, &[]).unwrap().system,
            lookup(Some("explore")).unwrap().system
        );
        // A skill's model must be one the user configured.
        let mut picky = skills.iter().find(|s| s.name == "init").unwrap().clone();
        picky.model = Some("other/model".into());
        let err = from_skill(&picky, &["mock/m".to_string()]).unwrap_err();
        assert!(
            err.contains("other/model") && err.contains("mock/m"),
            "{err}"
        );
        // Unknown names list the skills too.
        let err = lookup_with(Some("nope"), &skills, &[]).unwrap_err();
        assert!(err.contains("review (skill:"), "{err}");
    }

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
