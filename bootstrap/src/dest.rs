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
            let (user, hostport) = uri_user(authority).map_err(|r| err(&r))?;
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
        if host.chars().any(|c| c == '/' || c == '@') {
            return Err(format!("host name '{host}' contains '/' or '@'"));
        }
        // OpenSSH's own check (CVE-2023-51385): these names end up in `%h`/`%r` tokens that a
        // ProxyCommand or `Match exec` hands to a shell.
        if !valid_hostname(&host) {
            return Err(format!(
                "host name '{}' contains a space, a control character or a shell metacharacter ({}), which OpenSSH refuses too",
                host.escape_debug(),
                HOST_METACHARACTERS
            ));
        }
        if let Some(u) = &user {
            if u.is_empty() {
                return Err("empty user before '@'".into());
            }
            if u.chars().any(|c| c.is_whitespace() || c == ':') || !valid_ruser(u) {
                return Err(format!(
                    "user name '{}' starts with '-', ends with '\\' or contains a space, ':', a control character or a shell metacharacter ({}); OpenSSH refuses such names too",
                    u.escape_debug(),
                    USER_METACHARACTERS
                ));
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

/// Characters OpenSSH refuses in a host name given on the command line (`valid_hostname`).
const HOST_METACHARACTERS: &str = "'`\"$\\;&<>|(){},";
/// Characters OpenSSH refuses in a remote user name given on the command line
/// (`valid_ruser`).
const USER_METACHARACTERS: &str = "'`\";&<>|(){}";

/// OpenSSH's `valid_hostname` for a host given on the command line: no shell
/// metacharacters, spaces or control characters, no leading `-`.
pub(crate) fn valid_hostname(s: &str) -> bool {
    !s.starts_with('-')
        && !s.chars().any(|c| {
            HOST_METACHARACTERS.contains(c) || c.is_ascii_whitespace() || c.is_ascii_control()
        })
}

/// OpenSSH's `valid_ruser` for a user given on the command line: no shell metacharacters
/// or control characters, no leading `-`, no `-` right after a space, no trailing `\`.
pub(crate) fn valid_ruser(s: &str) -> bool {
    if s.starts_with('-') || s.ends_with('\\') {
        return false;
    }
    let b = s.as_bytes();
    !b.iter().enumerate().any(|(i, &c)| {
        c.is_ascii_control()
            || USER_METACHARACTERS.as_bytes().contains(&c)
            || (c.is_ascii_whitespace() && b.get(i + 1) == Some(&b'-'))
    })
}

/// The user part of an `ssh://` authority as OpenSSH's `parse_uri` reads it: up to the
/// first `@`, `;connection-parameters` dropped, `%XX` and `+` decoded.
fn uri_user(authority: &str) -> Result<(Option<String>, &str), String> {
    let Some((raw, host)) = authority.split_once('@') else {
        return Ok((None, authority));
    };
    let raw = raw.split(';').next().unwrap_or("");
    if raw.is_empty() {
        return Err("empty user before '@'".into());
    }
    let mut out = Vec::with_capacity(raw.len());
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = raw.get(i + 1..i + 3).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(c) if c != 0 && hex.len() == 2 => out.push(c),
                    _ => return Err(format!("bad %-escape in user '{raw}'")),
                }
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    let user = String::from_utf8(out).map_err(|_| format!("user '{raw}' is not UTF-8"))?;
    Ok((Some(user), host))
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
        // As OpenSSH's `parse_uri`: the user ends at the first `@`, is %-decoded and loses
        // `;connection-parameters`.
        assert_eq!(
            Destination::parse("ssh://a%40b@box:2200").unwrap(),
            d(Some("a@b"), "box", Some(2200), None)
        );
        assert_eq!(
            Destination::parse("ssh://me;fp=x@box").unwrap(),
            d(Some("me"), "box", None, None)
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
            "ssh://a@b@box:2200",
            "ssh://me%3bx@box",
            "ssh://me%zz@box",
            // shell metacharacters, as OpenSSH refuses them (CVE-2023-51385)
            "a;b",
            "box$(id)",
            "me@box`id`",
            "h|x",
            "h,x",
            "h(x)",
            "h{x}",
            "h\\x:/w",
            "u;x@box",
            "u'@box",
            "u\"@box",
            "u|x@box",
            "u(x)@box",
            "u&x@box",
            "u<x@box",
            "-u@box",
            "u\\@box",
            "ssh://u;x@h;x",
            "ssh://u%60id%60@box",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad} should fail");
        }
        let e = Destination::parse("me@box;id").unwrap_err();
        assert!(e.to_string().contains("shell metacharacter"), "{e}");
        // Characters OpenSSH lets through in a user name stay usable.
        assert_eq!(
            Destination::parse("u$x@box").unwrap(),
            d(Some("u$x"), "box", None, None)
        );
        assert_eq!(
            Destination::parse("u,v@box").unwrap(),
            d(Some("u,v"), "box", None, None)
        );
        let e = Destination::parse("ssh://h:abc").unwrap_err();
        assert!(e.to_string().contains("invalid port"), "{e}");
    }
}
