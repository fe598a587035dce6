//! Parsing of `[user@]host[:path]` and `ssh://[user@]host[:port]/path` destinations.

use std::fmt;
use std::str::FromStr;

/// Where to connect and which workspace to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// Remote user, if given in the destination.
    pub user: Option<String>,
    /// Host as typed (an ssh_config alias, a name or an address; IPv6 without brackets).
    pub host: String,
    /// Port, only possible in the `ssh://` form.
    pub port: Option<u16>,
    /// Workspace path. Absolute when it starts with `/`, otherwise relative to the remote
    /// home; `None` means the remote home itself.
    pub path: Option<String>,
}

/// Why a destination string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid destination '{input}': {reason} (expected [user@]host[:path] or ssh://[user@]host[:port]/path)")]
pub struct DestinationError {
    /// The text that was parsed.
    pub input: String,
    /// What was wrong with it.
    pub reason: String,
}

impl Destination {
    /// Parse either destination form.
    pub fn parse(input: &str) -> Result<Self, DestinationError> {
        let err = |reason: &str| DestinationError {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        if input.trim() != input || input.is_empty() {
            return Err(err("empty or surrounded by spaces"));
        }
        if let Some(rest) = input.strip_prefix("ssh://") {
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], Some(&rest[i..])),
                None => (rest, None),
            };
            let (user, hostport) = split_user(authority);
            let (host, port) = split_host_port(hostport).map_err(|r| err(&r))?;
            let path = path.and_then(|p| {
                // `ssh://h/~/x` and `ssh://h/~` are home-relative, as in git URLs.
                let p = if p == "/~" || p == "/" {
                    return if p == "/" {
                        Some("/".to_string())
                    } else {
                        None
                    };
                } else if let Some(rel) = p.strip_prefix("/~/") {
                    rel.to_string()
                } else {
                    p.to_string()
                };
                (!p.is_empty()).then_some(p)
            });
            return Self::checked(user, host, port, path).map_err(|r| err(&r));
        }
        // scp form. The user ends at the last '@' before any ':' or '[' (OpenSSH splits
        // `user@domain@host` at the last '@').
        let first_sep = input.find([':', '[']).unwrap_or(input.len());
        let (user, rest) = match input[..first_sep].rfind('@') {
            Some(i) => (Some(&input[..i]), &input[i + 1..]),
            None => (None, input),
        };
        let (host, path) = if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').ok_or_else(|| err("unclosed '['"))?;
            let host = &after[..end];
            let tail = &after[end + 1..];
            let path = match tail.strip_prefix(':') {
                Some(p) => Some(p),
                None if tail.is_empty() => None,
                None => return Err(err("unexpected text after ']'")),
            };
            (host, path)
        } else {
            match rest.find(':') {
                Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                None => (rest, None),
            }
        };
        let path = path.filter(|p| !p.is_empty()).map(|p| {
            let p = p.strip_prefix("~/").unwrap_or(p);
            p.to_string()
        });
        let path = path.filter(|p| p != "~" && !p.is_empty());
        Self::checked(user.map(str::to_string), host.to_string(), None, path).map_err(|r| err(&r))
    }

    fn checked(
        user: Option<String>,
        host: String,
        port: Option<u16>,
        path: Option<String>,
    ) -> Result<Self, String> {
        if host.is_empty() {
            return Err("missing host".into());
        }
        if host.starts_with('-') {
            return Err("host must not start with '-'".into());
        }
        if host
            .chars()
            .any(|c| c.is_whitespace() || c == '/' || c == '@')
        {
            return Err("host contains an invalid character".into());
        }
        if let Some(u) = &user {
            if u.is_empty() {
                return Err("empty user before '@'".into());
            }
            if u.starts_with('-') || u.chars().any(|c| c.is_whitespace() || c == ':') {
                return Err("user contains an invalid character".into());
            }
        }
        Ok(Self {
            user,
            host,
            port,
            path,
        })
    }
}

fn split_user(authority: &str) -> (Option<String>, &str) {
    match authority.rfind('@') {
        Some(i) => (Some(authority[..i].to_string()), &authority[i + 1..]),
        None => (None, authority),
    }
}

/// Split `host`, `host:port`, `[v6]` or `[v6]:port`.
pub(crate) fn split_host_port(s: &str) -> Result<(String, Option<u16>), String> {
    if let Some(after) = s.strip_prefix('[') {
        let end = after.find(']').ok_or("unclosed '['")?;
        let host = after[..end].to_string();
        let tail = &after[end + 1..];
        let port = match tail.strip_prefix(':') {
            Some(p) => Some(parse_port(p)?),
            None if tail.is_empty() => None,
            None => return Err("unexpected text after ']'".into()),
        };
        return Ok((host, port));
    }
    match s.rfind(':') {
        // More than one ':' without brackets is a bare IPv6 address.
        Some(i) if s[..i].contains(':') => Ok((s.to_string(), None)),
        Some(i) => Ok((s[..i].to_string(), Some(parse_port(&s[i + 1..])?))),
        None => Ok((s.to_string(), None)),
    }
}

pub(crate) fn parse_port(p: &str) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("invalid port '{p}'")),
        Ok(n) => Ok(n),
    }
}

impl FromStr for Destination {
    type Err = DestinationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(p) = self.port {
            write!(f, " (port {p})")?;
        }
        if let Some(path) = &self.path {
            write!(f, ":{path}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(user: Option<&str>, host: &str, port: Option<u16>, path: Option<&str>) -> Destination {
        Destination {
            user: user.map(Into::into),
            host: host.into(),
            port,
            path: path.map(Into::into),
        }
    }

    #[test]
    fn scp_forms() {
        assert_eq!(
            Destination::parse("box").unwrap(),
            d(None, "box", None, None)
        );
        assert_eq!(
            Destination::parse("me@box:/repo").unwrap(),
            d(Some("me"), "box", None, Some("/repo"))
        );
        assert_eq!(
            Destination::parse("me@box:src/x").unwrap(),
            d(Some("me"), "box", None, Some("src/x"))
        );
        assert_eq!(
            Destination::parse("box:~/src").unwrap(),
            d(None, "box", None, Some("src"))
        );
        assert_eq!(
            Destination::parse("me@box:").unwrap(),
            d(Some("me"), "box", None, None)
        );
        assert_eq!(
            Destination::parse("me@[::1]:/tmp/ws").unwrap(),
            d(Some("me"), "::1", None, Some("/tmp/ws"))
        );
        assert_eq!(
            Destination::parse("u@127.0.0.1:/a@b").unwrap(),
            d(Some("u"), "127.0.0.1", None, Some("/a@b"))
        );
        assert_eq!(
            Destination::parse("me@corp.example@box:/w").unwrap(),
            d(Some("me@corp.example"), "box", None, Some("/w"))
        );
    }

    #[test]
    fn url_forms() {
        assert_eq!(
            Destination::parse("ssh://me@box:2222/repo").unwrap(),
            d(Some("me"), "box", Some(2222), Some("/repo"))
        );
        assert_eq!(
            Destination::parse("ssh://box").unwrap(),
            d(None, "box", None, None)
        );
        assert_eq!(
            Destination::parse("ssh://a@b@box:2200").unwrap(),
            d(Some("a@b"), "box", Some(2200), None)
        );
        assert_eq!(
            Destination::parse("ssh://box/~/w").unwrap(),
            d(None, "box", None, Some("w"))
        );
        assert_eq!(
            Destination::parse("ssh://[::1]:22/x").unwrap(),
            d(None, "::1", Some(22), Some("/x"))
        );
    }

    #[test]
    fn refusals() {
        for bad in [
            "",
            "@box",
            "-oProxyCommand=x",
            "ssh://box:0/x",
            "ssh://box:99999",
            "me@[::1",
            " box",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad} should fail");
        }
        let e = Destination::parse("ssh://h:abc").unwrap_err();
        assert!(e.to_string().contains("invalid port"), "{e}");
    }
}
