//! What a person does to a store directly (`/memory`, `# note`, `reasonix memory`), as one
//! request both sides run the same way: the laptop on its global store (and in local mode on
//! the project store), the host on a workspace's project store when asked through the link
//! ([`crate::proto::Request::Memory`]). Searching and pinning are done by the asking side on
//! the facts [`MemoryOp::List`] returns.

use serde::{Deserialize, Serialize};

use super::fact::now_rfc3339;
use super::secret::find_secret;
use super::store::{accept, Origin};
use super::{Fact, Store, StoreError};
use crate::proto::MemoryFile;

crate::proto_serde::tagged_enum! {
    MemoryOpDe, "op";
    /// One operation on a store.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "op", rename_all = "snake_case")]
    pub enum MemoryOp {
        /// The active facts (or, `archived`, the forgotten ones), with the skipped-file notices.
        List {
            /// The archive instead.
            #[serde(default)]
            archived: bool,
        },
        /// One fact, then its earlier revisions, oldest first.
        Show {
            /// Fact id.
            id: String,
        },
        /// Write a new fact file (create-only).
        Create {
            /// The fact file.
            file: MemoryFile,
        },
        /// Replace the active fact with the same id by `file` (an edit, a pin): the old file is
        /// kept as a revision, the new one gets the next revision number and `updated` now.
        Replace {
            /// The fact file.
            file: MemoryFile,
        },
        /// Archive a fact (recoverable).
        Forget {
            /// Fact id.
            id: String,
        },
        /// Bring an archived fact back.
        Restore {
            /// Fact id.
            id: String,
        },
    }
}

/// The answer to a [`MemoryOp`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MemoryReply {
    /// The facts listed or shown (for a write: the fact as written).
    #[serde(default)]
    pub facts: Vec<MemoryFile>,
    /// Files that were skipped, by name and reason.
    #[serde(default)]
    pub notices: Vec<String>,
    /// One line on what was done.
    #[serde(default)]
    pub message: String,
}

impl MemoryReply {
    /// The facts, parsed (a file that no longer parses is left out).
    pub fn parsed(&self) -> Vec<Fact> {
        self.facts
            .iter()
            .filter_map(|f| Fact::parse(f.text.as_bytes()).ok())
            .collect()
    }
}

fn file(f: &Fact) -> MemoryFile {
    MemoryFile {
        name: format!("{}.md", f.id),
        text: f.to_markdown(),
    }
}

/// Checks a fact file a person wrote for `store`: the hostile-file rules, the store's scope,
/// and no secret. The error names the problem (and the front-matter line when it is one).
pub fn validate(store: &Store, file: &MemoryFile) -> Result<Fact, String> {
    let fact = accept(
        &file.name,
        file.text.as_bytes(),
        Origin::Store(store.scope()),
    )
    .map_err(|e| e.replacen("skipped memory file", "refused memory file", 1))?;
    if let Some(found) = find_secret(&fact.body) {
        return Err(format!(
            "refused: the fact contains what looks like {found}; secrets are never stored in memory"
        ));
    }
    Ok(fact)
}

/// Runs `op` on `store`.
pub fn apply(store: &Store, op: &MemoryOp) -> Result<MemoryReply, String> {
    let err = |e: StoreError| e.to_string();
    match op {
        MemoryOp::List { archived } => {
            let loaded = if *archived {
                store.archived()
            } else {
                store.load()
            };
            Ok(MemoryReply {
                facts: loaded.facts.iter().map(file).collect(),
                notices: loaded.notices,
                message: String::new(),
            })
        }
        MemoryOp::Show { id } => {
            let loaded = store.load();
            let f =
                loaded.facts.iter().find(|f| &f.id == id).ok_or_else(|| {
                    format!("no fact with id {id:?} in {}", store.dir().display())
                })?;
            let mut facts = vec![file(f)];
            facts.extend(store.revisions(id).iter().map(file));
            Ok(MemoryReply {
                facts,
                notices: Vec::new(),
                message: String::new(),
            })
        }
        MemoryOp::Create { file: given } => {
            let fact = validate(store, given)?;
            store.create(&fact).map_err(err)?;
            Ok(MemoryReply {
                message: format!("remembered {} ({} fact)", fact.id, fact.scope.as_str()),
                facts: vec![file(&fact)],
                notices: Vec::new(),
            })
        }
        MemoryOp::Replace { file: given } => {
            let mut fact = validate(store, given)?;
            let current = store
                .load()
                .facts
                .into_iter()
                .find(|f| f.id == fact.id)
                .ok_or_else(|| {
                    format!(
                        "no active fact with id {:?} in {} to replace",
                        fact.id,
                        store.dir().display()
                    )
                })?;
            fact.revision = current.revision + 1;
            fact.created = current.created;
            fact.updated = now_rfc3339();
            store.supersede(&fact).map_err(err)?;
            Ok(MemoryReply {
                message: format!("saved {} as revision {}", fact.id, fact.revision),
                facts: vec![file(&fact)],
                notices: Vec::new(),
            })
        }
        MemoryOp::Forget { id } => {
            let p = store.forget(id).map_err(err)?;
            Ok(MemoryReply {
                message: format!(
                    "archived {id} at {} (restore with `/memory restore {id}` or `reasonix memory restore {id}`)",
                    p.display()
                ),
                ..Default::default()
            })
        }
        MemoryOp::Restore { id } => {
            store.restore(id).map_err(err)?;
            Ok(MemoryReply {
                message: format!("restored {id}"),
                ..Default::default()
            })
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::memory::{FactType, Scope};

    fn fact(id: &str, body: &str) -> Fact {
        Fact {
            id: id.into(),
            revision: 1,
            kind: FactType::Project,
            scope: Scope::Project,
            keywords: Vec::new(),
            subject: None,
            created: "2026-12-01T00:00:00Z".into(),
            updated: "2026-12-01T00:00:00Z".into(),
            session: None,
            pinned: false,
            expires: None,
            body: body.into(),
        }
    }

    #[test]
    fn create_replace_forget_restore_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("s"), Scope::Project);
        let a = fact("m-a", "We use Postgres 16.");
        apply(&store, &MemoryOp::Create { file: file(&a) }).unwrap();
        let again = apply(&store, &MemoryOp::Create { file: file(&a) }).unwrap_err();
        assert!(again.contains("already exists"), "{again}");
        let mut b = a.clone();
        b.body = "We use Postgres 17.".into();
        b.pinned = true;
        let r = apply(&store, &MemoryOp::Replace { file: file(&b) }).unwrap();
        assert!(r.message.contains("revision 2"), "{}", r.message);
        let shown = apply(&store, &MemoryOp::Show { id: "m-a".into() })
            .unwrap()
            .parsed();
        assert_eq!(shown.len(), 2);
        assert!(shown[0].pinned && shown[0].body.contains("17"));
        assert!(shown[1].body.contains("16") && shown[1].revision == 1);
        apply(&store, &MemoryOp::Forget { id: "m-a".into() }).unwrap();
        let listed = apply(&store, &MemoryOp::List { archived: false }).unwrap();
        assert!(listed.facts.is_empty());
        let archived = apply(&store, &MemoryOp::List { archived: true }).unwrap();
        assert_eq!(archived.facts.len(), 1);
        apply(&store, &MemoryOp::Restore { id: "m-a".into() }).unwrap();
        assert_eq!(store.load().facts.len(), 1);
    }

    #[test]
    fn a_bad_file_is_refused_with_its_line_and_a_secret_outright() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("s"), Scope::Project);
        let good = fact("m-b", "Deploys go through the staging host first.");
        apply(&store, &MemoryOp::Create { file: file(&good) }).unwrap();
        let mut text = file(&good).text.replace("type: project", "type: decision");
        let bad = MemoryFile {
            name: "m-b.md".into(),
            text: text.clone(),
        };
        let e = apply(&store, &MemoryOp::Replace { file: bad }).unwrap_err();
        assert!(e.contains("line 4") && e.contains("decision"), "{e}");
        text = file(&good).text.replace("scope: project", "scope: global");
        let e = apply(
            &store,
            &MemoryOp::Replace {
                file: MemoryFile {
                    name: "m-b.md".into(),
                    text,
                },
            },
        )
        .unwrap_err();
        assert!(e.contains("global"), "{e}");
        let mut secret = good.clone();
        secret.body = "the key is sk-proj-abcdefghijklmnopqrstuvwxyz0123".into();
        let e = apply(
            &store,
            &MemoryOp::Replace {
                file: file(&secret),
            },
        )
        .unwrap_err();
        assert!(e.contains("API key"), "{e}");
        // The old fact is untouched.
        assert_eq!(store.load().facts[0].body, good.body);
        assert_eq!(store.load().facts[0].revision, 1);
    }
}
