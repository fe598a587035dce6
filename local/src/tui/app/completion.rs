//! The completion popup: `/command` and `@path` candidates.

use super::*;

/// What a completion popup completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CompKind {
    Slash,
    Path {
        dir: String,
    },
    /// `@server:uri` of an MCP server's resources.
    Resource,
}

/// One completion candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CompItem {
    pub(crate) label: String,
    pub(crate) detail: String,
    pub(crate) is_dir: bool,
}

/// An open completion popup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Completion {
    pub(crate) kind: CompKind,
    pub(crate) items: Vec<CompItem>,
    pub(crate) sel: usize,
    /// Bytes of the composer text the choice replaces.
    pub(crate) range: Range<usize>,
    pub(crate) loading: bool,
}

impl App {
    pub(super) fn dismiss_completion(&mut self) {
        self.completion = None;
        self.completion_dismissed = Some(self.composer.text().to_string());
    }

    /// The `@path` token around the cursor: (byte range of the token, text after `@` up to the
    /// cursor).
    pub(super) fn path_token(&self) -> Option<(Range<usize>, String)> {
        let text = self.composer.text();
        let cur = self.composer.cursor();
        let start = text[..cur]
            .rfind(char::is_whitespace)
            .map(|i| i + 1)
            .unwrap_or(0);
        let tok = &text[start..cur];
        let partial = tok.strip_prefix('@')?;
        let end = text[cur..]
            .find(char::is_whitespace)
            .map(|i| cur + i)
            .unwrap_or(text.len());
        Some((start..end, partial.to_string()))
    }

    /// Recompute the popup after the composer changed; may ask for a directory listing.
    pub(super) fn refresh_completion(&mut self) -> Vec<Action> {
        if self.completion_dismissed.as_deref() == Some(self.composer.text()) {
            self.completion = None;
            return Vec::new();
        }
        self.completion_dismissed = None;
        let text = self.composer.text().to_string();
        let cur = self.composer.cursor();
        let prev_sel = self.completion.as_ref().map(|c| c.sel).unwrap_or(0);
        // Slash commands: only while the cursor is in the first word.
        if let Some(rest) = text.strip_prefix('/') {
            if !text[..cur].contains(char::is_whitespace) {
                let prefix = &rest[..cur.saturating_sub(1).min(rest.len())];
                let items: Vec<CompItem> = SlashCommand::ALL
                    .iter()
                    .map(|c| c.spec())
                    .filter(|c| c.name.starts_with(prefix))
                    .map(
                        |SlashSpec {
                             name: n,
                             args: a,
                             description: d,
                             ..
                         }| CompItem {
                            label: if a.is_empty() {
                                format!("/{n}")
                            } else {
                                format!("/{n} {a}")
                            },
                            detail: d.to_string(),
                            is_dir: false,
                        },
                    )
                    .chain(
                        self.custom_commands
                            .commands
                            .iter()
                            .filter(|c| c.name.starts_with(prefix))
                            .map(|c| CompItem {
                                label: if c.argument_hint.is_empty() {
                                    format!("/{}", c.name)
                                } else {
                                    format!("/{} {}", c.name, c.argument_hint)
                                },
                                detail: format!("{} ({})", c.description, c.source.label()),
                                is_dir: false,
                            }),
                    )
                    .collect();
                let end = text.find(char::is_whitespace).unwrap_or(text.len());
                // Opening the slash completion re-reads the command files (once per
                // opening), so a file added since the start is offered.
                let reload = !self.commands_reloaded;
                self.commands_reloaded = true;
                self.completion = (!items.is_empty()).then(|| Completion {
                    kind: CompKind::Slash,
                    sel: prev_sel.min(items.len().saturating_sub(1)),
                    items,
                    range: 0..end,
                    loading: false,
                });
                return if reload {
                    vec![Action::ReloadCommands { then: None }]
                } else {
                    Vec::new()
                };
            }
        }
        self.commands_reloaded = false;
        let Some((range, partial)) = self.path_token() else {
            self.completion = None;
            return Vec::new();
        };
        let (dir, prefix) = match partial.rfind('/') {
            Some(i) => (partial[..i].to_string(), partial[i + 1..].to_string()),
            None => (String::new(), partial.clone()),
        };
        // `@term:N`: the open terminal tabs, listed before the files of the top folder.
        let terms = if dir.is_empty() {
            self.term_completions(&partial)
        } else {
            Vec::new()
        };
        if let Some((server, uri)) = partial.split_once(':').filter(|(s, _)| {
            *s != "term"
                && !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        }) {
            // `@server:uri`: the first resources of that MCP server.
            let Some(list) = self.mcp_resources.get(server) else {
                let mut actions = Vec::new();
                if self.mcp_resources_pending.insert(server.to_string()) {
                    actions.push(Action::McpResources {
                        server: server.to_string(),
                    });
                }
                self.completion = None;
                return actions;
            };
            let items: Vec<CompItem> = list
                .iter()
                .filter(|r| r.uri.starts_with(uri))
                .map(|r| CompItem {
                    label: format!("{server}:{}", r.uri),
                    detail: if r.description.is_empty() {
                        r.name.clone()
                    } else {
                        r.description.clone()
                    },
                    is_dir: false,
                })
                .collect();
            self.completion = (!items.is_empty()).then(|| Completion {
                kind: CompKind::Resource,
                sel: prev_sel.min(items.len().saturating_sub(1)),
                items,
                range,
                loading: false,
            });
            return Vec::new();
        }
        if partial.starts_with("term:") {
            self.completion = (!terms.is_empty()).then(|| Completion {
                kind: CompKind::Path { dir: String::new() },
                sel: prev_sel.min(terms.len().saturating_sub(1)),
                items: terms,
                range,
                loading: false,
            });
            return Vec::new();
        }
        let mut actions = Vec::new();
        let (mut items, loading) = match self.dir_cache.get(&dir) {
            Some(entries) => {
                let lower = prefix.to_lowercase();
                let mut items: Vec<CompItem> = entries
                    .iter()
                    .filter(|e| prefix.starts_with('.') || !e.name.starts_with('.'))
                    .filter(|e| e.name.to_lowercase().starts_with(&lower))
                    .map(|e| CompItem {
                        label: if e.is_dir {
                            format!("{}/", e.name)
                        } else {
                            e.name.clone()
                        },
                        detail: if e.is_dir {
                            "dir".into()
                        } else {
                            String::new()
                        },
                        is_dir: e.is_dir,
                    })
                    .collect();
                // Folders first, like a file picker.
                items.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then(a.label.cmp(&b.label)));
                items.truncate(200);
                (items, false)
            }
            None => {
                if self.dir_pending.insert(dir.clone()) {
                    actions.push(Action::ListDir { path: dir.clone() });
                }
                (Vec::new(), true)
            }
        };
        let mut loading = loading;
        if !terms.is_empty() {
            items.splice(0..0, terms);
            // The terminals are shown at once; the files join them when listed.
            loading = false;
        }
        if items.is_empty() && !loading {
            self.completion = None;
            return actions;
        }
        let same_dir = matches!(&self.completion, Some(Completion { kind: CompKind::Path { dir: d }, .. }) if *d == dir);
        self.completion = Some(Completion {
            kind: CompKind::Path { dir },
            sel: if same_dir {
                prev_sel.min(items.len().saturating_sub(1))
            } else {
                0
            },
            items,
            range,
            loading,
        });
        actions
    }

    pub(super) fn accept_completion(&mut self, enter: bool) -> Vec<Action> {
        let Some(c) = self.completion.clone() else {
            return Vec::new();
        };
        let Some(item) = c.items.get(c.sel).cloned() else {
            // Still loading: Enter sends as typed.
            self.completion = None;
            return if enter { self.send() } else { Vec::new() };
        };
        match &c.kind {
            CompKind::Slash => {
                let name = item
                    .label
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_string();
                if enter {
                    self.composer.take();
                    self.completion = None;
                    return self.command(name.trim_start_matches('/'));
                }
                self.composer
                    .replace_range(c.range.clone(), &format!("{name} "));
                self.completion = None;
                self.completion_dismissed = Some(self.composer.text().to_string());
                Vec::new()
            }
            CompKind::Resource => {
                self.composer
                    .replace_range(c.range.clone(), &format!("@{} ", item.label));
                self.completion = None;
                self.completion_dismissed = Some(self.composer.text().to_string());
                Vec::new()
            }
            CompKind::Path { dir } => {
                let path = if dir.is_empty() {
                    item.label.clone()
                } else {
                    format!("{dir}/{}", item.label)
                };
                let insert = if item.is_dir {
                    format!("@{path}")
                } else {
                    format!("@{path} ")
                };
                self.composer.replace_range(c.range.clone(), &insert);
                self.completion = None;
                // A folder lists its own entries next (one level per keystroke).
                self.refresh_completion()
            }
        }
    }
}
