//! OpenSSH-compatible options: the command line (`-p -i -J -F -o`) and `ssh_config` files,
//! resolved the way `ssh -G` (OpenSSH 9.x) resolves them.
//!
//! What holds (checked against `ssh -G` by `bootstrap/tests/ssh_config_oracle.rs`):
//! - for each setting the *first* value obtained wins; command-line options come before any
//!   file (`-p`, `-i` and `-J` count as given before every `-o`), the destination's
//!   `user@`/`:port` only fill what the command line left unset, and `IdentityFile`
//!   accumulates;
//! - lines are split like OpenSSH (`Key Value`, `Key=Value`, double and single quotes,
//!   backslash escapes, a word starting with `#` ends the line); unknown keywords are an
//!   error unless `IgnoreUnknown` names them; keywords OpenSSH knows but we do not use are
//!   accepted and ignored;
//! - `Host` patterns are matched case-sensitively against the host as typed; `Match host` /
//!   `originalhost` case-insensitively; `Match user`/`localuser` case-sensitively;
//!   `Match exec` runs the command with `$SHELL -c` as OpenSSH does;
//! - two passes as in `ssh`: after the first one `HostName` is expanded (`%h`, `%%`) and
//!   lowercased (addresses are put in canonical form instead); when a `Match final` was seen
//!   or `CanonicalizeHostname` is on, the files are read again with `Match final`/`canonical`
//!   true and `Host` matched against that new name;
//! - `IdentityFile`, `IdentityAgent` and `UserKnownHostsFile` get `~`, `${VAR}` and the
//!   `%C %d %h %i %k %L %l %n %p %r %u %%` tokens; `HostName` only `%h` and `%%`; an unknown
//!   token or an unset variable is an error, as in OpenSSH.
//!
//! Not done (documented in docs/REMOTE.md): DNS canonicalisation (`CanonicalDomains`), `-o`
//! given after the destination (treated as given before it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::dest::{parse_port, split_host_port, Destination};
use crate::pattern::{match_hostname, match_pattern, match_pattern_list};

/// Options given on the command line, OpenSSH style.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SshOptions {
    /// `-p PORT`.
    pub port: Option<u16>,
    /// `-i FILE`, repeatable, in order.
    pub identity_files: Vec<PathBuf>,
    /// `-J JUMP[,JUMP]`.
    pub jump: Option<String>,
    /// `-F FILE`; the literal path `none` disables every config file.
    pub config_file: Option<PathBuf>,
    /// `-o Key=Value`, in order.
    pub options: Vec<(String, String)>,
    /// Local home directory used for `~`, `%d` and the default files (`~/.ssh/...`);
    /// `None` means `$HOME` (OpenSSH uses the password database's home; they are the same on
    /// ordinary systems). Tests point it at a temp dir.
    pub home: Option<PathBuf>,
}

/// An error in options or a config file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A `-o` option or config line could not be understood.
    #[error("{origin}: bad value for {key}: '{value}' ({reason})")]
    BadValue {
        /// `-o` or `file:line`.
        origin: String,
        /// The keyword.
        key: String,
        /// The offending value.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// A keyword OpenSSH does not know either (a typo?).
    #[error("{origin}: unknown ssh option '{key}' (OpenSSH refuses it too; fix the spelling or list it in IgnoreUnknown)")]
    UnknownKeyword {
        /// `-o` or `file:line`.
        origin: String,
        /// The keyword as written.
        key: String,
    },
    /// A line that is not valid ssh_config syntax.
    #[error("{origin}: {reason}")]
    Syntax {
        /// `-o` or `file:line`.
        origin: String,
        /// What is wrong and how to write it instead.
        reason: String,
    },
    /// A `-o` option without a value.
    #[error("bad -o option '{0}': expected Key=Value")]
    BadOption(String),
    /// A config file named with `-F` could not be read.
    #[error("cannot read ssh config {path}: {reason}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error text.
        reason: String,
    },
    /// Include nesting too deep (a loop).
    #[error("ssh config Include nested too deeply at {0}")]
    IncludeDepth(PathBuf),
    /// A ProxyJump entry could not be parsed.
    #[error("bad ProxyJump entry '{0}'")]
    BadJump(String),
    /// `%` token or `${VAR}` expansion failed.
    #[error("cannot expand {key} '{value}': {reason}")]
    Expand {
        /// The keyword whose value was expanded.
        key: String,
        /// The value as configured.
        value: String,
        /// What was wrong.
        reason: String,
    },
    /// `Match exec` could not run its command at all.
    #[error("{origin}: Match exec '{command}' could not run: {reason}")]
    Exec {
        /// `file:line`.
        origin: String,
        /// The expanded command.
        command: String,
        /// The spawn error.
        reason: String,
    },
}

/// `StrictHostKeyChecking` policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrictHostKeyChecking {
    /// Never add keys; unknown hosts are refused.
    Yes,
    /// Add unknown keys without asking; changed keys are refused.
    AcceptNew,
    /// Like `AcceptNew` here: unknown keys are added without asking. Unlike OpenSSH, a changed
    /// key is still a hard stop (we never send credentials to a host whose key changed).
    No,
    /// Ask the prompter about unknown keys (the default).
    Ask,
}

impl StrictHostKeyChecking {
    /// The value as `ssh -G` prints it.
    pub fn as_ssh_g(self) -> &'static str {
        match self {
            StrictHostKeyChecking::Yes => "true",
            StrictHostKeyChecking::AcceptNew => "accept-new",
            StrictHostKeyChecking::No => "false",
            StrictHostKeyChecking::Ask => "ask",
        }
    }
}

/// One `ProxyJump` hop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JumpHost {
    /// User for the hop, if given.
    pub user: Option<String>,
    /// Host (alias) of the hop; resolved through the config files like any destination.
    pub host: String,
    /// Port, if given.
    pub port: Option<u16>,
}

/// Every setting that applies to one connection, after command line + files + defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedHost {
    /// The host as typed (used for `Host` matching and `%n`).
    pub alias: String,
    /// The real host name or address to dial (and to look up in known_hosts): `HostName`
    /// expanded, lowercased (addresses in canonical form), as `ssh -G` prints it.
    pub hostname: String,
    /// TCP port.
    pub port: u16,
    /// Remote user.
    pub user: String,
    /// Identity files to try, in order, already expanded (may not exist); `IdentityFile none`
    /// entries are dropped (and keep the defaults away, as in OpenSSH).
    pub identity_files: Vec<PathBuf>,
    /// True when identity files came from `-i`/`IdentityFile` (missing ones are reported).
    pub identity_files_explicit: bool,
    /// Use only the listed identity files (agent keys must match one of them).
    pub identities_only: bool,
    /// ssh-agent socket (`IdentityAgent`, else `$SSH_AUTH_SOCK`); `None` disables the agent.
    pub identity_agent: Option<PathBuf>,
    /// Hops to go through, first hop first.
    pub proxy_jump: Vec<JumpHost>,
    /// `HostKeyAlias`, lowercased: the name host keys are looked up and recorded under
    /// instead of `[hostname]:port`.
    pub host_key_alias: Option<String>,
    /// `ProxyCommand`, when one applies (unexpanded; run with `$SHELL -c` when connecting).
    pub proxy_command: Option<String>,
    /// User known_hosts files; the first is where accepted keys are appended.
    pub user_known_hosts_files: Vec<PathBuf>,
    /// System known_hosts files (read only).
    pub global_known_hosts_files: Vec<PathBuf>,
    /// Policy for unknown keys.
    pub strict_host_key_checking: StrictHostKeyChecking,
    /// Write accepted keys hashed (`|1|` form).
    pub hash_known_hosts: bool,
    /// Limit for DNS + TCP + SSH handshake of one hop.
    pub connect_timeout: Option<Duration>,
    /// Keepalive interval (`ServerAliveInterval`); `None` disables keepalives.
    pub server_alive_interval: Option<Duration>,
    /// Unanswered keepalives before the connection is declared dead.
    pub server_alive_count_max: u32,
    /// Never ask the user anything (`BatchMode yes`).
    pub batch_mode: bool,
    /// Tries for password / keyboard-interactive answers.
    pub number_of_password_prompts: u32,
    /// Whether `publickey` may be used.
    pub pubkey_authentication: bool,
    /// Whether `password` may be used.
    pub password_authentication: bool,
    /// Whether `keyboard-interactive` may be used.
    pub kbd_interactive_authentication: bool,
    /// Method order (`PreferredAuthentications`); default `publickey,keyboard-interactive,password`.
    pub preferred_authentications: Vec<String>,
    /// Local home used to expand paths.
    pub local_home: PathBuf,
}

/// `CanonicalizeHostname`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Canonicalize {
    No,
    Yes,
    Always,
}

/// Raw settings while resolving; `None` = not set yet (first value wins).
#[derive(Debug, Default, Clone)]
struct Settings {
    hostname: Option<String>,
    user: Option<String>,
    port: Option<u16>,
    identity_files: Vec<String>,
    identities_only: Option<bool>,
    identity_agent: Option<String>,
    proxy_jump: Option<String>,
    proxy_command: Option<String>,
    user_known_hosts: Option<Vec<String>>,
    global_known_hosts: Option<Vec<String>>,
    strict: Option<StrictHostKeyChecking>,
    hash_known_hosts: Option<bool>,
    /// Seconds; 0 = `none`.
    connect_timeout: Option<u64>,
    server_alive_interval: Option<u64>,
    server_alive_count_max: Option<u32>,
    batch_mode: Option<bool>,
    number_of_password_prompts: Option<u32>,
    pubkey: Option<bool>,
    password: Option<bool>,
    kbd: Option<bool>,
    preferred: Option<String>,
    host_key_alias: Option<String>,
    canonicalize: Option<Canonicalize>,
    ignore_unknown: Option<String>,
}

/// Every keyword OpenSSH 9.x's client accepts (including deprecated and unsupported ones,
/// which it ignores, and Debian's GSSAPI additions). Keywords here that [`Settings::apply`]
/// does not handle are accepted and ignored.
const KNOWN_KEYWORDS: &[&str] = &[
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
];

fn bad(origin: &str, key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::BadValue {
        origin: origin.to_string(),
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

fn syntax(origin: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Syntax {
        origin: origin.to_string(),
        reason: reason.into(),
    }
}

/// OpenSSH's yes/no flag (`yes`, `no`, `true`, `false`, any case).
fn parse_flag(origin: &str, key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" => Ok(true),
        "no" | "false" => Ok(false),
        _ => Err(bad(origin, key, v, "expected yes or no")),
    }
}

/// OpenSSH's `convtime`: `90`, `90s`, `10m`, `1h30m`, `2d`, `1w` (suffix in any case).
fn parse_time(origin: &str, key: &str, v: &str) -> Result<u64, ConfigError> {
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
fn parse_count(origin: &str, key: &str, v: &str) -> Result<u32, ConfigError> {
    match v.parse::<u32>() {
        Ok(n) if n <= i32::MAX as u32 => Ok(n),
        _ => Err(bad(origin, key, v, "expected a number")),
    }
}

/// OpenSSH's `a2port`: a number 1-65535 or a TCP service name from the services database.
fn parse_port_value(origin: &str, key: &str, v: &str) -> Result<u16, ConfigError> {
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

fn service_port(name: &str) -> Option<u16> {
    let cname = std::ffi::CString::new(name).ok()?;
    // SAFETY: getservbyname reads the two NUL-terminated strings and returns a pointer into
    // static storage (or null); we copy the port out right away.
    unsafe {
        let se = libc::getservbyname(cname.as_ptr(), c"tcp".as_ptr());
        if se.is_null() {
            return None;
        }
        let port = u16::from_be((*se).s_port as u16);
        (port != 0).then_some(port)
    }
}

/// OpenSSH's `argv_split` with comment termination: words separated by spaces or tabs,
/// `"` and `'` quote, `\` escapes a quote, a backslash or (outside quotes) a space, and a word
/// that starts with `#` ends the line.
fn argv_split(s: &str) -> Result<Vec<String>, String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == ' ' || c == '\t' {
            i += 1;
            continue;
        }
        if c == '#' {
            break;
        }
        let mut arg = String::new();
        let mut quote: Option<char> = None;
        while i < chars.len() {
            let c = chars[i];
            if c == '\\' {
                match chars.get(i + 1) {
                    Some(&n)
                        if n == '\'' || n == '"' || n == '\\' || (quote.is_none() && n == ' ') =>
                    {
                        arg.push(n);
                        i += 2;
                    }
                    _ => {
                        arg.push('\\');
                        i += 1;
                    }
                }
                continue;
            }
            match quote {
                None if c == ' ' || c == '\t' => break,
                None if c == '"' || c == '\'' => quote = Some(c),
                Some(q) if c == q => quote = None,
                _ => arg.push(c),
            }
            i += 1;
        }
        if quote.is_some() {
            return Err("unterminated quote".into());
        }
        out.push(arg);
    }
    Ok(out)
}

/// Split `Key Value`, `Key=Value` or `Key = Value` into the keyword and the rest (OpenSSH's
/// `strdelim`: whitespace and at most one `=` separate them).
fn split_keyword(line: &str) -> Option<(&str, &str)> {
    let line = line.trim_start_matches([' ', '\t']);
    let end = line.find([' ', '\t', '='])?;
    let key = &line[..end];
    let mut rest = line[end..].trim_start_matches([' ', '\t']);
    if let Some(r) = rest.strip_prefix('=') {
        rest = r;
    }
    Some((key, rest.trim_start_matches([' ', '\t'])))
}

/// The calling user's name and home from the password database.
fn passwd_entry() -> (Option<String>, Option<PathBuf>) {
    // SAFETY: getpwuid returns a pointer into static storage or null; we copy both strings
    // out immediately, before any other call that could overwrite that storage.
    unsafe {
        let pw = libc::getpwuid(libc::geteuid());
        if pw.is_null() {
            return (None, None);
        }
        let cstr = |p: *const libc::c_char| {
            (!p.is_null())
                .then(|| {
                    std::ffi::CStr::from_ptr(p)
                        .to_str()
                        .ok()
                        .map(str::to_string)
                })
                .flatten()
        };
        (cstr((*pw).pw_name), cstr((*pw).pw_dir).map(PathBuf::from))
    }
}

fn home_of(user: &str) -> Option<PathBuf> {
    let cname = std::ffi::CString::new(user).ok()?;
    // SAFETY: as in `passwd_entry`; the directory string is copied out at once.
    unsafe {
        let pw = libc::getpwnam(cname.as_ptr());
        if pw.is_null() || (*pw).pw_dir.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr((*pw).pw_dir)
            .to_str()
            .ok()
            .map(PathBuf::from)
    }
}

fn local_user() -> String {
    if let (Some(name), _) = passwd_entry() {
        return name;
    }
    match std::env::var("USER") {
        Ok(u) if !u.is_empty() => u,
        _ => "root".to_string(),
    }
}

fn local_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn default_home() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => PathBuf::from(h),
        _ => passwd_entry().1.unwrap_or_else(|| PathBuf::from("/")),
    }
}

/// This machine's host name (`%l`) as `gethostname` reports it.
fn this_host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success
    // (we also stop at the buffer end).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// OpenSSH's `is_addr` + `resolve_addr`: a numeric address in its canonical text form.
fn canonical_address(host: &str) -> Option<String> {
    let c = std::ffi::CString::new(host).ok()?;
    // SAFETY: standard getaddrinfo/getnameinfo use: hints zeroed, result freed on every path,
    // output buffer sized NI_MAXHOST and NUL-terminated by getnameinfo on success.
    unsafe {
        let mut hints: libc::addrinfo = std::mem::zeroed();
        hints.ai_family = libc::AF_UNSPEC;
        hints.ai_flags = libc::AI_NUMERICHOST;
        let mut res: *mut libc::addrinfo = std::ptr::null_mut();
        if libc::getaddrinfo(c.as_ptr(), std::ptr::null(), &hints, &mut res) != 0 || res.is_null() {
            return None;
        }
        let mut buf = [0 as libc::c_char; 1025];
        let rc = libc::getnameinfo(
            (*res).ai_addr,
            (*res).ai_addrlen,
            buf.as_mut_ptr(),
            buf.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NUMERICHOST,
        );
        libc::freeaddrinfo(res);
        if rc != 0 {
            return None;
        }
        std::ffi::CStr::from_ptr(buf.as_ptr())
            .to_str()
            .ok()
            .map(str::to_string)
    }
}

/// `~`, `~/x`, `~user/x` as OpenSSH's `tilde_expand` does.
fn tilde_expand(s: &str, home: &Path) -> Result<String, String> {
    let Some(rest) = s.strip_prefix('~') else {
        return Ok(s.to_string());
    };
    let (dir, path) = if rest.is_empty() || rest.starts_with('/') {
        (home.to_path_buf(), rest.trim_start_matches('/'))
    } else {
        let (user, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i + 1..].trim_start_matches('/')),
            None => (rest, ""),
        };
        let dir = home_of(user).ok_or_else(|| format!("no such user '{user}' for '~{user}'"))?;
        (dir, path)
    };
    let dir = dir.display().to_string();
    if path.is_empty() {
        return Ok(dir);
    }
    let sep = if dir.ends_with('/') { "" } else { "/" };
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
fn dollar_only(s: &str) -> Result<String, String> {
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

fn valid_env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.as_bytes()[0].is_ascii_digit()
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// OpenSSH's `ssh_valid_hostname`: no shell metacharacters, spaces or controls, no leading `-`.
fn valid_hostname(s: &str) -> bool {
    !s.starts_with('-')
        && !s.chars().any(|c| {
            "'`\"$\\;&<>|(){},".contains(c) || c.is_ascii_whitespace() || c.is_ascii_control()
        })
}

/// OpenSSH's `ssh_valid_ruser`.
fn valid_ruser(s: &str) -> bool {
    if s.starts_with('-') || s.ends_with('\\') {
        return false;
    }
    let b = s.as_bytes();
    !b.iter().enumerate().any(|(i, &c)| {
        c.is_ascii_control()
            || b"'`\";&<>|(){}".contains(&c)
            || (c.is_ascii_whitespace() && b.get(i + 1) == Some(&b'-'))
    })
}

/// Check one ProxyJump value the way OpenSSH's `parse_jump` does (comment stripped, every
/// hop parsed); `none` is valid.
fn check_jump(value: &str) -> Result<(), ConfigError> {
    let v = value.split('#').next().unwrap_or("").trim_end();
    if value.eq_ignore_ascii_case("none") {
        return Ok(());
    }
    parse_jumps(v).map(|_| ())
}

impl Settings {
    /// Validate and apply one keyword (already lowercased). `args` is the split argument
    /// list, `raw` the unsplit rest of the line (ProxyCommand/ProxyJump use it).
    fn apply(
        &mut self,
        origin: &str,
        key: &str,
        raw: &str,
        args: &[String],
        active: bool,
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
                    self.identity_files.push(v.to_string());
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
const FLAG_KEYWORDS: &[&str] = &[
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
const INT_KEYWORDS: &[&str] = &[
    "connectionattempts",
    "canonicalizemaxdots",
    "requiredrsasize",
];

/// The accepted values of OpenSSH's other multiple-choice keywords we do not use.
fn value_choices(key: &str) -> Option<&'static [&'static str]> {
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

/// Which pass and which names a config line is evaluated against.
struct Pass<'a> {
    /// Name `Host` lines match: the host as typed in the first pass, the final (expanded,
    /// lowercased) host name in the final pass.
    host: &'a str,
    /// The host as typed (`Match originalhost`, `%n`).
    original_host: &'a str,
    /// The final pass (`Match final`/`canonical` are true).
    final_pass: bool,
}

/// Flags of one config file read.
#[derive(Clone, Copy)]
struct FileFlags {
    /// A user config (`-F` or `~/.ssh/config`): relative `Include`s are under `~/.ssh`.
    user_conf: bool,
    /// Inside an `Include` from an inactive block: parse (so errors show) but apply nothing.
    never_match: bool,
}

struct Resolver {
    settings: Settings,
    home: PathBuf,
    local_user: String,
    this_host: String,
    want_final: bool,
}

impl Resolver {
    /// The host `Match host` sees: in the first pass `HostName` with `%h` expanded (else the
    /// host as typed); in the final pass the final host name.
    fn match_host(&self, pass: &Pass<'_>) -> Result<String, ConfigError> {
        match &self.settings.hostname {
            Some(h) if !pass.final_pass => {
                expand(h, &[('h', pass.original_host)], false).map_err(|reason| {
                    ConfigError::Expand {
                        key: "HostName".into(),
                        value: h.clone(),
                        reason,
                    }
                })
            }
            Some(h) => Ok(h.clone()),
            None => Ok(pass.original_host.to_string()),
        }
    }

    fn eval_match(
        &mut self,
        args: &[String],
        pass: &Pass<'_>,
        origin: &str,
    ) -> Result<bool, ConfigError> {
        let host = self.match_host(pass)?;
        let ruser = self
            .settings
            .user
            .clone()
            .unwrap_or_else(|| self.local_user.clone());
        let port = self.settings.port.unwrap_or(22);
        let mut result = true;
        let mut attributes = 0usize;
        let mut i = 0;
        while i < args.len() {
            let raw = args[i].as_str();
            let (negate, attr) = match raw.strip_prefix('!') {
                Some(a) => (true, a),
                None => (false, raw),
            };
            let attr = attr.to_ascii_lowercase();
            i += 1;
            if attr == "all" {
                if attributes > 1 || i < args.len() {
                    return Err(syntax(
                        origin,
                        "'Match all' cannot be combined with other Match criteria",
                    ));
                }
                if result {
                    result = !negate;
                }
                return Ok(result);
            }
            attributes += 1;
            if attr == "canonical" || attr == "final" {
                if attr == "final" {
                    self.want_final = true;
                }
                if pass.final_pass == negate {
                    result = false;
                }
                continue;
            }
            let Some(arg) = args.get(i) else {
                return Err(syntax(origin, format!("Match {attr} needs an argument")));
            };
            i += 1;
            let matched = match attr.as_str() {
                "host" => match_hostname(&host, arg).is_match(),
                "originalhost" => match_hostname(pass.original_host, arg).is_match(),
                "user" => match_pattern_list(&ruser, arg, false).is_match(),
                "localuser" => match_pattern_list(&self.local_user, arg, false).is_match(),
                "exec" => {
                    if !result {
                        // OpenSSH skips the command once an earlier criterion failed.
                        continue;
                    }
                    let short = self.this_host.split('.').next().unwrap_or("").to_string();
                    let port_s = port.to_string();
                    let hash = connection_hash(&self.this_host, &host, &port_s, &ruser);
                    let uid = local_uid().to_string();
                    let home = self.home.display().to_string();
                    let tokens = [
                        ('C', hash.as_str()),
                        ('L', short.as_str()),
                        ('d', home.as_str()),
                        ('h', host.as_str()),
                        (
                            'k',
                            self.settings.host_key_alias.as_deref().unwrap_or(&host),
                        ),
                        ('l', self.this_host.as_str()),
                        ('n', pass.original_host),
                        ('p', port_s.as_str()),
                        ('r', ruser.as_str()),
                        ('u', self.local_user.as_str()),
                        ('i', uid.as_str()),
                    ];
                    let cmd =
                        expand(arg, &tokens, false).map_err(|reason| ConfigError::Expand {
                            key: "Match exec".into(),
                            value: arg.clone(),
                            reason,
                        })?;
                    run_match_exec(&cmd, origin)?
                }
                other => {
                    return Err(syntax(
                        origin,
                        format!(
                            "unsupported Match criterion '{other}' (OpenSSH knows all, canonical, \
                             final, exec, host, originalhost, user, localuser)"
                        ),
                    ))
                }
            };
            if matched == negate {
                result = false;
            }
        }
        if attributes == 0 {
            return Err(syntax(origin, "Match needs at least one criterion"));
        }
        Ok(result)
    }

    fn include_paths(
        &self,
        pattern: &str,
        flags: FileFlags,
        origin: &str,
    ) -> Result<Vec<PathBuf>, ConfigError> {
        if pattern.starts_with('~') && !flags.user_conf {
            return Err(syntax(
                origin,
                format!("bad include path {pattern} ('~' only in user configs)"),
            ));
        }
        let anchored = if pattern.starts_with('/') || pattern.starts_with('~') {
            pattern.to_string()
        } else if flags.user_conf {
            format!("~/.ssh/{pattern}")
        } else {
            format!("/etc/ssh/{pattern}")
        };
        let full = tilde_expand(&anchored, &self.home).map_err(|r| syntax(origin, r))?;
        Ok(glob_paths(&full))
    }

    /// Read one file. `active` is whether lines before the first Host/Match apply; it is
    /// carried through (an Include continues the including block).
    fn read_file(
        &mut self,
        path: &Path,
        pass: &Pass<'_>,
        flags: FileFlags,
        active: &mut bool,
        depth: u32,
    ) -> Result<bool, ConfigError> {
        if depth > 16 {
            return Err(ConfigError::IncludeDepth(path.to_path_buf()));
        }
        let text = match std::fs::read(path) {
            Ok(t) => String::from_utf8_lossy(&t).into_owned(),
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "ssh config not read");
                return Ok(false);
            }
        };
        for (n, raw) in text.split('\n').enumerate() {
            let origin = format!("{} line {}", path.display(), n + 1);
            self.process_line(raw, &origin, pass, flags, Some(active), depth)?;
        }
        Ok(true)
    }

    /// One line of a file (`active` = Some) or of the command line (`active` = None).
    fn process_line(
        &mut self,
        line: &str,
        origin: &str,
        pass: &Pass<'_>,
        flags: FileFlags,
        active: Option<&mut bool>,
        depth: u32,
    ) -> Result<(), ConfigError> {
        let line = line.trim_end_matches([' ', '\t', '\r', '\n', '\x0c']);
        let Some((keyword, rest)) = split_keyword(line).or_else(|| {
            let t = line.trim_start_matches([' ', '\t']);
            (!t.is_empty()).then_some((t, ""))
        }) else {
            return Ok(());
        };
        if keyword.is_empty() || keyword.starts_with('#') {
            return Ok(());
        }
        let key = keyword.to_ascii_lowercase();
        if rest.is_empty() {
            return Err(syntax(
                origin,
                format!("no argument after keyword \"{keyword}\""),
            ));
        }
        if !KNOWN_KEYWORDS.contains(&key.as_str()) {
            let ignored = self
                .settings
                .ignore_unknown
                .as_deref()
                .is_some_and(|list| match_pattern_list(&key, list, true).is_match());
            if ignored {
                return Ok(());
            }
            return Err(ConfigError::UnknownKeyword {
                origin: origin.to_string(),
                key: keyword.to_string(),
            });
        }
        let args = argv_split(rest).map_err(|r| syntax(origin, format!("invalid quotes ({r})")))?;
        let mut cmdline_active = true;
        let is_cmdline = active.is_none();
        let active: &mut bool = active.unwrap_or(&mut cmdline_active);
        match key.as_str() {
            "host" => {
                if is_cmdline {
                    return Err(syntax(
                        origin,
                        "Host is not supported as a command-line option",
                    ));
                }
                *active = false;
                for a in &args {
                    if a.is_empty() {
                        return Err(syntax(origin, "Host: empty pattern"));
                    }
                    if flags.never_match {
                        break;
                    }
                    let (negated, pat) = match a.strip_prefix('!') {
                        Some(p) => (true, p),
                        None => (false, a.as_str()),
                    };
                    if match_pattern(pass.host, pat) {
                        if negated {
                            *active = false;
                            break;
                        }
                        *active = true;
                    }
                }
            }
            "match" => {
                if is_cmdline {
                    return Err(syntax(
                        origin,
                        "Match is not supported as a command-line option",
                    ));
                }
                let m = self.eval_match(&args, pass, origin)?;
                *active = !flags.never_match && m;
            }
            "include" => {
                if is_cmdline {
                    return Err(syntax(
                        origin,
                        "Include is not supported as a command-line option",
                    ));
                }
                let outer = *active;
                for pat in &args {
                    for file in self.include_paths(pat, flags, origin)? {
                        let inner = FileFlags {
                            user_conf: flags.user_conf,
                            never_match: flags.never_match || !outer,
                        };
                        self.read_file(&file, pass, inner, active, depth + 1)?;
                        // A Match inside an included file does not change the including
                        // file's block.
                        *active = outer;
                    }
                }
            }
            _ => {
                let apply = *active && !flags.never_match;
                self.settings.apply(origin, &key, rest, &args, apply)?;
            }
        }
        Ok(())
    }

    /// All config files of one pass, OpenSSH's `process_config_files`.
    fn process_files(
        &mut self,
        config_file: Option<&Path>,
        pass: &Pass<'_>,
    ) -> Result<(), ConfigError> {
        let user = FileFlags {
            user_conf: true,
            never_match: false,
        };
        match config_file {
            Some(p) if p.as_os_str().eq_ignore_ascii_case("none") => {}
            Some(p) => {
                let mut active = true;
                if std::fs::metadata(p).is_err()
                    || !self.read_file(p, pass, user, &mut active, 0)?
                {
                    let reason = std::fs::File::open(p)
                        .err()
                        .map(|e| e.to_string())
                        .unwrap_or_else(|| "not readable".into());
                    return Err(ConfigError::Unreadable {
                        path: p.to_path_buf(),
                        reason,
                    });
                }
            }
            None => {
                let user_cfg = self.home.join(".ssh").join("config");
                let mut active = true;
                self.read_file(&user_cfg, pass, user, &mut active, 0)?;
                let mut active = true;
                let system = FileFlags {
                    user_conf: false,
                    never_match: false,
                };
                self.read_file(
                    Path::new("/etc/ssh/ssh_config"),
                    pass,
                    system,
                    &mut active,
                    0,
                )?;
            }
        }
        Ok(())
    }
}

/// `%C`: SHA-1 over local host name, remote host, port and remote user, in hex.
fn connection_hash(this_host: &str, host: &str, port: &str, user: &str) -> String {
    use sha1::Digest as _;
    let mut h = sha1::Sha1::new();
    for part in [this_host, host, port, user] {
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

/// `Match exec`: run `cmd` with `$SHELL -c` (stdin and stdout to /dev/null, stderr kept),
/// true when it exits 0, as OpenSSH's `execute_in_shell`.
fn run_match_exec(cmd: &str, origin: &str) -> Result<bool, ConfigError> {
    let shell = std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".to_string());
    let status = std::process::Command::new(&shell)
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| ConfigError::Exec {
            origin: origin.to_string(),
            command: cmd.to_string(),
            reason: format!("{shell}: {e}"),
        })?;
    Ok(status.success())
}

/// `glob(3)` for `Include`: `*` and `?` in any path component, hidden names only when the
/// pattern component starts with `.`, results sorted; no match gives no paths.
fn glob_paths(pattern: &str) -> Vec<PathBuf> {
    let path = Path::new(pattern);
    let mut current: Vec<PathBuf> = vec![PathBuf::new()];
    for comp in path.components() {
        let name = comp.as_os_str().to_string_lossy().into_owned();
        let mut next = Vec::new();
        for base in &current {
            if !name.contains(['*', '?']) {
                next.push(base.join(&name));
                continue;
            }
            let dir = if base.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                base.clone()
            };
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut found: Vec<PathBuf> = rd
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| {
                    (!n.starts_with('.') || name.starts_with('.')) && match_pattern(n, &name)
                })
                .map(|n| base.join(n))
                .collect();
            found.sort();
            next.extend(found);
        }
        current = next;
    }
    current.into_iter().filter(|p| p.exists()).collect()
}

/// Parse a `ProxyJump` value into hops; `none` gives no hops.
pub fn parse_jumps(value: &str) -> Result<Vec<JumpHost>, ConfigError> {
    if value.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let mut hops = Vec::new();
    for part in value.split(',') {
        let bad = || ConfigError::BadJump(part.to_string());
        let (body, is_uri) = match part.strip_prefix("ssh://") {
            Some(b) => (b.strip_suffix('/').unwrap_or(b), true),
            None => (part, false),
        };
        if is_uri && body.contains('/') {
            return Err(bad());
        }
        let (user, hostport) = match body.rfind('@') {
            Some(i) => (Some(body[..i].to_string()), &body[i + 1..]),
            None => (None, body),
        };
        let (host, port) = split_host_port(hostport).map_err(|_| bad())?;
        if host.is_empty() || host.starts_with('-') || user.as_deref() == Some("") {
            return Err(bad());
        }
        hops.push(JumpHost { user, host, port });
    }
    Ok(hops)
}

impl SshOptions {
    /// Add one `-o` option (`Key=Value` or `Key Value`). The value is checked right away.
    pub fn push_option(&mut self, option: &str) -> Result<(), ConfigError> {
        let (key, value) =
            split_keyword(option).ok_or_else(|| ConfigError::BadOption(option.to_string()))?;
        if value.is_empty() {
            return Err(ConfigError::BadOption(option.to_string()));
        }
        // Validate now so typos fail before any connection attempt.
        let mut probe = Resolver {
            settings: Settings::default(),
            home: PathBuf::from("/"),
            local_user: String::new(),
            this_host: String::new(),
            want_final: false,
        };
        let pass = Pass {
            host: "",
            original_host: "",
            final_pass: false,
        };
        let flags = FileFlags {
            user_conf: true,
            never_match: false,
        };
        // Earlier -o options count (an `IgnoreUnknown` given before applies to this one).
        for (k, v) in &self.options {
            probe.process_line(&format!("{k}={v}"), "-o", &pass, flags, None, 0)?;
        }
        probe.process_line(option, "-o", &pass, flags, None, 0)?;
        self.options.push((key.to_string(), value.to_string()));
        Ok(())
    }

    /// Options for a ProxyJump hop: `-F`, the local home and the `-o` options that are not
    /// about the final destination (Port, User, HostName, ProxyJump are dropped), plus `-i`.
    /// OpenSSH passes less to hops; passing the known_hosts and identity settings along is
    /// what a user with `-o UserKnownHostsFile=...` expects.
    pub fn for_jump_host(&self) -> SshOptions {
        SshOptions {
            port: None,
            identity_files: self.identity_files.clone(),
            jump: None,
            config_file: self.config_file.clone(),
            options: self
                .options
                .iter()
                .filter(|(k, _)| {
                    !matches!(
                        k.to_ascii_lowercase().as_str(),
                        "port" | "user" | "hostname" | "proxyjump"
                    )
                })
                .cloned()
                .collect(),
            home: self.home.clone(),
        }
    }

    /// Resolve every setting for `dest` the way `ssh -G` does: command line, then the `-F`
    /// file (or `~/.ssh/config` and `/etc/ssh/ssh_config`), a final pass when asked for,
    /// then defaults and token expansion.
    pub fn resolve(&self, dest: &Destination) -> Result<ResolvedHost, ConfigError> {
        let home = self.home.clone().unwrap_or_else(default_home);
        let mut r = Resolver {
            settings: Settings::default(),
            home: home.clone(),
            local_user: local_user(),
            this_host: this_host(),
            want_final: false,
        };
        let host_arg = dest.host.clone();
        // The command line, in OpenSSH's order (first value wins).
        if let Some(p) = self.port {
            r.settings.port.get_or_insert(p);
        }
        for f in &self.identity_files {
            r.settings.identity_files.push(f.display().to_string());
        }
        if let Some(j) = &self.jump {
            check_jump(j)?;
            r.settings.proxy_jump.get_or_insert_with(|| j.clone());
            if !j.eq_ignore_ascii_case("none") {
                r.settings.proxy_command = Some("none".into());
            }
        }
        let cmd_pass = Pass {
            host: &host_arg,
            original_host: &host_arg,
            final_pass: false,
        };
        let cmd_flags = FileFlags {
            user_conf: true,
            never_match: false,
        };
        for (k, v) in &self.options {
            r.process_line(&format!("{k}={v}"), "-o", &cmd_pass, cmd_flags, None, 0)?;
        }
        // What the command line names must be safe to put into %-tokens (OpenSSH's
        // `ssh_valid_hostname` / `ssh_valid_ruser`, CVE-2023-51385).
        if !valid_hostname(&host_arg) {
            return Err(syntax(
                "destination",
                format!("host name '{host_arg}' contains invalid characters"),
            ));
        }
        // The destination's user and port only fill what the command line left open.
        if r.settings.user.is_none() {
            if let Some(u) = &dest.user {
                if !valid_ruser(u) {
                    return Err(syntax(
                        "destination",
                        format!("remote user name '{u}' contains invalid characters"),
                    ));
                }
            }
            r.settings.user = dest.user.clone();
        }
        if r.settings.port.is_none() {
            r.settings.port = dest.port;
        }
        let config_file = self.config_file.as_deref();
        r.process_files(config_file, &cmd_pass)?;

        // HostName takes effect: %h expanded, then lowercased (addresses canonicalised).
        let mut host = host_arg.clone();
        if let Some(h) = r.settings.hostname.clone() {
            host =
                expand(&h, &[('h', &host_arg)], false).map_err(|reason| ConfigError::Expand {
                    key: "HostName".into(),
                    value: h.clone(),
                    reason,
                })?;
        }
        host = match canonical_address(&host) {
            // OpenSSH keeps an address as written unless its canonical form differs in more
            // than letter case (`FE80::1` stays, `127.1` becomes `127.0.0.1`).
            Some(c) if c.eq_ignore_ascii_case(&host) => host,
            Some(c) => c,
            None => host.to_ascii_lowercase(),
        };
        let canonicalize = r.settings.canonicalize.unwrap_or(Canonicalize::No);
        if canonicalize != Canonicalize::No {
            // No DNS canonicalisation here (docs/REMOTE.md); the final pass still runs, as
            // in OpenSSH when no CanonicalDomains entry resolves.
            r.want_final = true;
        }
        if r.want_final {
            r.settings.hostname = Some(host.clone());
            let final_pass = Pass {
                host: &host,
                original_host: &host_arg,
                final_pass: true,
            };
            r.process_files(config_file, &final_pass)?;
        }

        let s = r.settings;
        let local_user = r.local_user;
        let user = s.user.clone().unwrap_or_else(|| local_user.clone());
        let port = s.port.unwrap_or(22);
        let port_s = port.to_string();
        let hash = connection_hash(&r.this_host, &host, &port_s, &user);
        let short = r.this_host.split('.').next().unwrap_or("").to_string();
        let uid = local_uid().to_string();
        let home_s = home.display().to_string();
        // OpenSSH lowercases HostKeyAlias before it expands %k.
        let key_alias = s
            .host_key_alias
            .as_deref()
            .map(str::to_ascii_lowercase)
            .unwrap_or_else(|| host_arg.clone());
        let tokens = [
            ('C', hash.as_str()),
            ('L', short.as_str()),
            ('i', uid.as_str()),
            ('k', key_alias.as_str()),
            ('l', r.this_host.as_str()),
            ('n', host_arg.as_str()),
            ('p', port_s.as_str()),
            ('d', home_s.as_str()),
            ('h', host.as_str()),
            ('r', user.as_str()),
            ('u', local_user.as_str()),
        ];
        let expand_path = |key: &str, v: &str| -> Result<PathBuf, ConfigError> {
            let err = |reason: String| ConfigError::Expand {
                key: key.to_string(),
                value: v.to_string(),
                reason,
            };
            let t = tilde_expand(v, &home).map_err(err)?;
            expand(&t, &tokens, true).map(PathBuf::from).map_err(err)
        };
        let identity_files_explicit = !s.identity_files.is_empty();
        let identity_files: Vec<PathBuf> = if identity_files_explicit {
            s.identity_files
                .iter()
                .filter(|f| !f.eq_ignore_ascii_case("none"))
                .map(|f| expand_path("IdentityFile", f))
                .collect::<Result<_, _>>()?
        } else {
            [
                "id_rsa",
                "id_ecdsa",
                "id_ecdsa_sk",
                "id_ed25519",
                "id_ed25519_sk",
                "id_xmss",
                "id_dsa",
            ]
            .iter()
            .map(|n| home.join(".ssh").join(n))
            .collect()
        };
        let identity_agent = match s.identity_agent.as_deref() {
            Some(v) if v.eq_ignore_ascii_case("none") => None,
            Some("SSH_AUTH_SOCK") | None => std::env::var_os("SSH_AUTH_SOCK")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            Some(v) => match v.strip_prefix('$').filter(|n| !n.starts_with('{')) {
                Some(var) => std::env::var_os(var).map(PathBuf::from),
                None => Some(expand_path("IdentityAgent", v)?),
            },
        };
        let user_known_hosts_files: Vec<PathBuf> = match &s.user_known_hosts {
            Some(l) if l.len() == 1 && l[0].eq_ignore_ascii_case("none") => Vec::new(),
            Some(l) => l
                .iter()
                .map(|v| expand_path("UserKnownHostsFile", v))
                .collect::<Result<_, _>>()?,
            None => vec![
                home.join(".ssh/known_hosts"),
                home.join(".ssh/known_hosts2"),
            ],
        };
        // OpenSSH does not expand GlobalKnownHostsFile values.
        let global_known_hosts_files: Vec<PathBuf> = match &s.global_known_hosts {
            Some(l) if l.len() == 1 && l[0].eq_ignore_ascii_case("none") => Vec::new(),
            Some(l) => l.iter().map(PathBuf::from).collect(),
            None => vec![
                PathBuf::from("/etc/ssh/ssh_known_hosts"),
                PathBuf::from("/etc/ssh/ssh_known_hosts2"),
            ],
        };
        let proxy_jump = match &s.proxy_jump {
            Some(v) => parse_jumps(v)?,
            None => Vec::new(),
        };
        let proxy_command = s
            .proxy_command
            .clone()
            .filter(|c| !c.eq_ignore_ascii_case("none"));
        let secs = |v: Option<u64>| v.filter(|s| *s > 0).map(Duration::from_secs);
        Ok(ResolvedHost {
            alias: host_arg,
            hostname: host,
            port,
            user,
            identity_files,
            identity_files_explicit,
            identities_only: s.identities_only.unwrap_or(false),
            identity_agent,
            proxy_jump,
            host_key_alias: s.host_key_alias.as_deref().map(str::to_ascii_lowercase),
            proxy_command,
            user_known_hosts_files,
            global_known_hosts_files,
            strict_host_key_checking: s.strict.unwrap_or(StrictHostKeyChecking::Ask),
            hash_known_hosts: s.hash_known_hosts.unwrap_or(false),
            connect_timeout: secs(s.connect_timeout),
            // Debian's OpenSSH (the oracle in CI) defaults keepalives to 300 s in batch mode.
            server_alive_interval: secs(
                s.server_alive_interval
                    .or((s.batch_mode == Some(true)).then_some(300)),
            ),
            server_alive_count_max: s.server_alive_count_max.unwrap_or(3),
            batch_mode: s.batch_mode.unwrap_or(false),
            number_of_password_prompts: s.number_of_password_prompts.unwrap_or(3),
            pubkey_authentication: s.pubkey.unwrap_or(true),
            password_authentication: s.password.unwrap_or(true),
            kbd_interactive_authentication: s.kbd.unwrap_or(true),
            preferred_authentications: match s.preferred {
                Some(p) => p.split(',').map(|m| m.trim().to_string()).collect(),
                None => vec![
                    "publickey".into(),
                    "keyboard-interactive".into(),
                    "password".into(),
                ],
            },
            local_home: home,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts_with(cfg: &str) -> (tempfile::TempDir, SshOptions) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, cfg).unwrap();
        let o = SshOptions {
            config_file: Some(path),
            home: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        (dir, o)
    }

    fn dest(s: &str) -> Destination {
        Destination::parse(s).unwrap()
    }

    #[test]
    fn host_blocks_first_value_wins_and_identity_accumulates() {
        let (dir, o) = opts_with(
            "# comment\n\
             Host dev*\n  HostName 10.0.0.%h\n  User alice\n  Port 2200\n  IdentityFile ~/.ssh/dev_%r_%h\n\
             Host !devnot dev1\n  User bob\n  IdentityFile %d/second_%u\n\
             Host *\n  Port 22\n  IdentitiesOnly=yes\n  ServerAliveInterval 15\n  StrictHostKeyChecking accept-new\n",
        );
        let r = o.resolve(&dest("dev1")).unwrap();
        assert_eq!(r.hostname, "10.0.0.dev1");
        assert_eq!(r.user, "alice");
        assert_eq!(r.port, 2200);
        let home = dir.path().display().to_string();
        assert_eq!(
            r.identity_files,
            vec![
                PathBuf::from(format!("{home}/.ssh/dev_alice_10.0.0.dev1")),
                PathBuf::from(format!("{home}/second_{}", local_user())),
            ]
        );
        assert!(r.identities_only);
        assert_eq!(r.server_alive_interval, Some(Duration::from_secs(15)));
        assert_eq!(r.strict_host_key_checking, StrictHostKeyChecking::AcceptNew);

        let r = o.resolve(&dest("devnot")).unwrap();
        assert_eq!(r.user, "alice", "negated pattern excludes the bob block");
        let r = o.resolve(&dest("prod")).unwrap();
        assert_eq!(r.port, 22);
        assert_eq!(r.hostname, "prod");
        assert!(!r.identity_files_explicit);
    }

    #[test]
    fn command_line_overrides_file() {
        let (_dir, mut o) = opts_with("Host h\n User fileuser\n Port 2000\n IdentityFile /f\n");
        o.port = Some(3000);
        o.identity_files.push(PathBuf::from("/cli"));
        o.push_option("User=cliuser").unwrap();
        o.push_option("StrictHostKeyChecking no").unwrap();
        o.push_option("User=second").unwrap();
        let r = o.resolve(&dest("h")).unwrap();
        assert_eq!(r.user, "cliuser");
        assert_eq!(r.port, 3000);
        assert_eq!(
            r.identity_files,
            vec![PathBuf::from("/cli"), PathBuf::from("/f")]
        );
        assert_eq!(r.strict_host_key_checking, StrictHostKeyChecking::No);
        // As in OpenSSH, -o User (given before the destination) beats the destination's user.
        let r = o.resolve(&dest("root@h")).unwrap();
        assert_eq!(r.user, "cliuser");
        o.options.clear();
        let r = o.resolve(&dest("root@h")).unwrap();
        assert_eq!(r.user, "root", "the destination's user beats the file");
    }

    #[test]
    fn match_host_and_user() {
        let (_dir, o) = opts_with(
            "Host short\n HostName long.example.com\n\
             Match host *.example.com user deploy\n Port 2022\n\
             Match host *.example.com !user deploy\n Port 2023\n\
             Match originalhost short\n ConnectTimeout 7\n\
             Match exec \"true\"\n Port 1\n",
        );
        let r = o.resolve(&dest("deploy@short")).unwrap();
        assert_eq!(r.port, 2022);
        assert_eq!(r.connect_timeout, Some(Duration::from_secs(7)));
        let r = o.resolve(&dest("other@short")).unwrap();
        assert_eq!(r.port, 2023);
    }

    #[test]
    fn include_with_glob_and_relative_base() {
        let dir = tempfile::tempdir().unwrap();
        let ssh = dir.path().join(".ssh");
        std::fs::create_dir_all(ssh.join("conf.d")).unwrap();
        std::fs::write(ssh.join("conf.d/a.conf"), "Host inc\n User fromglob\n").unwrap();
        std::fs::write(ssh.join("conf.d/b.conf"), "Host inc\n Port 4444\n").unwrap();
        std::fs::write(
            ssh.join("config"),
            "Include conf.d/*.conf\nHost inc\n User late\n",
        )
        .unwrap();
        let o = SshOptions {
            home: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let r = o.resolve(&dest("inc")).unwrap();
        assert_eq!(r.user, "fromglob");
        assert_eq!(r.port, 4444);
        assert_eq!(
            r.user_known_hosts_files,
            vec![ssh.join("known_hosts"), ssh.join("known_hosts2")]
        );
    }

    #[test]
    fn proxy_jump_and_known_hosts_files() {
        let (_dir, mut o) =
            opts_with("Host t\n ProxyJump a@j1:2201,ssh://j2\n UserKnownHostsFile /k1 \"/k 2\"\n");
        let r = o.resolve(&dest("t")).unwrap();
        assert_eq!(
            r.proxy_jump,
            vec![
                JumpHost {
                    user: Some("a".into()),
                    host: "j1".into(),
                    port: Some(2201)
                },
                JumpHost {
                    user: None,
                    host: "j2".into(),
                    port: None
                }
            ]
        );
        assert_eq!(
            r.user_known_hosts_files,
            vec![PathBuf::from("/k1"), PathBuf::from("/k 2")]
        );
        o.jump = Some("none".into());
        assert!(o.resolve(&dest("t")).unwrap().proxy_jump.is_empty());
        let hop = o.for_jump_host();
        assert!(hop.jump.is_none());
    }

    #[test]
    fn bad_options_are_refused() {
        let mut o = SshOptions::default();
        assert!(o.push_option("Port=abc").is_err());
        assert!(o.push_option("StrictHostKeyChecking=maybe").is_err());
        assert!(o.push_option("Port").is_err());
        assert!(o.push_option("ServerAliveCountMax=2").is_ok());
        assert!(matches!(
            o.push_option("SomethingUnknown=1"),
            Err(ConfigError::UnknownKeyword { .. })
        ));
        assert!(
            o.push_option("ForwardAgent=yes").is_ok(),
            "known, unused keyword"
        );
        assert!(o.push_option("User=a b").is_err(), "extra arguments");
        assert!(parse_jumps("-oops").is_err());
        let o = SshOptions {
            config_file: Some(PathBuf::from("/nonexistent/cfg")),
            ..Default::default()
        };
        assert!(matches!(
            o.resolve(&dest("h")),
            Err(ConfigError::Unreadable { .. })
        ));
    }

    #[test]
    fn line_splitting_like_openssh() {
        assert_eq!(
            argv_split(r#"a "b c" 'd e' f\ g h#i # comment"#).unwrap(),
            vec!["a", "b c", "d e", "f g", "h#i"]
        );
        assert!(argv_split("\"open").is_err());
        assert_eq!(split_keyword("  Port=22"), Some(("Port", "22")));
        assert_eq!(split_keyword("Port = 22"), Some(("Port", "22")));
        assert_eq!(parse_time("-", "k", "1h30m").unwrap(), 5400);
        assert_eq!(parse_time("-", "k", "90").unwrap(), 90);
        assert!(parse_time("-", "k", "1x").is_err());
    }

    #[test]
    fn final_pass_lowercased_hostname_and_ignore_unknown() {
        let (_dir, o) = opts_with(
            "IgnoreUnknown Foo*\nFooBar yes\n\
             Host x\n HostName ABC.%h.Def # trailing comment\n\
             Match final host abc.x.def\n Port 4444\n\
             Host abc.x.def\n User finaluser\n",
        );
        let r = o.resolve(&dest("x")).unwrap();
        assert_eq!(r.hostname, "abc.x.def");
        assert_eq!(r.port, 4444);
        assert_eq!(r.user, "finaluser");
        let (_dir, o) = opts_with("Host X\n Port 1\nMatch host X\n Port 2\n");
        assert_eq!(
            o.resolve(&dest("x")).unwrap().port,
            2,
            "Host is case-sensitive"
        );
    }
}
