//! The `[permissions]` table and the tighten-only merge of user and project tables.

use serde::{Deserialize, Serialize};

use super::{Mode, Policy};

/// The `[permissions]` table of one config file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PolicyConfig {
    /// The mode, when the file sets one.
    pub mode: Option<Mode>,
    /// Rules that allow.
    pub allow: Vec<String>,
    /// Rules that ask.
    pub ask: Vec<String>,
    /// Rules that deny.
    pub deny: Vec<String>,
}

impl Policy {
    /// Merges user and project `[permissions]`: the project may add ask and deny rules and
    /// pick a stricter mode; its allow rules and looser modes are dropped, each with a warning.
    pub fn tighten_only(
        user: &PolicyConfig,
        project: &PolicyConfig,
    ) -> (PolicyConfig, Vec<String>) {
        let mut warnings = Vec::new();
        let user_mode = user.mode.unwrap_or_default();
        let mode = match project.mode {
            Some(m) if m.looseness() < user_mode.looseness() => Some(m),
            Some(m) if m == user_mode => user.mode.or(Some(m)),
            Some(m) => {
                warnings.push(format!(
                    "ignored project permissions.mode = \"{}\": a project file may only tighten (yours is \"{}\")",
                    m.as_str(),
                    user_mode.as_str()
                ));
                user.mode
            }
            None => user.mode,
        };
        for r in &project.allow {
            warnings.push(format!(
                "ignored project permissions.allow rule `{r}`: a project file may only tighten; add it to your own config to use it"
            ));
        }
        let union = |a: &[String], b: &[String]| {
            let mut v = a.to_vec();
            for r in b {
                if !v.contains(r) {
                    v.push(r.clone());
                }
            }
            v
        };
        let merged = PolicyConfig {
            mode,
            allow: user.allow.clone(),
            ask: union(&user.ask, &project.ask),
            deny: union(&user.deny, &project.deny),
        };
        (merged, warnings)
    }
}
