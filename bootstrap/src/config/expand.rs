//! `~`, `${VAR}` and `%` token expansion, OpenSSH's `tilde_expand` and `percent_expand`.

use std::path::{Path, PathBuf};

use super::system::home_of;
use crate::platform::Os;

/// `~`, `~/x`, `~user/x` as OpenSSH's `tilde_expand` does (and `~\x` on Windows).
pub(super) fn tilde_expand(s: &str, home: &Path) -> Result<String, String> {
    tilde_expand_for(Os::THIS, s, &home.display().to_string(), home_of)
}

/// [`tilde_expand`] by the rules of `os` (OpenSSH for Windows also takes `\` after the `~`
/// and writes `\` between the home and the rest), with `home_of` for `~user`.
pub(super) fn tilde_expand_for(
    os: Os,
    s: &str,
    home: &str,
    home_of: impl Fn(&str) -> Option<PathBuf>,
) -> Result<String, String> {
    let Some(rest) = s.strip_prefix('~') else {
        return Ok(s.to_string());
    };
    let is_sep = |c: char| os.is_separator(c);
    let (dir, path) = if rest.is_empty() || rest.starts_with(is_sep) {
        (home.to_string(), rest.trim_start_matches(is_sep))
    } else {
        let (user, path) = match rest.find(is_sep) {
            Some(i) => (&rest[..i], rest[i + 1..].trim_start_matches(is_sep)),
            None => (rest, ""),
        };
        let dir = home_of(user).ok_or_else(|| format!("no such user '{user}' for '~{user}'"))?;
        (dir.display().to_string(), path)
    };
    if path.is_empty() {
        return Ok(dir);
    }
    let sep = if dir.ends_with(is_sep) {
        String::new()
    } else {
        os.separator().to_string()
    };
    Ok(format!("{dir}{sep}{path}"))
}

/// OpenSSH's `percent_expand` (and `${VAR}` when `dollar`): every `%x` must be in `tokens`.
pub(crate) fn expand(s: &str, tokens: &[(char, &str)], dollar: bool) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if dollar && rest.starts_with("${") {
            let body = &rest[2..];
            let end = body
                .find('}')
                .ok_or_else(|| format!("'${{' without closing '}}' in '{s}'"))?;
            let name = &body[..end];
            if name.is_empty() {
                return Err("empty ${} variable name".into());
            }
            let value = std::env::var(name)
                .map_err(|_| format!("environment variable {name} is not set"))?;
            out.push_str(&value);
            rest = &body[end + 1..];
            continue;
        }
        rest = &rest[c.len_utf8()..];
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(t) = rest.chars().next() else {
            return Err("'%' at the end of the value".into());
        };
        rest = &rest[t.len_utf8()..];
        if t == '%' {
            out.push('%');
            continue;
        }
        match tokens.iter().find(|(k, _)| *k == t) {
            Some((_, v)) => out.push_str(v),
            None => return Err(format!("unknown token %{t}")),
        }
    }
    Ok(out)
}

/// `${VAR}` only (validating `IdentityAgent` values as OpenSSH does at parse time).
pub(super) fn dollar_only(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let body = &rest[i + 2..];
        let end = body
            .find('}')
            .ok_or_else(|| format!("'${{' without closing '}}' in '{s}'"))?;
        let name = &body[..end];
        if name.is_empty() {
            return Err("empty ${} variable name".into());
        }
        out.push_str(
            &std::env::var(name).map_err(|_| format!("environment variable {name} is not set"))?,
        );
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

pub(super) fn valid_env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.as_bytes()[0].is_ascii_digit()
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `%C`: SHA-1 over local host name, remote host, port and remote user, in hex.
pub(super) fn connection_hash(this_host: &str, host: &str, port: &str, user: &str) -> String {
    use sha1::Digest as _;
    let mut h = sha1::Sha1::new();
    for part in [this_host, host, port, user] {
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nobody(_: &str) -> Option<PathBuf> {
        None
    }

    #[test]
    fn tilde_on_unix_and_macos() {
        let t = |s| tilde_expand_for(Os::Unix, s, "/Users/me", nobody);
        assert_eq!(t("~/.ssh/id_ed25519").unwrap(), "/Users/me/.ssh/id_ed25519");
        assert_eq!(t("~").unwrap(), "/Users/me");
        // A backslash is a file name character on Unix: `~\x` is user `\x`.
        assert!(t("~\\.ssh").is_err());
        let alice = |u: &str| (u == "alice").then(|| PathBuf::from("/home/alice"));
        assert_eq!(
            tilde_expand_for(Os::Unix, "~alice/k", "/Users/me", alice).unwrap(),
            "/home/alice/k"
        );
    }

    #[test]
    fn tilde_on_windows_takes_both_separators() {
        let t = |s| tilde_expand_for(Os::Windows, s, r"C:\Users\me", nobody);
        assert_eq!(
            t(r"~\.ssh\id_ed25519").unwrap(),
            r"C:\Users\me\.ssh\id_ed25519"
        );
        assert_eq!(
            t("~/.ssh/id_ed25519").unwrap(),
            r"C:\Users\me\.ssh/id_ed25519"
        );
        assert_eq!(t(r"C:\keys\id").unwrap(), r"C:\keys\id");
        assert!(t(r"~bob\k").unwrap_err().contains("~bob"));
        assert_eq!(
            tilde_expand_for(Os::Windows, r"~\x", r"C:\", nobody).unwrap(),
            r"C:\x"
        );
    }
}
