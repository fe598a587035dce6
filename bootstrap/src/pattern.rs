//! OpenSSH's pattern matching (`match.c`), shared by ssh_config and known_hosts.
//!
//! Three functions with OpenSSH's exact case rules, because the callers differ:
//! - `Host` lines use [`match_pattern`] per word: byte-wise and case-sensitive;
//! - `Match host`/`originalhost` and known_hosts host fields use [`match_hostname`]: the
//!   name and the comma-separated patterns are both lowercased;
//! - `Match user`/`localuser` use [`match_pattern_list`] without lowercasing.

/// Result of matching a comma-separated pattern list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListMatch {
    /// A `!pattern` matched: the whole list fails, whatever else matches.
    Negated,
    /// No pattern matched.
    NoMatch,
    /// A positive pattern matched and no negated one did.
    Match,
}

impl ListMatch {
    /// True only for [`ListMatch::Match`].
    pub(crate) fn is_match(self) -> bool {
        matches!(self, ListMatch::Match)
    }
}

/// `*` matches any run of bytes (also empty), `?` exactly one byte; everything else literally.
pub(crate) fn match_pattern(text: &str, pattern: &str) -> bool {
    let t = text.as_bytes();
    let p = pattern.as_bytes();
    let (mut ti, mut pi) = (0usize, 0usize);
    // Position of the last `*` and the text index it was tried at (classic backtracking).
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && (p[pi] == b'?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// A comma-separated list of patterns, each optionally negated with `!`. With `lowercase`,
/// the patterns (not the text) are lowercased first, as OpenSSH's `dolower` does.
pub(crate) fn match_pattern_list(text: &str, list: &str, lowercase: bool) -> ListMatch {
    let mut got_positive = false;
    for raw in list.split(',') {
        let (negated, pat) = match raw.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, raw),
        };
        let pat = if lowercase {
            pat.to_ascii_lowercase()
        } else {
            pat.to_string()
        };
        if match_pattern(text, &pat) {
            if negated {
                return ListMatch::Negated;
            }
            got_positive = true;
        }
    }
    if got_positive {
        ListMatch::Match
    } else {
        ListMatch::NoMatch
    }
}

/// Host-name matching: the name is lowercased and the pattern list is matched lowercased.
pub(crate) fn match_hostname(host: &str, list: &str) -> ListMatch {
    match_pattern_list(&host.to_ascii_lowercase(), list, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globbing() {
        assert!(match_pattern("a.b.example.com", "*.example.com"));
        assert!(match_pattern("host", "h?st"));
        assert!(
            !match_pattern("HOST", "h?st"),
            "match_pattern is case-sensitive"
        );
        assert!(!match_pattern("hoost", "h?st"));
        assert!(match_pattern("", "*"));
        assert!(match_pattern("abc", "a**c"));
        assert!(!match_pattern("ab", "a?b"));
    }

    #[test]
    fn lists_and_case() {
        assert_eq!(
            match_pattern_list("good", "*,!bad", false),
            ListMatch::Match
        );
        assert_eq!(
            match_pattern_list("bad", "*,!bad", false),
            ListMatch::Negated
        );
        assert_eq!(match_pattern_list("x", "a,b", false), ListMatch::NoMatch);
        assert_eq!(match_pattern_list("Bob", "bob", false), ListMatch::NoMatch);
        assert_eq!(match_hostname("Box.Example", "*.EXAMPLE"), ListMatch::Match);
    }
}
