//! The host binary's command line, parsed by hand: clap cost about 200 KB of every upload
//! (docs/REMOTE.md "Architectures"). The laptop client is its main reader; the flags, their
//! `--flag value` / `--flag=value` forms, the `REASONIX_*` environment fallbacks, the help
//! texts (`cli_help/`, as clap printed them) and the exit codes (0 for help, 2 for a usage
//! error, with the message on stderr) are what they were with clap.

use std::path::PathBuf;

use reasonix_remote::attach::OtherBuild;

/// The parsed command line.
pub struct Cli {
    /// `-V` / `--version`: print the build id and exit.
    pub version: bool,
    pub command: Option<Cmd>,
}

pub enum Cmd {
    Daemon(DaemonArgs),
    Attach(AttachArgs),
    Status {
        json: bool,
    },
    Stop {
        workspace: Option<PathBuf>,
        all: bool,
    },
    Capabilities,
    ApplyDelta(ApplyDeltaArgs),
}

#[derive(Clone)]
pub struct AttachArgs {
    pub daemon: DaemonArgs,
    pub hello_fd: Option<i32>,
    pub tag: Option<String>,
    pub other_build: OtherBuild,
    pub mkdir: bool,
}

pub struct ApplyDeltaArgs {
    pub base: PathBuf,
    pub out: PathBuf,
}

#[derive(Clone)]
pub struct DaemonArgs {
    pub workspace: PathBuf,
    pub idle_timeout: u64,
    pub link_grace: u64,
    pub heartbeat_ms: u64,
    pub dead_after_ms: u64,
}

impl DaemonArgs {
    pub fn passthrough(&self) -> Vec<String> {
        vec![
            format!("--idle-timeout={}", self.idle_timeout),
            format!("--link-grace={}", self.link_grace),
            format!("--heartbeat-ms={}", self.heartbeat_ms),
            format!("--dead-after-ms={}", self.dead_after_ms),
        ]
    }
}

/// Why the command line does not run a command: help to print (exit 0) or a usage error
/// (exit 2, on stderr).
#[derive(Debug, PartialEq)]
pub enum Exit {
    Help(&'static str),
    Usage(String),
}

const ROOT_HELP: &str = include_str!("cli_help/root.txt");
const ROOT_USAGE: &str = "reasonix-remote [COMMAND]";

/// One subcommand: its name, help texts (`-h`, `--help`), usage line and options (long
/// name, value name or `None` for a flag).
struct Spec {
    name: &'static str,
    short_help: &'static str,
    long_help: &'static str,
    usage: &'static str,
    options: &'static [(&'static str, Option<&'static str>)],
}

const DAEMON_OPTIONS: [(&str, Option<&str>); 5] = [
    ("workspace", Some("WORKSPACE")),
    ("idle-timeout", Some("IDLE_TIMEOUT")),
    ("link-grace", Some("LINK_GRACE")),
    ("heartbeat-ms", Some("HEARTBEAT_MS")),
    ("dead-after-ms", Some("DEAD_AFTER_MS")),
];
const ATTACH_OPTIONS: [(&str, Option<&str>); 9] = [
    DAEMON_OPTIONS[0],
    DAEMON_OPTIONS[1],
    DAEMON_OPTIONS[2],
    DAEMON_OPTIONS[3],
    DAEMON_OPTIONS[4],
    ("hello-fd", Some("FD")),
    ("tag", Some("TAG")),
    ("other-build", Some("OTHER_BUILD")),
    ("mkdir", None),
];

const SPECS: [Spec; 6] = [
    Spec {
        name: "daemon",
        short_help: include_str!("cli_help/daemon.txt"),
        long_help: include_str!("cli_help/daemon.txt"),
        usage: "reasonix-remote daemon [OPTIONS]",
        options: &DAEMON_OPTIONS,
    },
    Spec {
        name: "attach",
        short_help: include_str!("cli_help/attach_short.txt"),
        long_help: include_str!("cli_help/attach.txt"),
        usage: "reasonix-remote attach [OPTIONS]",
        options: &ATTACH_OPTIONS,
    },
    Spec {
        name: "status",
        short_help: include_str!("cli_help/status.txt"),
        long_help: include_str!("cli_help/status.txt"),
        usage: "reasonix-remote status [OPTIONS]",
        options: &[("json", None)],
    },
    Spec {
        name: "stop",
        short_help: include_str!("cli_help/stop.txt"),
        long_help: include_str!("cli_help/stop.txt"),
        usage: "reasonix-remote stop [OPTIONS]",
        options: &[("workspace", Some("WORKSPACE")), ("all", None)],
    },
    Spec {
        name: "capabilities",
        short_help: include_str!("cli_help/capabilities.txt"),
        long_help: include_str!("cli_help/capabilities.txt"),
        usage: "reasonix-remote capabilities",
        options: &[],
    },
    Spec {
        name: "apply-delta",
        short_help: include_str!("cli_help/apply-delta.txt"),
        long_help: include_str!("cli_help/apply-delta.txt"),
        usage: "reasonix-remote apply-delta --base <BASE> --out <OUT>",
        options: &[("base", Some("BASE")), ("out", Some("OUT"))],
    },
];

fn usage_error(msg: &str, usage: &str) -> Exit {
    Exit::Usage(format!(
        "error: {msg}\n\nUsage: {usage}\n\nFor more information, try '--help'.\n"
    ))
}

/// Parse the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Cli, Exit> {
    let mut args = args.into_iter();
    let mut version = false;
    let name = loop {
        match args.next() {
            None => {
                return Ok(Cli {
                    version,
                    command: None,
                })
            }
            Some(a) if a == "-V" || a == "--version" => version = true,
            Some(a) if a == "-h" || a == "--help" => return Err(Exit::Help(ROOT_HELP)),
            Some(a) if a.starts_with('-') && a != "-" => {
                return Err(usage_error(
                    &format!("unexpected argument '{a}' found"),
                    ROOT_USAGE,
                ))
            }
            Some(a) => break a,
        }
    };
    if name == "help" {
        return Err(match args.next() {
            None => Exit::Help(ROOT_HELP),
            Some(sub) => match SPECS.iter().find(|s| s.name == sub) {
                Some(spec) => Exit::Help(spec.long_help),
                None => usage_error(&format!("unrecognized subcommand '{sub}'"), ROOT_USAGE),
            },
        });
    }
    let Some(spec) = SPECS.iter().find(|s| s.name == name) else {
        return Err(usage_error(
            &format!("unrecognized subcommand '{name}'"),
            ROOT_USAGE,
        ));
    };
    let given = options(spec, args)?;
    let command = build(spec, given)?;
    Ok(Cli {
        version,
        command: Some(command),
    })
}

/// The options given to one subcommand: (long name, value) in order; a flag's value is "".
type Given = Vec<(&'static str, String)>;

fn options(spec: &Spec, mut args: impl Iterator<Item = String>) -> Result<Given, Exit> {
    let mut given: Given = Vec::new();
    while let Some(a) = args.next() {
        if a == "-h" {
            return Err(Exit::Help(spec.short_help));
        }
        if a == "--help" {
            return Err(Exit::Help(spec.long_help));
        }
        let unexpected = || usage_error(&format!("unexpected argument '{a}' found"), spec.usage);
        let Some(body) = a.strip_prefix("--") else {
            return Err(unexpected());
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let Some(&(long, value_name)) = spec.options.iter().find(|(n, _)| *n == name) else {
            return Err(unexpected());
        };
        let shown = match value_name {
            Some(v) => format!("--{long} <{v}>"),
            None => format!("--{long}"),
        };
        if given.iter().any(|(n, _)| *n == long) {
            return Err(usage_error(
                &format!("the argument '{shown}' cannot be used multiple times"),
                spec.usage,
            ));
        }
        let value = match (value_name, inline) {
            (None, None) => String::new(),
            (None, Some(_)) => {
                return Err(usage_error(
                    &format!("unexpected value for '{shown}' found; no more were expected"),
                    spec.usage,
                ))
            }
            (Some(_), Some(v)) => v,
            (Some(_), None) => match args.next() {
                Some(v) if !v.starts_with("--") => v,
                _ => {
                    return Err(usage_error(
                        &format!("a value is required for '{shown}' but none was supplied"),
                        spec.usage,
                    ))
                }
            },
        };
        if value_name.is_some() && value.is_empty() {
            return Err(usage_error(
                &format!("a value is required for '{shown}' but none was supplied"),
                spec.usage,
            ));
        }
        given.push((long, value));
    }
    Ok(given)
}

fn value<'a>(given: &'a Given, long: &str) -> Option<&'a str> {
    given
        .iter()
        .find(|(n, _)| *n == long)
        .map(|(_, v)| v.as_str())
}

/// A number option: the flag, else its environment variable (unset or empty: the default).
fn number<T: std::str::FromStr>(
    given: &Given,
    long: &str,
    value_name: &str,
    env: Option<&str>,
    default: T,
) -> Result<T, Exit>
where
    T::Err: std::fmt::Display,
{
    let from_env = env
        .and_then(|e| std::env::var(e).ok())
        .filter(|v| !v.is_empty());
    let Some(raw) = value(given, long).map(str::to_string).or(from_env) else {
        return Ok(default);
    };
    raw.parse().map_err(|e| {
        Exit::Usage(format!(
            "error: invalid value '{raw}' for '--{long} <{value_name}>': {e}\n\nFor more information, try '--help'.\n"
        ))
    })
}

fn daemon_args(given: &Given) -> Result<DaemonArgs, Exit> {
    Ok(DaemonArgs {
        workspace: PathBuf::from(value(given, "workspace").unwrap_or(".")),
        idle_timeout: number(
            given,
            "idle-timeout",
            "IDLE_TIMEOUT",
            Some("REASONIX_IDLE_TIMEOUT_SECS"),
            1800,
        )?,
        link_grace: number(
            given,
            "link-grace",
            "LINK_GRACE",
            Some("REASONIX_LINK_GRACE_SECS"),
            1800,
        )?,
        heartbeat_ms: number(
            given,
            "heartbeat-ms",
            "HEARTBEAT_MS",
            Some("REASONIX_HEARTBEAT_MS"),
            5000,
        )?,
        dead_after_ms: number(
            given,
            "dead-after-ms",
            "DEAD_AFTER_MS",
            Some("REASONIX_DEAD_AFTER_MS"),
            15000,
        )?,
    })
}

fn build(spec: &Spec, given: Given) -> Result<Cmd, Exit> {
    let has = |long: &str| value(&given, long).is_some();
    let required = |what: &str, usage: &str| {
        usage_error(
            &format!("the following required arguments were not provided:\n  {what}"),
            usage,
        )
    };
    Ok(match spec.name {
        "daemon" => Cmd::Daemon(daemon_args(&given)?),
        "attach" => {
            let other_build = match value(&given, "other-build") {
                None => OtherBuild::Ask,
                Some(v) => OtherBuild::from_flag(v).ok_or_else(|| {
                    Exit::Usage(format!(
                        "error: invalid value '{v}' for '--other-build <OTHER_BUILD>'\n  [possible values: ask, replace, attach]\n\nFor more information, try '--help'.\n"
                    ))
                })?,
            };
            let hello_fd = match value(&given, "hello-fd") {
                None => None,
                Some(_) => Some(number(&given, "hello-fd", "FD", None, 0i32)?),
            };
            Cmd::Attach(AttachArgs {
                daemon: daemon_args(&given)?,
                hello_fd,
                tag: value(&given, "tag").map(str::to_string),
                other_build,
                mkdir: has("mkdir"),
            })
        }
        "status" => Cmd::Status { json: has("json") },
        "stop" => {
            let all = has("all");
            let workspace = value(&given, "workspace").map(PathBuf::from);
            if all && workspace.is_some() {
                return Err(usage_error(
                    "the argument '--workspace <WORKSPACE>' cannot be used with '--all'",
                    "reasonix-remote stop --workspace <WORKSPACE>",
                ));
            }
            if !all && workspace.is_none() {
                return Err(required(
                    "--workspace <WORKSPACE>",
                    "reasonix-remote stop --workspace <WORKSPACE>",
                ));
            }
            Cmd::Stop { workspace, all }
        }
        "capabilities" => Cmd::Capabilities,
        _ => {
            let (Some(base), Some(out)) = (value(&given, "base"), value(&given, "out")) else {
                let missing: Vec<&str> = [("base", "--base <BASE>"), ("out", "--out <OUT>")]
                    .into_iter()
                    .filter(|(n, _)| !has(n))
                    .map(|(_, s)| s)
                    .collect();
                return Err(required(&missing.join("\n  "), spec.usage));
            };
            Cmd::ApplyDelta(ApplyDeltaArgs {
                base: PathBuf::from(base),
                out: PathBuf::from(out),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Cli, Exit> {
        parse(args.iter().map(|s| s.to_string()))
    }

    fn usage(args: &[&str]) -> String {
        match p(args) {
            Err(Exit::Usage(m)) => m,
            Err(Exit::Help(_)) => panic!("{args:?}: help, not a usage error"),
            Ok(_) => panic!("{args:?}: parsed"),
        }
    }

    #[test]
    fn the_laptop_clients_command_lines_parse() {
        // What bootstrap/src/attach.rs and local/src/connect.rs send.
        let cli = p(&[
            "attach",
            "--workspace=my ws/it's",
            "--idle-timeout=5",
            "--tag",
            "t2",
            "--other-build",
            "replace",
            "--hello-fd",
            "3",
            "--mkdir",
        ])
        .unwrap_or_else(|_| panic!("parses"));
        let Some(Cmd::Attach(a)) = cli.command else {
            panic!("attach")
        };
        assert_eq!(a.daemon.workspace, PathBuf::from("my ws/it's"));
        assert_eq!(a.daemon.idle_timeout, 5);
        assert_eq!(a.daemon.link_grace, 1800);
        assert_eq!(a.tag.as_deref(), Some("t2"));
        assert_eq!(a.other_build, OtherBuild::Replace);
        assert_eq!(a.hello_fd, Some(3));
        assert!(a.mkdir);
        assert_eq!(
            a.daemon.passthrough(),
            [
                "--idle-timeout=5",
                "--link-grace=1800",
                "--heartbeat-ms=5000",
                "--dead-after-ms=15000"
            ]
        );
        let Ok(Cli {
            command: Some(Cmd::Daemon(d)),
            version: false,
        }) = p(&[
            "daemon",
            "--workspace",
            "/w",
            "--heartbeat-ms=250",
            "--dead-after-ms",
            "900",
        ])
        else {
            panic!("daemon")
        };
        assert_eq!(
            (d.workspace, d.heartbeat_ms, d.dead_after_ms),
            ("/w".into(), 250, 900)
        );
        assert!(matches!(
            p(&["stop", "--all"]),
            Ok(Cli {
                command: Some(Cmd::Stop {
                    workspace: None,
                    all: true
                }),
                ..
            })
        ));
        assert!(matches!(
            p(&["status", "--json"]),
            Ok(Cli {
                command: Some(Cmd::Status { json: true }),
                ..
            })
        ));
        assert!(matches!(
            p(&["apply-delta", "--base", "a", "--out=b"]),
            Ok(Cli {
                command: Some(Cmd::ApplyDelta(_)),
                ..
            })
        ));
        assert!(matches!(
            p(&["capabilities"]),
            Ok(Cli {
                command: Some(Cmd::Capabilities),
                ..
            })
        ));
        assert!(matches!(
            p(&["--version"]),
            Ok(Cli {
                version: true,
                command: None
            })
        ));
        assert!(matches!(
            p(&["-V"]),
            Ok(Cli {
                version: true,
                command: None
            })
        ));
        assert!(matches!(
            p(&[]),
            Ok(Cli {
                version: false,
                command: None
            })
        ));
    }

    #[test]
    fn help_is_clap_s_text() {
        assert_eq!(p(&["--help"]).err(), Some(Exit::Help(ROOT_HELP)));
        assert_eq!(p(&["help"]).err(), Some(Exit::Help(ROOT_HELP)));
        let Some(Exit::Help(h)) = p(&["attach", "--help"]).err() else {
            panic!("help")
        };
        assert!(h.contains("Possible values:") && h.contains("[env: REASONIX_HEARTBEAT_MS=]"));
        let Some(Exit::Help(short)) = p(&["attach", "-h"]).err() else {
            panic!("help")
        };
        assert!(
            short.contains("[possible values: ask, replace, attach]"),
            "{short}"
        );
        assert_eq!(p(&["help", "daemon"]).err(), p(&["daemon", "--help"]).err());
        assert!(ROOT_HELP.starts_with("Reasonix host process\n\nUsage: reasonix-remote [COMMAND]"));
    }

    #[test]
    fn usage_errors_name_the_argument() {
        assert!(usage(&["bogus"]).contains("unrecognized subcommand 'bogus'"));
        assert!(usage(&["daemon", "--nope"]).contains("unexpected argument '--nope' found"));
        assert!(usage(&["daemon", "stray"]).contains("unexpected argument 'stray' found"));
        assert!(usage(&["attach", "--other-build", "x"])
            .contains("invalid value 'x' for '--other-build <OTHER_BUILD>'"));
        assert!(usage(&["daemon", "--idle-timeout=soon"])
            .contains("invalid value 'soon' for '--idle-timeout <IDLE_TIMEOUT>'"));
        assert!(usage(&["daemon", "--workspace"]).contains("a value is required for '--workspace"));
        assert!(usage(&["daemon", "--workspace=a", "--workspace=b"])
            .contains("cannot be used multiple times"));
        assert!(usage(&["stop"]).contains("required arguments were not provided"));
        assert!(usage(&["stop", "--all", "--workspace", "w"]).contains("cannot be used with"));
        assert!(usage(&["apply-delta", "--base", "a"]).contains("--out <OUT>"));
        assert!(usage(&["status", "--json=yes"]).contains("unexpected value"));
    }
}
