//! OpenSSH-compatible options: the command line (`-p -i -J -F -o`) and `ssh_config` files.
//!
//! Semantics follow OpenSSH: for each setting the *first* value obtained wins, command-line
//! options are applied before any file, and `IdentityFile` / `UserKnownHostsFile` accumulate.
//! Supported keywords: Host, Match (all, host, originalhost, user, localuser, final,
//! canonical; `exec` never matches), Include, HostName, User, Port, IdentityFile,
//! IdentitiesOnly, IdentityAgent, ProxyJump, UserKnownHostsFile, GlobalKnownHostsFile,
//! StrictHostKeyChecking, HashKnownHosts, ConnectTimeout, ServerAliveInterval,
//! ServerAliveCountMax, BatchMode, NumberOfPasswordPrompts, PasswordAuthentication,
//! KbdInteractiveAuthentication, PubkeyAuthentication, PreferredAuthentications. Other
//! keywords are accepted and ignored (logged at debug level).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::dest::{parse_port, split_host_port, Destination};

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
    /// `None` means `$HOME`. Tests point it at a temp dir.
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
    /// The real host name or address to dial (and to look up in known_hosts).
    pub hostname: String,
    /// TCP port.
    pub port: u16,
    /// Remote user.
    pub user: String,
    /// Identity files to try, in order, already expanded (may not exist).
    pub identity_files: Vec<PathBuf>,
    /// True when identity files came from `-i`/`IdentityFile` (missing ones are reported).
    pub identity_files_explicit: bool,
    /// Use only the listed identity files (agent keys must match one of them).
    pub identities_only: bool,
    /// ssh-agent socket (`IdentityAgent`, else `$SSH_AUTH_SOCK`); `None` disables the agent.
    pub identity_agent: Option<PathBuf>,
    /// Hops to go through, first hop first.
    pub proxy_jump: Vec<JumpHost>,
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
    user_known_hosts: Option<Vec<String>>,
    global_known_hosts: Option<Vec<String>>,
    strict: Option<StrictHostKeyChecking>,
    hash_known_hosts: Option<bool>,
    connect_timeout: Option<u64>,
    server_alive_interval: Option<u64>,
    server_alive_count_max: Option<u32>,
    batch_mode: Option<bool>,
    number_of_password_prompts: Option<u32>,
    pubkey: Option<bool>,
    password: Option<bool>,
    kbd: Option<bool>,
    preferred: Option<Vec<String>>,
}

fn parse_yes_no(origin: &str, key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" => Ok(true),
        "no" | "false" => Ok(false),
        _ => Err(bad(origin, key, v, "expected yes or no")),
    }
}

fn bad(origin: &str, key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::BadValue {
        origin: origin.to_string(),
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

fn parse_secs(origin: &str, key: &str, v: &str) -> Result<u64, ConfigError> {
    v.parse::<u64>()
        .map_err(|_| bad(origin, key, v, "expected a number of seconds"))
}

impl Settings {
    /// Apply one keyword; returns false for keywords we do not know (ignored).
    fn apply(&mut self, origin: &str, key: &str, args: &[String]) -> Result<bool, ConfigError> {
        let lower = key.to_ascii_lowercase();
        let first = args.first().map(String::as_str).unwrap_or("");
        if args.is_empty() {
            return Err(bad(origin, key, "", "missing value"));
        }
        match lower.as_str() {
            "hostname" => {
                self.hostname.get_or_insert_with(|| first.to_string());
            }
            "user" => {
                self.user.get_or_insert_with(|| first.to_string());
            }
            "port" => {
                let p = parse_port(first).map_err(|r| bad(origin, key, first, &r))?;
                self.port.get_or_insert(p);
            }
            "identityfile" => {
                if !first.eq_ignore_ascii_case("none") {
                    self.identity_files.push(first.to_string());
                }
            }
            "identitiesonly" => {
                let v = parse_yes_no(origin, key, first)?;
                self.identities_only.get_or_insert(v);
            }
            "identityagent" => {
                self.identity_agent.get_or_insert_with(|| first.to_string());
            }
            "proxyjump" => {
                self.proxy_jump.get_or_insert_with(|| first.to_string());
            }
            "userknownhostsfile" => {
                self.user_known_hosts.get_or_insert_with(|| args.to_vec());
            }
            "globalknownhostsfile" => {
                self.global_known_hosts.get_or_insert_with(|| args.to_vec());
            }
            "stricthostkeychecking" => {
                let v = match first.to_ascii_lowercase().as_str() {
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
                self.strict.get_or_insert(v);
            }
            "hashknownhosts" => {
                let v = parse_yes_no(origin, key, first)?;
                self.hash_known_hosts.get_or_insert(v);
            }
            "connecttimeout" => {
                let v = if first.eq_ignore_ascii_case("none") {
                    0
                } else {
                    parse_secs(origin, key, first)?
                };
                self.connect_timeout.get_or_insert(v);
            }
            "serveraliveinterval" => {
                let v = parse_secs(origin, key, first)?;
                self.server_alive_interval.get_or_insert(v);
            }
            "serveralivecountmax" => {
                let v = first
                    .parse::<u32>()
                    .map_err(|_| bad(origin, key, first, "expected a number"))?;
                self.server_alive_count_max.get_or_insert(v);
            }
            "batchmode" => {
                let v = parse_yes_no(origin, key, first)?;
                self.batch_mode.get_or_insert(v);
            }
            "numberofpasswordprompts" => {
                let v = first
                    .parse::<u32>()
                    .map_err(|_| bad(origin, key, first, "expected a number"))?;
                self.number_of_password_prompts.get_or_insert(v);
            }
            "pubkeyauthentication" => {
                let v = parse_yes_no(origin, key, first)?;
                self.pubkey.get_or_insert(v);
            }
            "passwordauthentication" => {
                let v = parse_yes_no(origin, key, first)?;
                self.password.get_or_insert(v);
            }
            "kbdinteractiveauthentication" | "challengeresponseauthentication" => {
                let v = parse_yes_no(origin, key, first)?;
                self.kbd.get_or_insert(v);
            }
            "preferredauthentications" => {
                let list = first.split(',').map(|s| s.trim().to_string()).collect();
                self.preferred.get_or_insert(list);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Split a config line's arguments: whitespace-separated, double quotes group words.
fn tokenize(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut has = false;
    for c in s.chars() {
        match c {
            '"' => {
                in_quotes = !in_quotes;
                has = true;
            }
            c if c.is_whitespace() && !in_quotes => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            c => {
                cur.push(c);
                has = true;
            }
        }
    }
    if has {
        out.push(cur);
    }
    out
}

/// Split `Key Value`, `Key=Value` or `Key = Value` into the keyword and the rest.
fn split_keyword(line: &str) -> Option<(&str, &str)> {
    let line = line.trim();
    let end = line.find(|c: char| c.is_whitespace() || c == '=')?;
    let key = &line[..end];
    let mut rest = line[end..].trim_start();
    if let Some(r) = rest.strip_prefix('=') {
        rest = r.trim_start();
    }
    Some((key, rest))
}

/// Glob match with `*` and `?`, case-insensitive (host names and user names in patterns).
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// OpenSSH pattern-list semantics: any negated match → false; otherwise true if any positive
/// pattern matches.
pub(crate) fn pattern_list_match<'a>(
    patterns: impl IntoIterator<Item = &'a str>,
    text: &str,
) -> bool {
    let mut positive = false;
    for pat in patterns {
        if let Some(neg) = pat.strip_prefix('!') {
            if glob_match(neg, text) {
                return false;
            }
        } else if glob_match(pat, text) {
            positive = true;
        }
    }
    positive
}

fn local_user() -> String {
    if let Ok(u) = std::env::var("USER") {
        if !u.is_empty() {
            return u;
        }
    }
    // SAFETY: getpwuid returns a pointer into static storage or null; we copy the name out
    // immediately and only read it while no other call can run on this thread.
    unsafe {
        let pw = libc::getpwuid(libc::geteuid());
        if !pw.is_null() && !(*pw).pw_name.is_null() {
            if let Ok(s) = std::ffi::CStr::from_ptr((*pw).pw_name).to_str() {
                return s.to_string();
            }
        }
    }
    "root".to_string()
}

fn default_home() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => PathBuf::from(h),
        _ => PathBuf::from("/"),
    }
}

struct Resolver<'a> {
    settings: Settings,
    alias: &'a str,
    home: PathBuf,
    local_user: String,
}

impl Resolver<'_> {
    fn current_hostname(&self) -> String {
        self.settings
            .hostname
            .clone()
            .unwrap_or_else(|| self.alias.to_string())
    }

    fn current_user(&self) -> String {
        self.settings
            .user
            .clone()
            .unwrap_or_else(|| self.local_user.clone())
    }

    fn eval_match(&self, args: &[String], origin: &str) -> bool {
        let mut i = 0;
        let mut result = true;
        while i < args.len() {
            let raw = args[i].as_str();
            let (negate, crit) = match raw.strip_prefix('!') {
                Some(c) => (true, c),
                None => (false, raw),
            };
            let crit = crit.to_ascii_lowercase();
            let value_match = |i: usize, text: &str| -> bool {
                args.get(i + 1)
                    .map(|list| pattern_list_match(list.split(','), text))
                    .unwrap_or(false)
            };
            let (matched, consumed) = match crit.as_str() {
                "all" | "canonical" | "final" => (true, 1),
                "host" => (value_match(i, &self.current_hostname()), 2),
                "originalhost" => (value_match(i, self.alias), 2),
                "user" => (value_match(i, &self.current_user()), 2),
                "localuser" => (value_match(i, &self.local_user), 2),
                other => {
                    tracing::debug!(
                        origin,
                        criterion = other,
                        "unsupported Match criterion never matches"
                    );
                    (false, 2)
                }
            };
            if matched == negate {
                result = false;
            }
            i += consumed;
        }
        result
    }

    fn include_paths(&self, pattern: &str, base: &Path) -> Vec<PathBuf> {
        let expanded = expand_tilde(pattern, &self.home);
        let full = if Path::new(&expanded).is_absolute() {
            PathBuf::from(expanded)
        } else {
            base.join(expanded)
        };
        let Some(name) = full.file_name().and_then(|n| n.to_str()) else {
            return vec![full];
        };
        if !name.contains(['*', '?']) {
            return vec![full];
        }
        let dir = full.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_str().is_some_and(|n| glob_match(name, n)))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Apply one file. `active` is whether lines before the first Host/Match apply.
    fn apply_file(
        &mut self,
        path: &Path,
        include_base: &Path,
        mut active: bool,
        depth: u32,
        required: bool,
    ) -> Result<(), ConfigError> {
        if depth > 16 {
            return Err(ConfigError::IncludeDepth(path.to_path_buf()));
        }
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if !required => {
                tracing::debug!(path = %path.display(), error = %e, "ssh config not read");
                return Ok(());
            }
            Err(e) => {
                return Err(ConfigError::Unreadable {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                })
            }
        };
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, rest)) = split_keyword(line) else {
                continue;
            };
            let args = tokenize(rest);
            let origin = format!("{}:{}", path.display(), n + 1);
            match key.to_ascii_lowercase().as_str() {
                "host" => active = pattern_list_match(args.iter().map(String::as_str), self.alias),
                "match" => active = self.eval_match(&args, &origin),
                "include" => {
                    if active {
                        for pat in &args {
                            for file in self.include_paths(pat, include_base) {
                                self.apply_file(&file, include_base, true, depth + 1, false)?;
                            }
                        }
                    }
                }
                _ if !active => {}
                _ => {
                    if !self.settings.apply(&origin, key, &args)? {
                        tracing::debug!(origin, key, "ignored ssh_config keyword");
                    }
                }
            }
        }
        Ok(())
    }
}

fn expand_tilde(s: &str, home: &Path) -> String {
    if s == "~" {
        return home.display().to_string();
    }
    match s.strip_prefix("~/") {
        Some(rest) => home.join(rest).display().to_string(),
        None => s.to_string(),
    }
}

/// Expand `~`, `%d %u %r %h %p %n %%` in a path-like value.
fn expand_tokens(s: &str, home: &Path, local_user: &str, r: &ResolvedTokens<'_>) -> String {
    let s = expand_tilde(s, home);
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('d') => out.push_str(&home.display().to_string()),
            Some('u') => out.push_str(local_user),
            Some('r') => out.push_str(r.user),
            Some('h') => out.push_str(r.hostname),
            Some('p') => out.push_str(&r.port.to_string()),
            Some('n') => out.push_str(r.alias),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

struct ResolvedTokens<'a> {
    user: &'a str,
    hostname: &'a str,
    port: u16,
    alias: &'a str,
}

/// Parse a `ProxyJump` value into hops; `none` gives no hops.
pub fn parse_jumps(value: &str) -> Result<Vec<JumpHost>, ConfigError> {
    if value.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let mut hops = Vec::new();
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || ConfigError::BadJump(part.to_string());
        let body = part.strip_prefix("ssh://").unwrap_or(part);
        let body = body.strip_suffix('/').unwrap_or(body);
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
        let mut probe = Settings::default();
        probe.apply("-o", key, &tokenize(value))?;
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

    /// Resolve every setting for `dest` (command line, then `-F` file or `~/.ssh/config`
    /// and `/etc/ssh/ssh_config`, then defaults).
    pub fn resolve(&self, dest: &Destination) -> Result<ResolvedHost, ConfigError> {
        let home = self.home.clone().unwrap_or_else(default_home);
        let mut r = Resolver {
            settings: Settings::default(),
            alias: &dest.host,
            home: home.clone(),
            local_user: local_user(),
        };
        // The destination's own user/port beat everything, as in OpenSSH.
        if let Some(u) = &dest.user {
            r.settings.user = Some(u.clone());
        }
        if let Some(p) = dest.port {
            r.settings.port = Some(p);
        }
        if let Some(p) = self.port {
            r.settings.port.get_or_insert(p);
        }
        for f in &self.identity_files {
            r.settings.identity_files.push(f.display().to_string());
        }
        if let Some(j) = &self.jump {
            r.settings.proxy_jump.get_or_insert_with(|| j.clone());
        }
        for (k, v) in &self.options {
            r.settings.apply("-o", k, &tokenize(v))?;
        }
        match &self.config_file {
            Some(p) if p.as_os_str() == "none" => {}
            Some(p) => {
                let base = home.join(".ssh");
                r.apply_file(p, &base, true, 0, true)?;
            }
            None => {
                let user_cfg = home.join(".ssh").join("config");
                r.apply_file(&user_cfg, &home.join(".ssh"), true, 0, false)?;
                r.apply_file(
                    Path::new("/etc/ssh/ssh_config"),
                    Path::new("/etc/ssh"),
                    true,
                    0,
                    false,
                )?;
            }
        }
        let s = r.settings;
        let local_user = r.local_user;
        let hostname = s.hostname.clone().unwrap_or_else(|| dest.host.clone());
        let hostname = hostname.replace("%h", &dest.host);
        let user = s.user.clone().unwrap_or_else(|| local_user.clone());
        let port = s.port.unwrap_or(22);
        let tokens = ResolvedTokens {
            user: &user,
            hostname: &hostname,
            port,
            alias: &dest.host,
        };
        let expand = |v: &str| PathBuf::from(expand_tokens(v, &home, &local_user, &tokens));
        let identity_files_explicit = !s.identity_files.is_empty();
        let identity_files: Vec<PathBuf> = if identity_files_explicit {
            s.identity_files.iter().map(|f| expand(f)).collect()
        } else {
            [
                "id_rsa",
                "id_ecdsa",
                "id_ecdsa_sk",
                "id_ed25519",
                "id_ed25519_sk",
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
            Some(v) => match v.strip_prefix('$') {
                Some(var) => std::env::var_os(var).map(PathBuf::from),
                None => Some(expand(v)),
            },
        };
        let files = |list: &Option<Vec<String>>, default: &[&str]| -> Vec<PathBuf> {
            match list {
                Some(l) => l
                    .iter()
                    .filter(|v| !v.eq_ignore_ascii_case("none"))
                    .map(|v| expand(v))
                    .collect(),
                None => default.iter().map(|v| expand(v)).collect(),
            }
        };
        let user_known_hosts_files = files(
            &s.user_known_hosts,
            &["~/.ssh/known_hosts", "~/.ssh/known_hosts2"],
        );
        let global_known_hosts_files = files(
            &s.global_known_hosts,
            &["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"],
        );
        let proxy_jump = match &s.proxy_jump {
            Some(v) => parse_jumps(v)?,
            None => Vec::new(),
        };
        let secs = |v: Option<u64>| v.filter(|s| *s > 0).map(Duration::from_secs);
        Ok(ResolvedHost {
            alias: dest.host.clone(),
            hostname,
            port,
            user,
            identity_files,
            identity_files_explicit,
            identities_only: s.identities_only.unwrap_or(false),
            identity_agent,
            proxy_jump,
            user_known_hosts_files,
            global_known_hosts_files,
            strict_host_key_checking: s.strict.unwrap_or(StrictHostKeyChecking::Ask),
            hash_known_hosts: s.hash_known_hosts.unwrap_or(false),
            connect_timeout: secs(s.connect_timeout),
            server_alive_interval: secs(s.server_alive_interval),
            server_alive_count_max: s.server_alive_count_max.unwrap_or(3),
            batch_mode: s.batch_mode.unwrap_or(false),
            number_of_password_prompts: s.number_of_password_prompts.unwrap_or(3),
            pubkey_authentication: s.pubkey.unwrap_or(true),
            password_authentication: s.password.unwrap_or(true),
            kbd_interactive_authentication: s.kbd.unwrap_or(true),
            preferred_authentications: s.preferred.unwrap_or_else(|| {
                vec![
                    "publickey".into(),
                    "keyboard-interactive".into(),
                    "password".into(),
                ]
            }),
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
        let r = o.resolve(&dest("h")).unwrap();
        assert_eq!(r.user, "cliuser");
        assert_eq!(r.port, 3000);
        assert_eq!(
            r.identity_files,
            vec![PathBuf::from("/cli"), PathBuf::from("/f")]
        );
        assert_eq!(r.strict_host_key_checking, StrictHostKeyChecking::No);
        // The destination's user beats -o User.
        let r = o.resolve(&dest("root@h")).unwrap();
        assert_eq!(r.user, "root");
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
        assert!(o.push_option("SomethingUnknown=1").is_ok());
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
    fn glob() {
        assert!(glob_match("*.example.com", "a.b.example.com"));
        assert!(glob_match("h?st", "HOST"));
        assert!(!glob_match("h?st", "hoost"));
        assert!(glob_match("*", ""));
        assert!(pattern_list_match(["*", "!bad"], "good"));
        assert!(!pattern_list_match(["*", "!bad"], "bad"));
    }
}
