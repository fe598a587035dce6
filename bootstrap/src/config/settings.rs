//! Keyword table and value parsing: what one ssh_config keyword does to the settings
//! (first value wins), with OpenSSH's checks of every value.

use super::expand::{dollar_only, valid_env_name};
use super::system::service_port;
use super::{check_jump, ConfigError, StrictHostKeyChecking};
use crate::dest::parse_port;

/// `CanonicalizeHostname`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Canonicalize {
    No,
    Yes,
    Always,
}

/// OpenSSH's `SSH_MAX_IDENTITY_FILES`.
const MAX_IDENTITY_FILES: usize = 100;

/// Raw settings while resolving; `None` = not set yet (first value wins).
#[derive(Debug, Default, Clone)]
pub(super) struct Settings {
    pub(super) hostname: Option<String>,
    pub(super) user: Option<String>,
    pub(super) port: Option<u16>,
    /// `IdentityFile` values as written, each with whether the user gave it (command line or
    /// user config) rather than the system file: OpenSSH drops a repeat only within the
    /// same kind.
    pub(super) identity_files: Vec<(String, bool)>,
    pub(super) identities_only: Option<bool>,
    pub(super) identity_agent: Option<String>,
    /// `ForwardAgent`: on/off, and the agent to forward when a path or `$VAR` was given.
    pub(super) forward_agent: Option<(bool, Option<String>)>,
    pub(super) proxy_jump: Option<String>,
    pub(super) proxy_command: Option<String>,
    pub(super) user_known_hosts: Option<Vec<String>>,
    pub(super) global_known_hosts: Option<Vec<String>>,
    pub(super) strict: Option<StrictHostKeyChecking>,
    pub(super) hash_known_hosts: Option<bool>,
    /// Seconds; 0 = `none`.
    pub(super) connect_timeout: Option<u64>,
    pub(super) server_alive_interval: Option<u64>,
    pub(super) server_alive_count_max: Option<u32>,
    pub(super) batch_mode: Option<bool>,
    pub(super) number_of_password_prompts: Option<u32>,
    pub(super) pubkey: Option<bool>,
    pub(super) password: Option<bool>,
    pub(super) kbd: Option<bool>,
    pub(super) preferred: Option<String>,
    pub(super) host_key_alias: Option<String>,
    pub(super) canonicalize: Option<Canonicalize>,
    pub(super) ignore_unknown: Option<String>,
    /// `RefuseConnection` (OpenSSH 10) and where it was set.
    pub(super) refuse_connection: Option<(bool, String)>,
}

/// Every keyword OpenSSH's client accepts: 9.2's list (including deprecated and unsupported
/// ones, which it ignores, and Debian's GSSAPI additions), the keywords newer releases added
/// (`ChannelTimeout`, `ObscureKeystrokeTiming`, `RefuseConnection`, `Tag`,
/// `VersionAddendum`, `WarnWeakCrypto`) and Apple's `UseKeychain`, so a config written for
/// another ssh still reads. Keywords here that [`Settings::apply`] does not handle are
/// accepted and ignored.
pub(super) const KNOWN_KEYWORDS: &[&str] = &[
    "protocol",
    "cipher",
    "fallbacktorsh",
    "globalknownhostsfile2",
    "rhostsauthentication",
    "userknownhostsfile2",
    "useroaming",
    "usersh",
    "useprivilegedport",
    "afstokenpassing",
    "kerberosauthentication",
    "kerberostgtpassing",
    "rsaauthentication",
    "rhostsrsaauthentication",
    "compressionlevel",
    "gssapiauthentication",
    "gssapidelegatecredentials",
    "gssapikeyexchange",
    "gssapiclientidentity",
    "gssapiserveridentity",
    "gssapirenewalforcesrekey",
    "gssapikexalgorithms",
    "gssapitrustdns",
    "pkcs11provider",
    "smartcarddevice",
    "forwardagent",
    "forwardx11",
    "forwardx11trusted",
    "forwardx11timeout",
    "exitonforwardfailure",
    "xauthlocation",
    "gatewayports",
    "passwordauthentication",
    "kbdinteractiveauthentication",
    "kbdinteractivedevices",
    "challengeresponseauthentication",
    "skeyauthentication",
    "tisauthentication",
    "pubkeyauthentication",
    "dsaauthentication",
    "hostbasedauthentication",
    "identityfile",
    "identityfile2",
    "identitiesonly",
    "certificatefile",
    "addkeystoagent",
    "identityagent",
    "hostname",
    "hostkeyalias",
    "proxycommand",
    "port",
    "ciphers",
    "macs",
    "remoteforward",
    "localforward",
    "permitremoteopen",
    "user",
    "host",
    "match",
    "escapechar",
    "globalknownhostsfile",
    "userknownhostsfile",
    "connectionattempts",
    "batchmode",
    "checkhostip",
    "stricthostkeychecking",
    "compression",
    "tcpkeepalive",
    "keepalive",
    "numberofpasswordprompts",
    "syslogfacility",
    "loglevel",
    "logverbose",
    "dynamicforward",
    "preferredauthentications",
    "hostkeyalgorithms",
    "casignaturealgorithms",
    "bindaddress",
    "bindinterface",
    "clearallforwardings",
    "enablesshkeysign",
    "verifyhostkeydns",
    "nohostauthenticationforlocalhost",
    "rekeylimit",
    "connecttimeout",
    "addressfamily",
    "serveraliveinterval",
    "serveralivecountmax",
    "sendenv",
    "setenv",
    "controlpath",
    "controlmaster",
    "controlpersist",
    "hashknownhosts",
    "include",
    "tunnel",
    "tunneldevice",
    "localcommand",
    "permitlocalcommand",
    "remotecommand",
    "visualhostkey",
    "kexalgorithms",
    "ipqos",
    "requesttty",
    "sessiontype",
    "stdinnull",
    "forkafterauthentication",
    "proxyusefdpass",
    "canonicaldomains",
    "canonicalizefallbacklocal",
    "canonicalizehostname",
    "canonicalizemaxdots",
    "canonicalizepermittedcnames",
    "streamlocalbindmask",
    "streamlocalbindunlink",
    "revokedhostkeys",
    "fingerprinthash",
    "updatehostkeys",
    "hostbasedacceptedalgorithms",
    "hostbasedkeytypes",
    "pubkeyacceptedalgorithms",
    "pubkeyacceptedkeytypes",
    "ignoreunknown",
    "proxyjump",
    "securitykeyprovider",
    "knownhostscommand",
    "requiredrsasize",
    "enableescapecommandline",
    "channeltimeout",
    "obscurekeystroketiming",
    "refuseconnection",
    "tag",
    "versionaddendum",
    "warnweakcrypto",
    "usekeychain",
];

pub(super) fn bad(origin: &str, key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::BadValue {
        origin: origin.to_string(),
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

pub(super) fn syntax(origin: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Syntax {
        origin: origin.to_string(),
        reason: reason.into(),
    }
}

/// OpenSSH's yes/no flag (`yes`, `no`, `true`, `false`, any case).
pub(super) fn parse_flag(origin: &str, key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" => Ok(true),
        "no" | "false" => Ok(false),
        _ => Err(bad(origin, key, v, "expected yes or no")),
    }
}

/// OpenSSH's `convtime`: `90`, `90s`, `10m`, `1h30m`, `2d`, `1w` (suffix in any case).
pub(super) fn parse_time(origin: &str, key: &str, v: &str) -> Result<u64, ConfigError> {
    let err = || {
        bad(
            origin,
            key,
            v,
            "expected a time such as 30, 30s, 5m or 1h30m",
        )
    };
    if v.is_empty() {
        return Err(err());
    }
    let mut total: u64 = 0;
    let mut rest = v;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(err());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| err())?;
        rest = &rest[digits..];
        let mult = match rest.bytes().next().map(|b| b.to_ascii_lowercase()) {
            None => 1,
            Some(b's') => 1,
            Some(b'm') => 60,
            Some(b'h') => 3600,
            Some(b'd') => 86400,
            Some(b'w') => 604800,
            Some(_) => return Err(err()),
        };
        if !rest.is_empty() {
            rest = &rest[1..];
        }
        total = n
            .checked_mul(mult)
            .and_then(|x| total.checked_add(x))
            .filter(|t| *t <= i32::MAX as u64)
            .ok_or_else(err)?;
    }
    Ok(total)
}

/// OpenSSH's `atoi_err`: a decimal number from 0 to 2^31-1.
pub(super) fn parse_count(origin: &str, key: &str, v: &str) -> Result<u32, ConfigError> {
    match v.parse::<u32>() {
        Ok(n) if n <= i32::MAX as u32 => Ok(n),
        _ => Err(bad(origin, key, v, "expected a number")),
    }
}

/// OpenSSH's `a2port`: a number 1-65535 or a TCP service name from the services database.
pub(super) fn parse_port_value(origin: &str, key: &str, v: &str) -> Result<u16, ConfigError> {
    if let Ok(p) = parse_port(v) {
        return Ok(p);
    }
    if !v.is_empty() && !v.bytes().all(|b| b.is_ascii_digit()) {
        if let Some(p) = service_port(v) {
            return Ok(p);
        }
    }
    Err(bad(origin, key, v, "expected a port number 1-65535"))
}

impl Settings {
    /// Adds one identity file as OpenSSH's `add_identity_file` does: in order, a repeat of
    /// the same text from the same kind of source dropped (`-o IdentityFile=a` twice is one
    /// `a`), at most 100 in all.
    pub(super) fn add_identity_file(
        &mut self,
        origin: &str,
        file: &str,
        user_provided: bool,
    ) -> Result<(), ConfigError> {
        if self
            .identity_files
            .iter()
            .any(|(f, u)| *u == user_provided && f == file)
        {
            return Ok(());
        }
        if self.identity_files.len() >= MAX_IDENTITY_FILES {
            return Err(syntax(
                origin,
                format!("too many identity files (OpenSSH allows {MAX_IDENTITY_FILES})"),
            ));
        }
        self.identity_files.push((file.to_string(), user_provided));
        Ok(())
    }

    /// Validate and apply one keyword (already lowercased). `args` is the split argument
    /// list, `raw` the unsplit rest of the line (ProxyCommand/ProxyJump use it).
    pub(super) fn apply(
        &mut self,
        origin: &str,
        key: &str,
        raw: &str,
        args: &[String],
        active: bool,
        user_conf: bool,
    ) -> Result<(), ConfigError> {
        let first = args.first().map(String::as_str).unwrap_or("");
        let one = || -> Result<&str, ConfigError> {
            if first.is_empty() {
                return Err(bad(origin, key, "", "missing value"));
            }
            if args.len() > 1 {
                return Err(syntax(
                    origin,
                    format!("{key}: extra arguments at end of line (quote values with spaces)"),
                ));
            }
            Ok(first)
        };
        fn set<T>(active: bool, slot: &mut Option<T>, v: T) {
            if active && slot.is_none() {
                *slot = Some(v);
            }
        }
        match key {
            "hostname" => set(active, &mut self.hostname, one()?.to_string()),
            "user" => set(active, &mut self.user, one()?.to_string()),
            "hostkeyalias" => set(active, &mut self.host_key_alias, one()?.to_string()),
            "port" => {
                let p = parse_port_value(origin, key, one()?)?;
                set(active, &mut self.port, p);
            }
            "identityfile" => {
                let v = one()?;
                if active {
                    self.add_identity_file(origin, v, user_conf)?;
                }
            }
            "identitiesonly" => set(
                active,
                &mut self.identities_only,
                parse_flag(origin, key, one()?)?,
            ),
            "identityagent" => {
                let v = one()?;
                dollar_only(v).map_err(|r| bad(origin, key, v, &r))?;
                if let Some(name) = v.strip_prefix('$') {
                    if !name.starts_with('{') && !valid_env_name(name) {
                        return Err(bad(origin, key, v, "invalid environment variable name"));
                    }
                }
                set(active, &mut self.identity_agent, v.to_string());
            }
            "forwardagent" => {
                let v = one()?;
                // OpenSSH: yes/no, else a socket path or `$VAR` (which means yes).
                let value = match parse_flag(origin, key, v) {
                    Ok(on) => (on, None),
                    Err(_) => {
                        dollar_only(v).map_err(|r| bad(origin, key, v, &r))?;
                        (true, Some(v.to_string()))
                    }
                };
                set(active, &mut self.forward_agent, value);
            }
            "proxyjump" => {
                let v = raw.trim_start_matches([' ', '\t', '=']);
                if v.is_empty() {
                    return Err(bad(origin, key, "", "missing value"));
                }
                check_jump(v)?;
                // OpenSSH: a ProxyCommand seen earlier wins; so does an earlier ProxyJump.
                if active && self.proxy_command.is_none() && self.proxy_jump.is_none() {
                    let v = v.split('#').next().unwrap_or("").trim_end();
                    self.proxy_jump = Some(v.to_string());
                    if !v.eq_ignore_ascii_case("none") {
                        self.proxy_command = Some("none".into());
                    }
                }
            }
            "proxycommand" => {
                let v = raw.trim_start_matches([' ', '\t', '=']);
                if v.is_empty() {
                    return Err(bad(origin, key, "", "missing value"));
                }
                // An earlier real ProxyJump wins; `ProxyJump none` does not block it.
                let jump_set = self
                    .proxy_jump
                    .as_deref()
                    .is_some_and(|j| !j.eq_ignore_ascii_case("none"));
                if !jump_set {
                    set(active, &mut self.proxy_command, v.to_string());
                }
            }
            "userknownhostsfile" | "globalknownhostsfile" => {
                if args.is_empty() {
                    return Err(bad(origin, key, "", "missing value"));
                }
                for (i, a) in args.iter().enumerate() {
                    if a.is_empty() {
                        return Err(bad(origin, key, "", "empty file name"));
                    }
                    if a.eq_ignore_ascii_case("none") && (i > 0 || args.len() > 1) {
                        return Err(bad(origin, key, a, "\"none\" must appear alone"));
                    }
                }
                let slot = if key == "userknownhostsfile" {
                    &mut self.user_known_hosts
                } else {
                    &mut self.global_known_hosts
                };
                set(active, slot, args.to_vec());
            }
            "stricthostkeychecking" => {
                let v = match one()?.to_ascii_lowercase().as_str() {
                    "yes" | "true" => StrictHostKeyChecking::Yes,
                    "accept-new" => StrictHostKeyChecking::AcceptNew,
                    "no" | "off" | "false" => StrictHostKeyChecking::No,
                    "ask" => StrictHostKeyChecking::Ask,
                    _ => {
                        return Err(bad(
                            origin,
                            key,
                            first,
                            "expected yes, accept-new, no or ask",
                        ))
                    }
                };
                set(active, &mut self.strict, v);
            }
            "hashknownhosts" => set(
                active,
                &mut self.hash_known_hosts,
                parse_flag(origin, key, one()?)?,
            ),
            "connecttimeout" | "serveraliveinterval" => {
                let v = one()?;
                let secs = if v == "none" {
                    0
                } else {
                    parse_time(origin, key, v)?
                };
                let slot = if key == "connecttimeout" {
                    &mut self.connect_timeout
                } else {
                    &mut self.server_alive_interval
                };
                set(active, slot, secs);
            }
            "serveralivecountmax" => {
                let v = parse_count(origin, key, one()?)?;
                set(active, &mut self.server_alive_count_max, v);
            }
            "numberofpasswordprompts" => {
                let v = parse_count(origin, key, one()?)?;
                set(active, &mut self.number_of_password_prompts, v);
            }
            "batchmode" => set(
                active,
                &mut self.batch_mode,
                parse_flag(origin, key, one()?)?,
            ),
            "pubkeyauthentication" => {
                let v = match one()?.to_ascii_lowercase().as_str() {
                    "yes" | "true" | "unbound" | "host-bound" => true,
                    "no" | "false" => false,
                    _ => return Err(bad(origin, key, first, "expected yes or no")),
                };
                set(active, &mut self.pubkey, v);
            }
            "passwordauthentication" => {
                set(active, &mut self.password, parse_flag(origin, key, one()?)?)
            }
            "kbdinteractiveauthentication" | "challengeresponseauthentication" => {
                set(active, &mut self.kbd, parse_flag(origin, key, one()?)?)
            }
            "preferredauthentications" => set(active, &mut self.preferred, one()?.to_string()),
            "canonicalizehostname" => {
                let v = match one()?.to_ascii_lowercase().as_str() {
                    "yes" | "true" => Canonicalize::Yes,
                    "no" | "false" => Canonicalize::No,
                    "always" => Canonicalize::Always,
                    _ => return Err(bad(origin, key, first, "expected yes, no or always")),
                };
                set(active, &mut self.canonicalize, v);
            }
            "ignoreunknown" => set(active, &mut self.ignore_unknown, one()?.to_string()),
            "refuseconnection" => {
                let refuse = parse_flag(origin, key, one()?)?;
                set(
                    active,
                    &mut self.refuse_connection,
                    (refuse, origin.to_string()),
                );
            }
            other => {
                // Not used here, but its value is checked as OpenSSH checks it, so a config
                // that `ssh` refuses is refused here too.
                if let Some(choices) = value_choices(other) {
                    let v = one()?;
                    if !choices.iter().any(|c| c.eq_ignore_ascii_case(v)) {
                        let reason = format!("expected one of: {}", choices.join(", "));
                        return Err(bad(origin, key, v, &reason));
                    }
                } else if INT_KEYWORDS.contains(&other) {
                    parse_count(origin, key, one()?)?;
                } else if other == "forwardx11timeout" {
                    let v = one()?;
                    if v != "none" {
                        parse_time(origin, key, v)?;
                    }
                }
                tracing::debug!(origin, key, "ssh_config keyword accepted and not used");
            }
        }
        Ok(())
    }
}

/// OpenSSH's yes/no keywords (`multistate_flag`).
pub(super) const FLAG_KEYWORDS: &[&str] = &[
    "forwardx11",
    "forwardx11trusted",
    "exitonforwardfailure",
    "gatewayports",
    "hostbasedauthentication",
    "gssapiauthentication",
    "gssapidelegatecredentials",
    "gssapikeyexchange",
    "gssapirenewalforcesrekey",
    "gssapitrustdns",
    "checkhostip",
    "tcpkeepalive",
    "keepalive",
    "nohostauthenticationforlocalhost",
    "enablesshkeysign",
    "clearallforwardings",
    "visualhostkey",
    "permitlocalcommand",
    "proxyusefdpass",
    "streamlocalbindunlink",
    "canonicalizefallbacklocal",
    "forkafterauthentication",
    "stdinnull",
    "enableescapecommandline",
];

/// OpenSSH's integer keywords (`atoi_err`).
pub(super) const INT_KEYWORDS: &[&str] = &[
    "connectionattempts",
    "canonicalizemaxdots",
    "requiredrsasize",
];

/// The accepted values of OpenSSH's other multiple-choice keywords we do not use.
pub(super) fn value_choices(key: &str) -> Option<&'static [&'static str]> {
    const FLAG: &[&str] = &["yes", "no", "true", "false"];
    Some(match key {
        k if FLAG_KEYWORDS.contains(&k) => FLAG,
        "verifyhostkeydns" | "updatehostkeys" => &["yes", "no", "true", "false", "ask"],
        "addressfamily" => &["inet", "inet6", "any"],
        "controlmaster" => &["yes", "no", "true", "false", "auto", "ask", "autoask"],
        "tunnel" => &["yes", "no", "true", "false", "ethernet", "point-to-point"],
        "requesttty" => &["yes", "no", "true", "false", "force", "auto"],
        "sessiontype" => &["none", "subsystem", "default"],
        "compression" => &["yes", "no"],
        _ => return None,
    })
}
