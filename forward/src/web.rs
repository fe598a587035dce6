//! `WebFetch` permission rules, read the same way by both binaries: the host decides a
//! `web_fetch` call with them, and the laptop (which resolves names and follows redirects)
//! checks every hop against them again.
//!
//! `WebFetch` names every fetch; `WebFetch(domain:docs.rs)` one host; `WebFetch(domain:*.rs)`
//! the hosts below a domain (not the domain itself). Hosts compare lowercased, without a
//! trailing dot; IP literals are hosts too (`WebFetch(domain:127.0.0.1)`).

use crate::policy::{Rule, Rules};

/// The tool name the rules call `WebFetch`.
pub const WEB_FETCH_TOOL: &str = "web_fetch";

/// What a rule says about web fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebSpec {
    /// `WebFetch`: every host.
    Any,
    /// `WebFetch(domain:PATTERN)`.
    Domain(String),
}

/// True when a rule's tool name means `web_fetch` (`WebFetch`, `web_fetch`, any case).
pub fn names_web_fetch(name: &str) -> bool {
    name.eq_ignore_ascii_case("webfetch") || name.eq_ignore_ascii_case(WEB_FETCH_TOOL)
}

/// Parses the specifier of a `WebFetch(...)` rule: `domain:HOST` or `domain:*.SUFFIX`.
pub fn parse_spec(spec: &str) -> Result<WebSpec, String> {
    let Some(domain) = spec.trim().strip_prefix("domain:") else {
        return Err("WebFetch rules name a domain: `WebFetch(domain:docs.rs)`".into());
    };
    let d = normalize_host(domain.trim());
    let body = d.strip_prefix("*.").unwrap_or(&d);
    if body.is_empty()
        || !body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
    {
        return Err(format!(
            "`{domain}` is not a host name (use `domain:docs.rs` or `domain:*.example.com`)"
        ));
    }
    Ok(WebSpec::Domain(d))
}

/// The web part of a rule, or None when the rule is about another tool (or is malformed).
pub fn rule_spec(rule: &Rule) -> Option<WebSpec> {
    let t = rule.as_str();
    match t.find('(') {
        None => names_web_fetch(t.trim()).then_some(WebSpec::Any),
        Some(i) => {
            if !names_web_fetch(t[..i].trim()) {
                return None;
            }
            parse_spec(t[i + 1..].strip_suffix(')')?).ok()
        }
    }
}

fn normalize_host(h: &str) -> String {
    h.trim_end_matches('.').to_ascii_lowercase()
}

/// Does `pattern` (from `domain:`) cover `host`?
pub fn domain_matches(pattern: &str, host: &str) -> bool {
    let host = normalize_host(host);
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => host == pattern,
    }
}

impl WebSpec {
    /// Does the rule cover `host`?
    pub fn covers(&self, host: &str) -> bool {
        match self {
            WebSpec::Any => true,
            WebSpec::Domain(p) => domain_matches(p, host),
        }
    }
}

/// The host of an `http(s)` URL, lowercased, without brackets for IPv6; None when the text
/// is not such a URL. (The laptop parses URLs fully; this is what the host's policy needs.)
pub fn url_host(url: &str) -> Option<String> {
    let rest = url.trim();
    let lower = rest.to_ascii_lowercase();
    let after = if lower.starts_with("https://") {
        &rest[8..]
    } else if lower.starts_with("http://") {
        &rest[7..]
    } else {
        return None;
    };
    let authority = after.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit('@').next().unwrap_or("");
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        hostport.split(':').next().unwrap_or("")
    };
    if host.is_empty() {
        return None;
    }
    Some(normalize_host(host))
}

/// What the rules say about fetching from `host`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostVerdict {
    /// A deny rule names it.
    Denied(String),
    /// An allow rule names it: `by_domain` when the rule names the host (or its domain)
    /// rather than every host. Only such a rule lets a fetch reach a private address.
    Allowed {
        /// The rule.
        rule: String,
        /// The rule has a `domain:` specifier.
        by_domain: bool,
    },
    /// No deny or allow rule names it (an ask rule, or none).
    Unlisted,
}

/// Deny rules first, then allow rules (ask rules make no difference to the laptop: the host
/// asked before the fetch started).
pub fn host_verdict(rules: &Rules, host: &str) -> HostVerdict {
    for r in &rules.deny {
        if rule_spec(r).is_some_and(|s| s.covers(host)) {
            return HostVerdict::Denied(r.as_str().to_string());
        }
    }
    let mut any = None;
    for r in &rules.allow {
        match rule_spec(r) {
            Some(s @ WebSpec::Domain(_)) if s.covers(host) => {
                return HostVerdict::Allowed {
                    rule: r.as_str().to_string(),
                    by_domain: true,
                }
            }
            Some(WebSpec::Any) => any = Some(r.as_str().to_string()),
            _ => {}
        }
    }
    match any {
        Some(rule) => HostVerdict::Allowed {
            rule,
            by_domain: false,
        },
        None => HostVerdict::Unlisted,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str]) -> Rules {
        Rules {
            allow: allow.iter().map(|r| Rule::parse(r).unwrap()).collect(),
            ask: vec![],
            deny: deny.iter().map(|r| Rule::parse(r).unwrap()).collect(),
        }
    }

    #[test]
    fn hosts_of_urls() {
        assert_eq!(
            url_host("https://Docs.RS/tokio").as_deref(),
            Some("docs.rs")
        );
        assert_eq!(
            url_host("http://u:p@h.example:8080/x?y").as_deref(),
            Some("h.example")
        );
        assert_eq!(url_host("http://[::1]:80/").as_deref(), Some("::1"));
        assert_eq!(
            url_host("http://127.0.0.1:9/a#b").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            url_host("http://example.com./").as_deref(),
            Some("example.com")
        );
        assert_eq!(url_host("ftp://x/"), None);
        assert_eq!(url_host("https:///x"), None);
    }

    #[test]
    fn domains_and_verdicts() {
        assert!(domain_matches("docs.rs", "DOCS.rs"));
        assert!(!domain_matches("docs.rs", "evil-docs.rs"));
        assert!(domain_matches("*.rs", "docs.rs"));
        assert!(!domain_matches("*.example.com", "example.com"));
        assert!(!domain_matches("*.example.com", "badexample.com"));
        assert!(parse_spec("docs.rs").is_err());
        assert!(parse_spec("domain:a b").is_err());
        let r = rules(
            &["WebFetch(domain:docs.rs)", "WebFetch"],
            &["WebFetch(domain:*.evil.com)"],
        );
        assert_eq!(
            host_verdict(&r, "x.evil.com"),
            HostVerdict::Denied("WebFetch(domain:*.evil.com)".into())
        );
        assert!(matches!(
            host_verdict(&r, "docs.rs"),
            HostVerdict::Allowed {
                by_domain: true,
                ..
            }
        ));
        assert!(matches!(
            host_verdict(&r, "other.org"),
            HostVerdict::Allowed {
                by_domain: false,
                ..
            }
        ));
        assert_eq!(
            host_verdict(&rules(&["Read"], &[]), "docs.rs"),
            HostVerdict::Unlisted
        );
    }
}
