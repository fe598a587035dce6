//! `/permissions` (#15): the rules in force for a session, where each came from, and removing
//! one from the user config (written the way [`crate::always_scope`] writes it).

use std::path::Path;

use crate::always_scope::{quote_key, AlwaysScope};
use crate::config::{Config, USER_FILE};

/// Where a rule came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `[permissions]` of the user config (every workspace).
    UserGlobal,
    /// `[workspaces."<key>".permissions]` of the user config.
    UserWorkspace(String),
    /// The workspace's project file (it may only tighten: `ask`, `deny`).
    Project,
}

/// One rule in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// `allow`, `ask` or `deny`.
    pub list: &'static str,
    /// The rule as written (`Edit`, `Bash(git push:*)`).
    pub rule: String,
    /// Where it came from.
    pub source: Source,
}

impl Row {
    /// The table it is stored in, as the user would look for it.
    fn place(&self) -> String {
        match &self.source {
            Source::UserGlobal => format!("user config [permissions] {}", self.list),
            Source::UserWorkspace(k) => {
                format!(
                    "user config [workspaces.{}.permissions] {}",
                    quote_key(k),
                    self.list
                )
            }
            Source::Project => format!(
                "project file ({}) {}",
                crate::config::PROJECT_FILE,
                self.list
            ),
        }
    }
}

const LISTS: [&str; 3] = ["allow", "ask", "deny"];

/// The rule strings of `table.<list>` in `doc`, for each list.
fn file_rules(doc: &toml_edit::DocumentMut, path: &[&str]) -> [Vec<String>; 3] {
    let mut item: Option<&toml_edit::Item> = None;
    for (i, k) in path.iter().enumerate() {
        item = if i == 0 {
            doc.get(k)
        } else {
            item.and_then(|t| t.get(k))
        };
    }
    LISTS.map(|l| {
        item.and_then(|t| t.get(l))
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    })
}

fn read_doc(home: &Path) -> toml_edit::DocumentMut {
    std::fs::read_to_string(home.join(USER_FILE))
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_default()
}

/// The rules in force for sessions opened with `config`, plus those saved to the user config
/// since it was loaded ("always allow" answers), each with its source.
pub fn rows(config: &Config) -> Vec<Row> {
    let doc = read_doc(&config.home);
    let key = config.workspace_key.clone();
    let mut global = file_rules(&doc, &["permissions"]);
    let mut ws = match &key {
        Some(k) => file_rules(&doc, &["workspaces", k, "permissions"]),
        None => Default::default(),
    };
    let mut out = Vec::new();
    let lists = [
        &config.permissions.allow,
        &config.permissions.ask,
        &config.permissions.deny,
    ];
    for (i, rules) in lists.iter().enumerate() {
        for r in rules.iter() {
            let r = r.as_str().to_string();
            let source = if let Some(at) = ws[i].iter().position(|x| *x == r) {
                ws[i].remove(at);
                Source::UserWorkspace(key.clone().unwrap_or_default())
            } else if let Some(at) = global[i].iter().position(|x| *x == r) {
                global[i].remove(at);
                Source::UserGlobal
            } else {
                Source::Project
            };
            out.push(Row {
                list: LISTS[i],
                rule: r,
                source,
            });
        }
    }
    // Saved since the config was loaded.
    for (i, list) in LISTS.iter().enumerate() {
        for r in std::mem::take(&mut ws[i]) {
            out.push(Row {
                list,
                rule: r,
                source: Source::UserWorkspace(key.clone().unwrap_or_default()),
            });
        }
        for r in std::mem::take(&mut global[i]) {
            out.push(Row {
                list,
                rule: r,
                source: Source::UserGlobal,
            });
        }
    }
    out
}

/// The `/permissions` listing.
pub fn render(config: &Config, rows: &[Row]) -> String {
    let mut s = format!(
        "permissions: mode {} (flags > user config > built-in default ask); built-in defaults: readers and allowlisted read-only commands run, writers ask",
        config.permissions.mode.as_str()
    );
    if rows.is_empty() {
        s.push_str("\n  no rules (add one with \"always allow\" in an approval)");
    }
    for (n, r) in rows.iter().enumerate() {
        s.push_str(&format!(
            "\n  {:>2}. {:<5} {}  — {}",
            n + 1,
            r.list,
            r.rule,
            r.place()
        ));
    }
    if !rows.is_empty() {
        s.push_str("\n/permissions remove N removes rule N from your config");
    }
    s
}

/// Remove `row` from the user config in `home` (keeping the file's comments and layout).
/// A project-file rule cannot be removed from here: the error says where to edit it.
pub fn remove(home: &Path, row: &Row) -> Result<String, String> {
    let scope = match &row.source {
        Source::Project => {
            return Err(format!(
                "cannot remove {} {} from here: it comes from the workspace's project file ({}); edit that file",
                row.list,
                row.rule,
                crate::config::PROJECT_FILE
            ))
        }
        Source::UserGlobal => AlwaysScope::Global,
        Source::UserWorkspace(k) => AlwaysScope::Workspace(k.clone()),
    };
    let path = home.join(USER_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| format!("{} does not parse: {e}", path.display()))?;
    let mut item: Option<&mut toml_edit::Item> = None;
    let keys: Vec<&str> = match &scope {
        AlwaysScope::Workspace(k) => vec!["workspaces", k.as_str(), "permissions", row.list],
        AlwaysScope::Global => vec!["permissions", row.list],
    };
    for (i, k) in keys.iter().enumerate() {
        item = if i == 0 {
            doc.get_mut(k)
        } else {
            item.and_then(|t| t.get_mut(k))
        };
    }
    let array = item
        .and_then(|a| a.as_array_mut())
        .ok_or_else(|| format!("{} has no {}", path.display(), row.place()))?;
    let at = array
        .iter()
        .position(|v| v.as_str() == Some(row.rule.as_str()))
        .ok_or_else(|| format!("{} is no longer in {}", row.rule, row.place()))?;
    array.remove(at);
    std::fs::write(&path, doc.to_string())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(format!(
        "removed {} {} from {} in {}; sessions opened from now on (/new) no longer have it",
        row.list,
        row.rule,
        row.place(),
        path.display()
    ))
}

/// Drop `row` from the loaded configuration too, so sessions opened by this process from now
/// on do not carry it.
pub fn forget(config: &mut Config, row: &Row) {
    let list = match row.list {
        "allow" => &mut config.permissions.allow,
        "ask" => &mut config.permissions.ask,
        _ => &mut config.permissions.deny,
    };
    if let Some(at) = list.iter().position(|r| r.as_str() == row.rule) {
        list.remove(at);
    }
    if let Source::UserWorkspace(k) = &row.source {
        if let Some(w) = config.workspaces.get_mut(k) {
            let l = match row.list {
                "allow" => &mut w.permissions.allow,
                "ask" => &mut w.permissions.ask,
                _ => &mut w.permissions.deny,
            };
            if let Some(at) = l.iter().position(|r| r.as_str() == row.rule) {
                l.remove(at);
            }
        }
    }
}
