//! Refusing facts that look like secrets: a fact is plain text on disk, sent to the model and
//! recalled into later conversations, so a credential must never become one. The check names
//! what it found (the kind and a masked start), never the secret itself.

use std::sync::OnceLock;

use regex::Regex;

struct Shape {
    what: &'static str,
    re: Regex,
}

fn shapes() -> &'static [Shape] {
    static SHAPES: OnceLock<Vec<Shape>> = OnceLock::new();
    SHAPES.get_or_init(|| {
        let table: [(&str, &str); 12] = [
            ("a private key block", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"),
            ("an API key (sk-…)", r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{20,}"),
            ("an AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
            ("a GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
            ("a GitLab token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
            ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
            ("a Google API key", r"\bAIza[0-9A-Za-z_\-]{35}"),
            ("a Stripe key", r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{20,}"),
            ("a JSON web token", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
            ("a bearer token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{20,}=*"),
            ("a credential in a URL", r"[a-z][a-z0-9+.\-]*://[^/\s:@]+:[^/\s:@]{3,}@"),
            (
                "a `password=` assignment",
                r#"(?i)(?:\b|_)(?:password|passwd|pwd|passphrase|secret|api[_\-]?key|access[_\-]?token|auth[_\-]?token|client[_\-]?secret)\b["']?\s*[:=]\s*["']?[^\s"'<>]{4,}"#,
            ),
        ];
        table
            .into_iter()
            .filter_map(|(what, re)| Regex::new(re).ok().map(|re| Shape { what, re }))
            .collect()
    })
}

/// What looks like a secret in `text`, as `kind ("abcd…")`, or `None`.
pub fn find_secret(text: &str) -> Option<String> {
    for s in shapes() {
        if let Some(m) = s.re.find(text) {
            let start: String = m.as_str().chars().take(4).collect();
            return Some(format!("{} ({start:?}…)", s.what));
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn common_shapes_are_found_and_named() {
        let cases = [
            ("key: sk-proj-abcdefghijklmnopqrstuvwx", "API key"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn", "private key"),
            ("-----BEGIN RSA PRIVATE KEY-----", "private key"),
            ("aws AKIAIOSFODNN7EXAMPLE here", "AWS"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "GitHub"),
            ("xoxb-1234567890-abcdef", "Slack"),
            ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "Google"),
            (
                "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012",
                "bearer",
            ),
            ("postgres://admin:hunter22@db:5432/x", "URL"),
            ("password=hunter22", "password"),
            ("DB_PASSWORD: 'correct-horse'", "password"),
            ("api_key = 12345678", "password"),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
                "JSON web token",
            ),
        ];
        for (text, want) in cases {
            let found = find_secret(text).unwrap_or_else(|| panic!("missed {text:?}"));
            assert!(found.contains(want), "{text:?} → {found}");
            assert!(
                !found.contains("hunter22"),
                "the secret itself is never echoed"
            );
        }
    }

    #[test]
    fn ordinary_notes_pass() {
        for text in [
            "We use Postgres 16; SQLite was ruled out (no concurrent writers).",
            "The password policy lives in docs/auth.md.",
            "Use `sk-` prefixed keys only through the gateway config.",
            "部署前先跑 cargo test，密码策略见 docs/auth.md。",
            "token budget per request is 8k",
        ] {
            assert_eq!(find_secret(text), None, "{text:?}");
        }
    }
}
