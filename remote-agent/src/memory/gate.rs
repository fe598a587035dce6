//! Who may write what (`docs/MEMORY.md`, "Write policy"). The agent may create a new
//! project fact without asking only when it is create-only, at most [`SILENT_MAX_CHARS`]
//! characters, holds nothing that looks like a secret and overlaps no existing fact;
//! everything else (global facts, `user`/`feedback` facts, pinning, an update of a subject,
//! every `forget`) asks the user, whatever the permission mode: `auto` and `yolo` never
//! answer these. A headless run refuses them unless `--allow-memory-writes` was given. A fact
//! that looks like a secret is refused outright and never written anywhere.

use std::collections::HashSet;

use reasonix_forward::memory::fact::{new_id, now_rfc3339, Fact, FactType, Scope};
use reasonix_forward::memory::recall::tokenize;
use reasonix_forward::memory::secret::find_secret;
use serde::Deserialize;
use serde_json::Value;

use super::Memory;
use crate::policy::Decision;
use crate::tools::ToolContext;

/// Longest fact the agent may write without asking.
pub const SILENT_MAX_CHARS: usize = 6_000;
/// Longest fact at all.
pub const MAX_FACT_CHARS: usize = 16_000;
/// Share of the smaller fact's terms two facts must have in common to overlap.
const OVERLAP: f64 = 0.6;

/// Arguments of `remember`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    /// The fact.
    pub content: String,
    /// `user`, `feedback`, `project` or `reference`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `project` or `global`.
    pub scope: String,
    /// Extra search words.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// Subject key (one active value per subject).
    #[serde(default)]
    pub subject: Option<String>,
    /// Join the standing instructions at session start.
    #[serde(default)]
    pub pinned: bool,
    /// `YYYY-MM-DD` after which it is no longer recalled.
    #[serde(default)]
    pub expires: Option<String>,
}

/// What a `remember` call would do.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The fact to write.
    pub fact: Fact,
    /// `Some(old revision)` when it supersedes the active fact of its subject.
    pub supersedes: Option<u32>,
    /// Why the user must approve it (`None`: the agent may write it alone).
    pub needs_approval: Option<String>,
}

/// Works out what `remember` with `a` would write, or why it must not.
pub fn plan_remember(mem: &Memory, a: &RememberArgs) -> Result<Plan, String> {
    let content = a.content.trim();
    if content.is_empty() {
        return Err("remember needs a non-empty `content`".into());
    }
    let chars = content.chars().count();
    if chars > MAX_FACT_CHARS {
        return Err(format!(
            "the fact is {chars} characters; a fact is at most {MAX_FACT_CHARS} — remember the decision, not the material (point to a file instead)"
        ));
    }
    let kind = FactType::parse(&a.kind).ok_or_else(|| {
        format!(
            "type {:?} is not one of user, feedback, project, reference",
            a.kind
        )
    })?;
    let scope = Scope::parse(&a.scope)
        .ok_or_else(|| format!("scope {:?} is not project or global", a.scope))?;
    if let Some(e) = &a.expires {
        let ok = e.len() == 10
            && e.bytes().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            });
        if !ok {
            return Err(format!("expires {e:?} is not a date like 2027-06-30"));
        }
    }
    let all_text = format!(
        "{content}\n{}\n{}",
        a.keywords.join(" "),
        a.subject.as_deref().unwrap_or("")
    );
    if let Some(found) = find_secret(&all_text) {
        return Err(format!(
            "refused: the fact contains what looks like {found}. Secrets are never stored in memory; remember where the secret is kept (a file, a vault, an environment variable name) instead"
        ));
    }
    let snap = mem.snapshot();
    let subject = a
        .subject
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let now = now_rfc3339();
    let old = subject.as_ref().and_then(|s| {
        snap.facts
            .iter()
            .find(|f| f.scope == scope && f.subject.as_deref() == Some(s.as_str()))
    });
    let fact = Fact {
        id: old.map(|f| f.id.clone()).unwrap_or_else(|| new_id(content)),
        revision: old.map(|f| f.revision + 1).unwrap_or(1),
        kind,
        scope,
        keywords: a
            .keywords
            .iter()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
            .collect(),
        subject,
        created: old
            .map(|f| f.created.clone())
            .unwrap_or_else(|| now.clone()),
        updated: now,
        session: mem.session().map(str::to_string),
        pinned: a.pinned,
        expires: a.expires.clone(),
        body: content.to_string(),
    };
    let mut reasons = Vec::new();
    if scope == Scope::Global {
        reasons.push("a global fact (it follows the user to every workspace)".to_string());
    }
    if matches!(kind, FactType::User | FactType::Feedback) {
        reasons.push(format!("a {} fact", kind.as_str()));
    }
    if a.pinned {
        reasons.push("pinned (joins the standing instructions of every new session)".into());
    }
    if let Some(o) = old {
        reasons.push(format!(
            "updates subject {:?} (fact {}, revision {} → {})",
            o.subject.as_deref().unwrap_or(""),
            o.id,
            o.revision,
            o.revision + 1
        ));
    }
    if chars > SILENT_MAX_CHARS {
        reasons.push(format!("longer than {SILENT_MAX_CHARS} characters"));
    }
    if old.is_none() {
        if let Some(o) = overlapping(&snap.facts, content) {
            reasons.push(format!("overlaps existing fact {o}"));
        }
    }
    Ok(Plan {
        supersedes: old.map(|f| f.revision),
        fact,
        needs_approval: (!reasons.is_empty()).then(|| reasons.join("; ")),
    })
}

/// The first fact sharing at least [`OVERLAP`] of the smaller one's terms with `content`.
fn overlapping(facts: &[Fact], content: &str) -> Option<String> {
    let new: HashSet<String> = tokenize(content).into_iter().collect();
    if new.is_empty() {
        return None;
    }
    facts.iter().find_map(|f| {
        let old: HashSet<String> = tokenize(&f.body).into_iter().collect();
        let common = new.intersection(&old).count();
        let smaller = new.len().min(old.len()).max(1);
        (common as f64 / smaller as f64 >= OVERLAP).then(|| f.id.clone())
    })
}

/// The outcome of the write policy for one call.
#[derive(Debug)]
pub enum Gate {
    /// Go on with this decision (the policy's, or an ask the modes cannot answer).
    Proceed(Decision),
    /// Refused; the text goes to the model.
    Refuse(String),
    /// Needs approval and nobody can give it (headless, no `--allow-memory-writes`).
    Headless(String),
}

/// True for the tools the write policy governs.
pub fn gated(tool: &str) -> bool {
    matches!(tool, "remember" | "forget")
}

/// Applies the write policy to a `remember`/`forget` call the permission policy decided as
/// `policy` (a deny rule still wins).
pub fn check(
    tool: &str,
    args: &Value,
    ctx: &ToolContext,
    policy: Decision,
    headless: bool,
) -> Gate {
    if !gated(tool) || matches!(policy, Decision::Deny { .. }) {
        return Gate::Proceed(policy);
    }
    let Some(mem) = ctx.memory.as_deref() else {
        return Gate::Refuse("memory is not available in this session".into());
    };
    let need = match tool {
        "remember" => {
            let Ok(a) = serde_json::from_value::<RememberArgs>(args.clone()) else {
                // The tool itself reports the argument error.
                return Gate::Proceed(Decision::Allow);
            };
            match plan_remember(mem, &a) {
                Ok(p) => p.needs_approval,
                Err(e) => return Gate::Refuse(e),
            }
        }
        _ => {
            let id = args.get("id").and_then(Value::as_str).unwrap_or("");
            let snap = mem.snapshot();
            match snap.facts.iter().find(|f| f.id == id) {
                Some(f) => Some(format!(
                    "forgets {} fact {id} ({})",
                    f.scope.as_str(),
                    reasonix_forward::memory::fact::truncate(&f.body, 80)
                )),
                None => {
                    return Gate::Refuse(format!(
                        "no fact with id {id:?}; list them with the `memory` tool"
                    ))
                }
            }
        }
    };
    match need {
        None => Gate::Proceed(Decision::Allow),
        Some(_) if headless && mem.allow_writes() => Gate::Proceed(Decision::Allow),
        Some(why) if headless => Gate::Headless(format!(
            "memory write refused: it needs the user's approval ({why}) and this run is headless. Do not retry; say in your answer what you wanted to {tool}. The user can allow memory writes with `reasonix run --allow-memory-writes`, or do it with `reasonix memory`."
        )),
        Some(why) => Gate::Proceed(Decision::Ask {
            reason: format!("memory: {why}"),
        }),
    }
}
