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

mod expand;
mod lexer;
mod resolver;
mod settings;
mod system;

use std::path::PathBuf;
use std::time::Duration;

use crate::dest::{split_host_port, valid_hostname, valid_ruser, Destination};

pub(crate) use expand::expand;
use expand::{connection_hash, tilde_expand};
#[cfg(test)]
use lexer::argv_split;
use lexer::split_keyword;
use resolver::{FileFlags, Pass, Resolver};
#[cfg(test)]
use settings::parse_time;
use settings::{syntax, Canonicalize, Settings};
use system::{canonical_address, default_home, local_uid, local_user, this_host};

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
    /// `RefuseConnection yes` applies to this host.
    #[error("{origin}: RefuseConnection is set for {host}, so reasonix does not connect (as ssh would not)")]
    Refused {
        /// Where it was set.
        origin: String,
        /// The host as typed.
        host: String,
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
    /// `ForwardAgent` (`-A`): the laptop's agent is offered to the host (through the link,
    /// not SSH's own agent forwarding; issue #36 §2).
    pub forward_agent: bool,
    /// The agent to forward when `ForwardAgent` named one (a path, or `$VAR`'s value);
    /// `None`: `$SSH_AUTH_SOCK` (on Windows the OpenSSH agent's pipe), as OpenSSH does.
    pub forward_agent_socket: Option<PathBuf>,
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

/// Check one ProxyJump value the way OpenSSH's `parse_jump` does (comment stripped, every
/// hop parsed); `none` is valid.
fn check_jump(value: &str) -> Result<(), ConfigError> {
    let v = value.split('#').next().unwrap_or("").trim_end();
    if value.eq_ignore_ascii_case("none") {
        return Ok(());
    }
    parse_jumps(v).map(|_| ())
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
    /// file (or `~/.ssh/config` and `/etc/ssh/ssh_config`, `%ProgramData%\ssh\ssh_config` on Windows), a final pass when asked for,
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
            r.settings
                .add_identity_file("-i", &f.display().to_string(), true)?;
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
            r.settings.user = dest.user.clone();
        }
        // The user named on the command line (`-o User=`, else the destination's) is checked
        // like the host; a `User` from a config file is not (as in OpenSSH).
        if let Some(u) = &r.settings.user {
            if !valid_ruser(u) {
                return Err(syntax(
                    "destination",
                    format!("remote user name '{u}' contains invalid characters"),
                ));
            }
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
        if let Some((true, origin)) = &s.refuse_connection {
            return Err(ConfigError::Refused {
                origin: origin.clone(),
                host: host_arg,
            });
        }
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
                .map(|(f, _)| f)
                // `none` counts as given (no defaults) but names no file.
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
            Some("SSH_AUTH_SOCK") | None => crate::platform::default_agent(
                crate::platform::Os::THIS,
                std::env::var_os("SSH_AUTH_SOCK"),
            ),
            Some(v) => match v.strip_prefix('$').filter(|n| !n.starts_with('{')) {
                Some(var) => std::env::var_os(var).map(PathBuf::from),
                None => Some(expand_path("IdentityAgent", v)?),
            },
        };
        let (forward_agent, forward_agent_socket) = match &s.forward_agent {
            Some((on, Some(v))) => match v.strip_prefix('$').filter(|n| !n.starts_with('{')) {
                Some(var) => (*on, std::env::var_os(var).map(PathBuf::from)),
                None => (*on, Some(expand_path("ForwardAgent", v)?)),
            },
            Some((on, None)) => (*on, None),
            None => (false, None),
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
            None => {
                let dir = crate::platform::system_ssh_dir_here();
                vec![dir.join("ssh_known_hosts"), dir.join("ssh_known_hosts2")]
            }
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
            forward_agent,
            forward_agent_socket,
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
    fn forward_agent_is_a_flag_or_the_agent_to_forward() {
        let resolve = |opt: &str| {
            let mut o = SshOptions {
                config_file: Some(PathBuf::from("none")),
                home: Some(PathBuf::from("/home/me")),
                ..Default::default()
            };
            if !opt.is_empty() {
                o.push_option(opt).unwrap();
            }
            let r = o.resolve(&dest("h")).unwrap();
            (r.forward_agent, r.forward_agent_socket)
        };
        assert_eq!(resolve(""), (false, None));
        assert_eq!(resolve("ForwardAgent=yes"), (true, None));
        assert_eq!(resolve("ForwardAgent=no"), (false, None));
        assert_eq!(
            resolve("ForwardAgent=~/agent.sock"),
            (true, Some(PathBuf::from("/home/me/agent.sock")))
        );
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
    fn newer_and_vendor_keywords_read_and_refuse_connection_holds() {
        let (_dir, o) = opts_with(
            "UseKeychain yes\nObscureKeystrokeTiming no\nHost bad\n RefuseConnection yes\n",
        );
        assert!(o.resolve(&dest("good")).is_ok());
        let err = o.resolve(&dest("bad")).unwrap_err();
        assert!(matches!(err, ConfigError::Refused { .. }), "{err}");
        assert!(err.to_string().contains("line 4"), "{err}");
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
