//! Where an "always allow" answer is stored (#15): by default under the workspace it was
//! given in (`[workspaces."<workspace>".permissions] allow` of the user's own config), or,
//! as a separate explicit choice, for every workspace (`[permissions] allow`).
//!
//! A workspace is named as the status line names it: `local:/abs/path` in local mode,
//! `[user@]host:path` over SSH. Only the user config may hold `[workspaces]` tables (they
//! loosen the policy for that workspace, which a project file may never do).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, Rule, USER_FILE};

/// The name a workspace's rules are stored under: the connector's description, with a
/// relative local path made absolute (so `-w .` and `-w /abs/path` are one workspace).
pub fn workspace_key(described: &str) -> String {
    match described.strip_prefix("local:") {
        Some(p) if !Path::new(p).is_absolute() => match std::env::current_dir() {
            Ok(cwd) => {
                let mut abs = std::path::PathBuf::new();
                for c in cwd.join(p).components() {
                    match c {
                        std::path::Component::CurDir => {}
                        std::path::Component::ParentDir => {
                            abs.pop();
                        }
                        other => abs.push(other.as_os_str()),
                    }
                }
                format!("local:{}", abs.display())
            }
            Err(_) => described.to_string(),
        },
        _ => described.to_string(),
    }
}

/// Where an "always allow" rule goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AlwaysScope {
    /// This workspace only (the named one).
    Workspace(String),
    /// Every workspace on every host.
    Global,
}

impl AlwaysScope {
    /// The TOML table the rule is stored in, as the user would look for it.
    pub fn table(&self) -> String {
        match self {
            AlwaysScope::Workspace(key) => format!("[workspaces.{}.permissions] allow", quote(key)),
            AlwaysScope::Global => "[permissions] allow".to_string(),
        }
    }
}

/// A table key as `toml_edit` writes it into the file (so the dialog names what the user
/// will find there).
pub(crate) fn quote_key(key: &str) -> String {
    quote(key)
}

fn quote(key: &str) -> String {
    toml_edit::Key::new(key).display_repr().into_owned()
}

/// `[workspaces."<workspace>"]` of the user config as written.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceFile {
    /// Rules for this workspace only.
    #[serde(default)]
    pub permissions: WorkspacePermissions,
}

/// `[workspaces."<workspace>".permissions]`: rules merged with the user's global ones when a
/// session of that workspace is opened.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspacePermissions {
    /// `allow`.
    #[serde(default)]
    pub allow: Vec<Rule>,
    /// `ask`.
    #[serde(default)]
    pub ask: Vec<Rule>,
    /// `deny`.
    #[serde(default)]
    pub deny: Vec<Rule>,
}

/// Add `rule` to the allow list of `scope` in `$home/config.toml` (created if missing),
/// keeping the file's comments and layout. `Ok(false)` when the rule is already there.
pub fn persist_rule(home: &Path, rule: &str, scope: &AlwaysScope) -> Result<bool, ConfigError> {
    let path = home.join(USER_FILE);
    let invalid = |message: String| ConfigError::Invalid {
        source_name: Some(path.display().to_string()),
        key: scope.table(),
        message,
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(invalid(format!(
                "cannot read {} to save the rule {rule}: {e}",
                path.display()
            )))
        }
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| {
        invalid(format!(
            "cannot save the rule {rule}: {} does not parse: {e}",
            path.display()
        ))
    })?;
    let keys: Vec<&str> = match scope {
        AlwaysScope::Workspace(key) => vec!["workspaces", key.as_str(), "permissions"],
        AlwaysScope::Global => vec!["permissions"],
    };
    let mut table: &mut dyn toml_edit::TableLike = doc.as_table_mut();
    for (i, k) in keys.iter().enumerate() {
        let last = i + 1 == keys.len();
        let item = table.entry(k).or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            // `[workspaces."x".permissions]` alone, without empty parent headers.
            t.set_implicit(!last);
            toml_edit::Item::Table(t)
        });
        table = item
            .as_table_like_mut()
            .ok_or_else(|| invalid(format!("{}: `{k}` is not a table", path.display())))?;
    }
    let allow = table
        .entry("allow")
        .or_insert(toml_edit::Item::Value(toml_edit::Value::Array(
            toml_edit::Array::new(),
        )));
    let arr = allow
        .as_array_mut()
        .ok_or_else(|| invalid(format!("{}: `allow` is not an array", path.display())))?;
    if arr.iter().any(|v| v.as_str() == Some(rule)) {
        return Ok(false);
    }
    arr.push(rule);
    std::fs::create_dir_all(home).map_err(|e| invalid(format!("{}: {e}", home.display())))?;
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, doc.to_string())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| invalid(format!("cannot write {}: {e}", path.display())))?;
    Ok(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::{Config, LoadOptions};

    #[test]
    fn workspace_rules_apply_to_their_workspace_only() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join(USER_FILE),
            "# mine\n[permissions]\nallow = [\"Read\"]\n",
        )
        .unwrap();
        let ws = AlwaysScope::Workspace("me@box:/src/a \"q\"".into());
        assert!(persist_rule(home.path(), "Edit", &ws).unwrap());
        assert!(!persist_rule(home.path(), "Edit", &ws).unwrap(), "once");
        assert!(persist_rule(home.path(), "Bash(cargo test:*)", &AlwaysScope::Global).unwrap());
        let text = std::fs::read_to_string(home.path().join(USER_FILE)).unwrap();
        assert!(text.starts_with("# mine\n"), "{text}");
        let header = format!("{}\n", ws.table().trim_end_matches(" allow"));
        assert!(text.contains(&header), "{header} in {text}");
        assert!(!text.contains("[workspaces]\n"), "{text}");
        let load = || {
            Config::load(&LoadOptions {
                home: Some(home.path().to_path_buf()),
                ignore_project: true,
                ..Default::default()
            })
            .unwrap()
        };
        let mut here = load();
        here.apply_workspace("me@box:/src/a \"q\"");
        let texts = |c: &Config| {
            c.permissions
                .allow
                .iter()
                .map(|r| r.as_str().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(texts(&here), vec!["Read", "Bash(cargo test:*)", "Edit"]);
        let mut elsewhere = load();
        elsewhere.apply_workspace("me@box:/src/b");
        assert_eq!(texts(&elsewhere), vec!["Read", "Bash(cargo test:*)"]);
    }
}
