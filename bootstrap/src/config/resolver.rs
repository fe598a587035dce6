//! Reading config files in OpenSSH's passes: `Host`, `Match`, `Include` and the lines
//! they make active.

use std::path::{Path, PathBuf};

use super::expand::{connection_hash, expand, tilde_expand};
use super::lexer::{argv_split, split_keyword};
use super::settings::{syntax, Settings, KNOWN_KEYWORDS};
use super::system::local_uid;
use super::ConfigError;
use crate::pattern::{match_hostname, match_pattern, match_pattern_list};

/// Which pass and which names a config line is evaluated against.
pub(super) struct Pass<'a> {
    /// Name `Host` lines match: the host as typed in the first pass, the final (expanded,
    /// lowercased) host name in the final pass.
    pub(super) host: &'a str,
    /// The host as typed (`Match originalhost`, `%n`).
    pub(super) original_host: &'a str,
    /// The final pass (`Match final`/`canonical` are true).
    pub(super) final_pass: bool,
}

/// Flags of one config file read.
#[derive(Clone, Copy)]
pub(super) struct FileFlags {
    /// A user config (`-F` or `~/.ssh/config`): relative `Include`s are under `~/.ssh`.
    pub(super) user_conf: bool,
    /// Inside an `Include` from an inactive block: parse (so errors show) but apply nothing.
    pub(super) never_match: bool,
}

pub(super) struct Resolver {
    pub(super) settings: Settings,
    pub(super) home: PathBuf,
    pub(super) local_user: String,
    pub(super) this_host: String,
    pub(super) want_final: bool,
}

impl Resolver {
    /// The host `Match host` sees: in the first pass `HostName` with `%h` expanded (else the
    /// host as typed); in the final pass the final host name.
    pub(super) fn match_host(&self, pass: &Pass<'_>) -> Result<String, ConfigError> {
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

    pub(super) fn eval_match(
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

    pub(super) fn include_paths(
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
        let anchored = if pattern.starts_with('/')
            || Path::new(pattern).is_absolute()
            || pattern.starts_with('~')
        {
            pattern.to_string()
        } else if flags.user_conf {
            format!("~/.ssh/{pattern}")
        } else {
            format!(
                "{}/{pattern}",
                crate::platform::system_ssh_dir_here().display()
            )
        };
        let full = tilde_expand(&anchored, &self.home).map_err(|r| syntax(origin, r))?;
        Ok(glob_paths(&full))
    }

    /// Read one file. `active` is whether lines before the first Host/Match apply; it is
    /// carried through (an Include continues the including block).
    pub(super) fn read_file(
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
    pub(super) fn process_line(
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
                self.settings
                    .apply(origin, &key, rest, &args, apply, flags.user_conf)?;
            }
        }
        Ok(())
    }

    /// All config files of one pass, OpenSSH's `process_config_files`.
    pub(super) fn process_files(
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
                    &crate::platform::system_ssh_dir_here().join("ssh_config"),
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

/// `Match exec`: run `cmd` with `$SHELL -c` (stdin and stdout to /dev/null, stderr kept),
/// true when it exits 0, as OpenSSH's `execute_in_shell`.
pub(super) fn run_match_exec(cmd: &str, origin: &str) -> Result<bool, ConfigError> {
    let (shell, mut exec) = crate::platform::shell::shell_command_blocking(cmd);
    let status = exec
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
pub(super) fn glob_paths(pattern: &str) -> Vec<PathBuf> {
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
