//! One fact: a Markdown file with a small front matter. Parsing treats the file as hostile
//! input (a cloned repository may carry exported facts): every problem is an error that names
//! what is wrong, and nothing here panics.
//!
//! ```text
//! ---
//! id: m-3f9a1c20d4e7
//! revision: 2
//! type: project
//! scope: project
//! subject: database
//! keywords: postgres, sqlite
//! created: 2026-12-05T10:00:00Z
//! updated: 2026-12-06T09:30:00Z
//! session: s-1234
//! pinned: false
//! expires: 2027-06-30
//! ---
//! We use Postgres 16 everywhere; SQLite was ruled out on day 1 (no concurrent writers).
//! ```

use std::fmt;

/// Largest fact file that is read at all (bigger files are skipped with a notice).
pub const MAX_FILE_BYTES: usize = 64 * 1024;
/// Longest id.
pub const MAX_ID_LEN: usize = 64;

/// What a fact is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FactType {
    /// A preference of the user ("answer in Chinese", "no emojis").
    User,
    /// Feedback on the agent's work ("don't rewrite whole files").
    Feedback,
    /// A decision about the project ("Postgres, not SQLite").
    Project,
    /// A pointer to something ("the API docs are at …").
    Reference,
}

impl FactType {
    /// The name in the front matter.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Feedback => "feedback",
            Self::Project => "project",
            Self::Reference => "reference",
        }
    }

    /// Parses a front-matter value.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "user" => Some(Self::User),
            "feedback" => Some(Self::Feedback),
            "project" => Some(Self::Project),
            "reference" => Some(Self::Reference),
            _ => None,
        }
    }
}

/// Where a fact lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// With the workspace, on the host.
    Project,
    /// With the user, on the laptop.
    Global,
}

impl Scope {
    /// The name in the front matter.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Project => "project",
            Self::Global => "global",
        }
    }

    /// Parses a front-matter value.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "project" => Some(Self::Project),
            "global" => Some(Self::Global),
            _ => None,
        }
    }
}

/// One fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// Stable id; also the file name (`<id>.md`).
    pub id: String,
    /// 1 for a new fact; +1 each time its subject gets a new value.
    pub revision: u32,
    /// What it is about.
    pub kind: FactType,
    /// Where it lives.
    pub scope: Scope,
    /// Extra search words.
    pub keywords: Vec<String>,
    /// One active value per subject: a new value for it supersedes this one.
    pub subject: Option<String>,
    /// RFC 3339 time of the first revision.
    pub created: String,
    /// RFC 3339 time of this revision.
    pub updated: String,
    /// Session that wrote it.
    pub session: Option<String>,
    /// Joins the standing instructions at session start.
    pub pinned: bool,
    /// Date (`YYYY-MM-DD`, or an RFC 3339 time) after which it is no longer recalled.
    pub expires: Option<String>,
    /// The fact itself.
    pub body: String,
}

/// Why a fact file was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactError(pub String);

impl fmt::Display for FactError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad(msg: impl Into<String>) -> FactError {
    FactError(msg.into())
}

/// True for an id that is safe as a file name: 1–64 of `[A-Za-z0-9_-]`, not starting with `-`
/// (so never `..`, `/` or an option).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && !id.starts_with('-')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A fresh id: `m-` and 12 hex digits of a hash of the time, the process and a counter.
pub fn new_id(seed: &str) -> String {
    use sha2::{Digest, Sha256};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let r: u64 = rand::random();
    let digest = Sha256::digest(format!("{nanos}:{}:{n}:{r}:{seed}", std::process::id()));
    format!("m-{}", hex::encode(&digest[..6]))
}

/// Now, as RFC 3339 seconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Front-matter values are one line; a value that is not (or that starts a new key) is
/// flattened, so a fact can never smuggle in a second key.
fn one_line(s: &str) -> String {
    s.split(['\n', '\r'])
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
        .trim()
        .to_string()
}

impl Fact {
    /// Serialises the fact; [`Fact::parse`] of the result gives the fact back.
    pub fn to_markdown(&self) -> String {
        let mut out = String::from("---\n");
        out.push_str(&format!("id: {}\n", self.id));
        out.push_str(&format!("revision: {}\n", self.revision));
        out.push_str(&format!("type: {}\n", self.kind.as_str()));
        out.push_str(&format!("scope: {}\n", self.scope.as_str()));
        if let Some(s) = &self.subject {
            out.push_str(&format!("subject: {}\n", one_line(s)));
        }
        if !self.keywords.is_empty() {
            let kws: Vec<String> = self
                .keywords
                .iter()
                .map(|k| one_line(k).replace(',', " "))
                .collect();
            out.push_str(&format!("keywords: {}\n", kws.join(", ")));
        }
        out.push_str(&format!("created: {}\n", one_line(&self.created)));
        out.push_str(&format!("updated: {}\n", one_line(&self.updated)));
        if let Some(s) = &self.session {
            out.push_str(&format!("session: {}\n", one_line(s)));
        }
        out.push_str(&format!("pinned: {}\n", self.pinned));
        if let Some(e) = &self.expires {
            out.push_str(&format!("expires: {}\n", one_line(e)));
        }
        out.push_str("---\n");
        out.push_str(self.body.trim_end_matches('\n'));
        out.push('\n');
        out
    }

    /// Parses a fact file's bytes. Refuses binary content, oversized files, a missing or
    /// malformed front matter, an unsafe id, and unknown type/scope values.
    pub fn parse(bytes: &[u8]) -> Result<Fact, FactError> {
        if bytes.len() > MAX_FILE_BYTES {
            return Err(bad(format!(
                "the file is {} bytes; fact files are at most {MAX_FILE_BYTES} bytes (split it into smaller facts)",
                bytes.len()
            )));
        }
        if bytes.contains(&0) {
            return Err(bad(
                "the file is binary (it contains NUL bytes), not a Markdown fact",
            ));
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|_| bad("the file is not UTF-8 text, not a Markdown fact"))?;
        let text = text
            .strip_prefix('\u{feff}')
            .unwrap_or(text)
            .replace("\r\n", "\n");
        let rest = text
            .strip_prefix("---\n")
            .ok_or_else(|| bad("the file does not start with a `---` front matter line"))?;
        let (head, body) = match rest.find("\n---\n") {
            Some(i) => (&rest[..i], &rest[i + 5..]),
            None => match rest.strip_suffix("\n---") {
                Some(h) => (h, ""),
                None => return Err(bad("the front matter has no closing `---` line")),
            },
        };
        let mut f = Fact {
            id: String::new(),
            revision: 1,
            kind: FactType::Project,
            scope: Scope::Project,
            keywords: Vec::new(),
            subject: None,
            created: String::new(),
            updated: String::new(),
            session: None,
            pinned: false,
            expires: None,
            body: body.trim_end_matches('\n').to_string(),
        };
        let (mut has_type, mut has_scope) = (false, false);
        for (n, line) in head.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((k, v)) = line.split_once(':') else {
                return Err(bad(format!(
                    "front matter line {} is not `key: value`: {:?}",
                    n + 2,
                    truncate(line, 60)
                )));
            };
            let v = v.trim().trim_matches('"').trim_matches('\'').trim();
            let at = |e: FactError| bad(format!("front matter line {}: {}", n + 2, e.0));
            match k.trim() {
                "id" => f.id = v.to_string(),
                "revision" => {
                    f.revision = v.parse().ok().filter(|r| *r >= 1).ok_or_else(|| {
                        at(bad(format!(
                            "revision {v:?} is not a positive whole number"
                        )))
                    })?
                }
                "type" => {
                    has_type = true;
                    f.kind = FactType::parse(v).ok_or_else(|| {
                        at(bad(format!(
                            "type {v:?} is not one of user, feedback, project, reference"
                        )))
                    })?
                }
                "scope" => {
                    has_scope = true;
                    f.scope = Scope::parse(v)
                        .ok_or_else(|| at(bad(format!("scope {v:?} is not project or global"))))?
                }
                "keywords" => {
                    f.keywords = v
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .split(',')
                        .map(|k| k.trim().trim_matches('"').trim().to_string())
                        .filter(|k| !k.is_empty())
                        .collect()
                }
                "subject" => f.subject = Some(v.to_string()).filter(|s| !s.is_empty()),
                "created" => f.created = v.to_string(),
                "updated" => f.updated = v.to_string(),
                "session" => f.session = Some(v.to_string()).filter(|s| !s.is_empty()),
                "pinned" => {
                    f.pinned = match v {
                        "true" | "yes" => true,
                        "false" | "no" | "" => false,
                        _ => return Err(at(bad(format!("pinned {v:?} is not true or false")))),
                    }
                }
                "expires" => f.expires = Some(v.to_string()).filter(|s| !s.is_empty()),
                // Unknown keys are ignored: a newer writer may add some.
                _ => {}
            }
        }
        if f.id.is_empty() {
            return Err(bad("the front matter has no `id`"));
        }
        if !valid_id(&f.id) {
            return Err(bad(format!(
                "id {:?} is not allowed (use 1–64 letters, digits, `-` or `_`; no `/` or `..`)",
                truncate(&f.id, 80)
            )));
        }
        if !has_type || !has_scope {
            return Err(bad("the front matter needs both `type` and `scope`"));
        }
        if f.body.trim().is_empty() {
            return Err(bad("the fact has no text after its front matter"));
        }
        if f.updated.is_empty() {
            f.updated = f.created.clone();
        }
        Ok(f)
    }

    /// True when `expires` lies before `today` (`YYYY-MM-DD…`; compared as text, which orders
    /// RFC 3339 dates correctly).
    pub fn expired(&self, now: &str) -> bool {
        match &self.expires {
            Some(e) => e.as_str() < now.get(..e.len().min(now.len())).unwrap_or(now),
            None => false,
        }
    }

    /// The text search sees: subject, keywords and body.
    pub fn search_text(&self) -> String {
        let mut s = String::new();
        if let Some(sub) = &self.subject {
            s.push_str(sub);
            s.push('\n');
        }
        for k in &self.keywords {
            s.push_str(k);
            s.push(' ');
        }
        s.push('\n');
        s.push_str(&self.body);
        s
    }
}

/// At most `max` characters of `s`.
pub fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample() -> Fact {
        Fact {
            id: "m-abc".into(),
            revision: 2,
            kind: FactType::Project,
            scope: Scope::Project,
            keywords: vec!["postgres".into(), "db".into()],
            subject: Some("database".into()),
            created: "2026-12-05T10:00:00Z".into(),
            updated: "2026-12-06T10:00:00Z".into(),
            session: Some("s-1".into()),
            pinned: true,
            expires: Some("2027-01-01".into()),
            body: "We use Postgres.\n\n---\nnot a front matter".into(),
        }
    }

    #[test]
    fn round_trip() {
        let f = sample();
        assert_eq!(Fact::parse(f.to_markdown().as_bytes()).unwrap(), f);
    }

    #[test]
    fn a_value_cannot_smuggle_a_key() {
        let mut f = sample();
        f.subject = Some("x\nscope: global".into());
        let back = Fact::parse(f.to_markdown().as_bytes()).unwrap();
        assert_eq!(back.scope, Scope::Project);
        assert_eq!(back.subject.as_deref(), Some("x scope: global"));
    }

    #[test]
    fn hostile_files_are_refused_with_the_reason() {
        let cases: &[(&[u8], &str)] = &[
            (b"no front matter", "does not start"),
            (
                b"---\nid: a\ntype: project\nscope: project\nbody",
                "no closing",
            ),
            (
                b"---\nid: ../x\ntype: project\nscope: project\n---\nhi",
                "not allowed",
            ),
            (
                b"---\nid: a/b\ntype: project\nscope: project\n---\nhi",
                "not allowed",
            ),
            (b"---\nid: a\ntype: secret\nscope: project\n---\nhi", "type"),
            (b"---\nid: a\ntype: project\nscope: world\n---\nhi", "scope"),
            (b"---\nid: a\ntype: project\n---\nhi", "both"),
            (
                b"---\nid: a\ntype: project\nscope: project\n---\n\n",
                "no text",
            ),
            (b"---\nid: a\x00\n---\n", "binary"),
            (
                b"---\nid: a\ntype: project\nscope: project\nrevision: -1\n---\nx",
                "revision",
            ),
            (b"---\nthis line has no colon\n---\nx", "not `key: value`"),
            (&[0xff, 0xfe, 0x41], "UTF-8"),
        ];
        for (bytes, want) in cases {
            let e = Fact::parse(bytes).unwrap_err();
            assert!(
                e.0.contains(want),
                "{:?}: {e}",
                String::from_utf8_lossy(bytes)
            );
        }
        let huge = vec![b'a'; MAX_FILE_BYTES + 1];
        assert!(Fact::parse(&huge).unwrap_err().0.contains("at most"));
    }

    #[test]
    fn ids_and_expiry() {
        assert!(valid_id("m-0a1b"));
        for bad in ["", "..", "a/b", "-rf", "a b", &"x".repeat(65)] {
            assert!(!valid_id(bad), "{bad:?}");
        }
        let id = new_id("x");
        assert!(valid_id(&id) && id.len() == 14, "{id}");
        let f = sample();
        assert!(!f.expired("2026-12-31T00:00:00Z"));
        assert!(f.expired("2027-01-02T00:00:00Z"));
    }
}
