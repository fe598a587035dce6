//! `/memory` in the workbench: list, search, show (with revisions), pin/unpin, forget,
//! restore, on the workspace's project store (on the host, through the link) and the user's
//! global store (on this laptop). The text it returns goes into the transcript.

use reasonix_forward::memory::fact::truncate;
use reasonix_forward::memory::ops::MemoryOp;
use reasonix_forward::memory::recall::Index;
use reasonix_forward::memory::{Fact, Scope};

use super::access::{file_of, Access};

/// The usage line of `/memory`.
pub const USAGE: &str = "usage: /memory [list|archived|search WORDS|show ID|pin ID|unpin ID|forget ID|restore ID]  (`# text` in the composer remembers a note; `reasonix memory edit ID` edits one)";

/// One line of a listing.
pub fn line(f: &Fact) -> String {
    format!(
        "{}  {:<7} {:<9} {}{}{}",
        f.id,
        f.scope.as_str(),
        f.kind.as_str(),
        if f.pinned { "[pinned] " } else { "" },
        f.subject
            .as_ref()
            .map(|s| format!("({s}) "))
            .unwrap_or_default(),
        truncate(&f.body.replace('\n', " "), 100)
    )
}

/// The two stores `/memory` works on.
pub struct Stores {
    /// The workspace's project store.
    pub project: Access,
    /// The user's global store.
    pub global: Access,
}

impl Stores {
    fn both(&self) -> [(&'static str, &Access); 2] {
        [("project", &self.project), ("global", &self.global)]
    }

    /// Which store holds active fact `id`.
    pub(crate) async fn holder(&self, id: &str) -> Result<(&Access, Fact), String> {
        for (_, a) in self.both() {
            if let Ok(r) = a.run(MemoryOp::Show { id: id.into() }).await {
                if let Some(f) = r.parsed().into_iter().next() {
                    return Ok((a, f));
                }
            }
        }
        Err(format!(
            "no active fact {id:?} in the project or the global store (`/memory` lists them)"
        ))
    }

    /// Archives each of `ids` from whichever store holds it; one line per fact.
    pub async fn forget(&self, ids: &[String]) -> (String, bool) {
        let mut out = Vec::new();
        let mut error = false;
        for id in ids {
            match self.holder(id).await {
                Ok((a, _)) => match a.run(MemoryOp::Forget { id: id.clone() }).await {
                    Ok(r) => out.push(r.message),
                    Err(e) => {
                        error = true;
                        out.push(format!("/memory forget {id}: {e}"));
                    }
                },
                Err(e) => {
                    error = true;
                    out.push(format!("/memory forget: {e}"));
                }
            }
        }
        (out.join("\n"), error)
    }

    /// Saves a new fact in the store of its scope.
    pub async fn save(&self, f: &Fact) -> Result<String, String> {
        let a = match f.scope {
            Scope::Project => &self.project,
            Scope::Global => &self.global,
        };
        a.run(MemoryOp::Create { file: file_of(f) })
            .await
            .map(|r| format!("{}; recalled when a later message matches", r.message))
    }

    /// Runs `/memory ARG`; the text to show and whether it is an error.
    pub async fn command(&self, arg: &str) -> (String, bool) {
        let (verb, rest) = match arg.trim().split_once(char::is_whitespace) {
            Some((v, r)) => (v, r.trim()),
            None => (arg.trim(), ""),
        };
        match self.run(verb, rest).await {
            Ok(t) => (t, false),
            Err(e) => (format!("/memory {verb}: {e}"), true),
        }
    }

    async fn run(&self, verb: &str, rest: &str) -> Result<String, String> {
        match (verb, rest) {
            ("" | "list" | "ls", "") => self.list(false).await,
            ("archived" | "archive", "") => self.list(true).await,
            ("search" | "find", q) if !q.is_empty() => {
                let mut facts = Vec::new();
                let mut notes = Vec::new();
                for (name, a) in self.both() {
                    match a.run(MemoryOp::List { archived: false }).await {
                        Ok(r) => facts.extend(r.parsed()),
                        Err(e) => notes.push(format!("({name} store: {e})")),
                    }
                }
                let index = Index::build(&facts);
                let hits = index.search(q);
                let mut out: Vec<String> = hits.iter().map(|(i, _)| line(&facts[*i])).collect();
                if out.is_empty() {
                    out.push(format!("no fact matches {q:?}"));
                }
                out.extend(notes);
                Ok(out.join("\n"))
            }
            ("show" | "revisions", id) if !id.is_empty() => {
                for (_, a) in self.both() {
                    if let Ok(r) = a.run(MemoryOp::Show { id: id.into() }).await {
                        let facts = r.parsed();
                        let Some(first) = facts.first() else { continue };
                        let mut out = first.to_markdown();
                        for old in facts.iter().skip(1) {
                            out.push_str(&format!(
                                "\n[earlier revision {} · {}]\n{}\n",
                                old.revision, old.updated, old.body
                            ));
                        }
                        return Ok(out.trim_end().to_string());
                    }
                }
                Err(format!("no active fact {id:?} (`/memory` lists them)"))
            }
            ("pin" | "unpin", id) if !id.is_empty() => {
                let (a, mut f) = self.holder(id).await?;
                let pin = verb == "pin";
                if f.pinned == pin {
                    return Ok(format!("{id} is already {verb}ned"));
                }
                f.pinned = pin;
                let r = a.run(MemoryOp::Replace { file: file_of(&f) }).await?;
                Ok(format!(
                    "{}: {verb}ned; pinned facts join the standing instructions from the next session on",
                    r.message
                ))
            }
            ("restore", id) if !id.is_empty() => {
                let mut last = String::new();
                for (_, a) in self.both() {
                    match a.run(MemoryOp::Restore { id: id.into() }).await {
                        Ok(r) => return Ok(r.message),
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
            ("edit", _) => Err(
                "edit a fact outside the workbench with `reasonix memory edit ID` (opens $EDITOR)"
                    .into(),
            ),
            _ => Err(USAGE.into()),
        }
    }

    async fn list(&self, archived: bool) -> Result<String, String> {
        let mut out = Vec::new();
        for (name, a) in self.both() {
            match a.run(MemoryOp::List { archived }).await {
                Ok(r) => {
                    let facts = r.parsed();
                    out.push(format!(
                        "{name} facts{} ({}):",
                        if archived { ", archived" } else { "" },
                        facts.len()
                    ));
                    out.extend(facts.iter().map(|f| format!("  {}", line(f))));
                    out.extend(r.notices.iter().map(|n| format!("  notice: {n}")));
                }
                Err(e) => out.push(format!("{name} facts: {e}")),
            }
        }
        out.push("(/memory show ID · pin ID · unpin ID · forget ID · search WORDS; `# text` remembers a note)".into());
        Ok(out.join("\n"))
    }
}
