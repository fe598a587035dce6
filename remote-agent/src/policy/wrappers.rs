//! What a simple command really runs: the command itself, the commands its wrappers start
//! (`env`, `sudo`, `timeout`, `xargs`, `find -exec`, ...), and the shell text it hands to a
//! shell (`sh -c`, `eval`, `trap`, `su -c`, `watch`, `git -c alias.x=!…`). When that cannot be
//! known without running it (a computed command name, a shell reading its script from stdin),
//! the command is *opaque*, and the policy never allows it without asking.

use super::shapes::{self, Shape};
use super::shell::{shell_words, Word};

/// How deep wrappers may nest (`sudo env nice timeout …`) before the command is opaque.
const MAX_WRAPPERS: usize = 16;

/// What one simple command runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Runs {
    /// Word lists of the commands that run, the command itself first (assignments dropped).
    pub runs: Vec<Vec<String>>,
    /// Shell text that runs as commands too (read recursively by the caller).
    pub scripts: Vec<String>,
    /// Why what runs cannot be known before it runs.
    pub opaque: Option<String>,
    /// The shapes of commands that run with parts only known when they run (a computed
    /// command name or argument), and [`shapes::anything`] for text that cannot be read: a
    /// deny rule that could name one of them applies.
    pub could: Vec<Vec<Shape>>,
    /// Some command runs with `NAME=value` words before it (`FOO=1 make`, `sudo FOO=1
    /// make`): the environment it gets can change what runs.
    pub sets_env: bool,
}

/// The last path component of a command name (`/usr/bin/rm` → `rm`).
pub(super) fn basename(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

/// True for a `NAME=value` (or `NAME+=value`) word.
pub(super) fn is_assignment(w: &str) -> bool {
    w.split_once('=').is_some_and(|(k, _)| {
        let k = k.strip_suffix('+').unwrap_or(k);
        !k.is_empty()
            && !k.starts_with(|c: char| c.is_ascii_digit())
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Analyses the words of one simple command. `stdin_text` is the literal text a
/// here-document or here-string feeds it (a shell reading its commands from there runs it).
pub(super) fn analyze(words: &[Word], stdin_text: Option<&str>) -> Runs {
    let mut out = Runs::default();
    run(words, &mut out, 0, stdin_text);
    out
}

/// Interpreters that run code given inline or read from stdin; also the first words an
/// "always allow" must never widen into a prefix rule.
pub(super) const SHELLS: [&str; 11] = [
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "busybox",
];

/// What runs cannot be known: it could be any command.
fn opaque(out: &mut Runs, why: String) {
    if out.opaque.is_none() {
        out.opaque = Some(why);
    }
    out.could.push(shapes::anything());
}

/// Option syntax of one wrapper: which short letters and long names take a value, and which
/// are known to take none (anything else makes the split ambiguous).
struct Opts {
    short_val: &'static str,
    short_flag: &'static str,
    long_val: &'static [&'static str],
    long_flag: &'static [&'static str],
}

/// Where the wrapper's options end: the index of its first operand, and whether an option
/// was unknown (then the operand boundary is a guess).
fn skip_opts(words: &[Word], from: usize, o: &Opts) -> (usize, bool) {
    let mut i = from;
    let mut unknown = false;
    while let Some(w) = words.get(i) {
        let v = w.value.as_str();
        if v == "--" {
            return (i + 1, unknown);
        }
        if !v.starts_with('-') || v == "-" {
            return (i, unknown);
        }
        if let Some(long) = v.strip_prefix("--") {
            let (name, has_value) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            let name = format!("--{name}");
            if o.long_val.contains(&name.as_str()) {
                i += if has_value { 1 } else { 2 };
            } else {
                unknown |= !o.long_flag.contains(&name.as_str());
                i += 1;
            }
            continue;
        }
        let body: Vec<char> = v[1..].chars().collect();
        let mut step = 1;
        for (k, ch) in body.iter().enumerate() {
            if o.short_val.contains(*ch) {
                if k + 1 == body.len() {
                    step = 2;
                }
                break;
            }
            if !o.short_flag.contains(*ch) {
                unknown = true;
            }
        }
        i += step;
    }
    (i, unknown)
}

fn values(words: &[Word]) -> Vec<String> {
    words.iter().map(|w| w.value.clone()).collect()
}

fn literal_words(words: &[Word]) -> Option<Vec<String>> {
    words
        .iter()
        .all(|w| w.literal && !w.expands)
        .then(|| values(words))
}

/// Shell text from literal words, or marks the command opaque.
fn script_from(words: &[Word], out: &mut Runs, what: &str) {
    match literal_words(words) {
        Some(v) => out.scripts.push(v.join(" ")),
        None => opaque(
            out,
            format!("{what} runs shell text that is only known when it runs"),
        ),
    }
}

/// The inner command of a wrapper: precisely when its options are known, and else at every
/// later word too, so a deny rule still sees it.
fn inner(words: &[Word], at: usize, unknown: bool, out: &mut Runs, depth: usize) {
    if unknown {
        for k in at..words.len() {
            if words[k].literal && !words[k].value.starts_with('-') {
                let mut guess = Runs::default();
                run(&words[k..], &mut guess, depth + 1, None);
                out.runs.extend(guess.runs);
                out.scripts.extend(guess.scripts);
                out.could.extend(guess.could);
                out.sets_env |= guess.sets_env;
            }
        }
    }
    if at < words.len() {
        run(&words[at..], out, depth + 1, None);
    }
}

fn run(words: &[Word], out: &mut Runs, depth: usize, stdin_text: Option<&str>) {
    let skip = words.iter().take_while(|w| is_assignment(&w.value)).count();
    out.sets_env |= skip > 0 && skip < words.len();
    let words = &words[skip..];
    let Some(cmd) = words.first() else { return };
    if depth > MAX_WRAPPERS {
        opaque(out, "too many nested wrappers".to_string());
        return;
    }
    if !cmd.literal || cmd.expands {
        if out.opaque.is_none() {
            out.opaque = Some(format!(
                "the command name `{}` is only known when it runs",
                cmd.value
            ));
        }
        // What is known about it still counts: `"$r" -rf x` could be `rm -rf x`.
        out.could.push(words.iter().flat_map(Shape::of).collect());
        return;
    }
    out.runs.push(values(words));
    if let Some(shapes) = shapes::unknown_shapes(words) {
        out.could.push(shapes);
    }
    let name = basename(&cmd.value);
    let rest = &words[1..];
    const NONE: Opts = Opts {
        short_val: "",
        short_flag: "",
        long_val: &[],
        long_flag: &[],
    };
    match name {
        "sudo" => {
            let o = Opts {
                short_val: "ugpCDrtTUR",
                short_flag: "AbEeHhiKklnPSsVvB",
                long_val: &[
                    "--user",
                    "--group",
                    "--prompt",
                    "--close-from",
                    "--chdir",
                    "--role",
                    "--type",
                    "--command-timeout",
                    "--other-user",
                    "--host",
                    "--chroot",
                ],
                long_flag: &[
                    "--askpass",
                    "--background",
                    "--preserve-env",
                    "--edit",
                    "--set-home",
                    "--login",
                    "--remove-timestamp",
                    "--reset-timestamp",
                    "--list",
                    "--non-interactive",
                    "--preserve-groups",
                    "--stdin",
                    "--shell",
                    "--validate",
                    "--bell",
                ],
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            inner(words, at, unknown, out, depth);
        }
        "doas" => {
            let o = Opts {
                short_val: "uC",
                short_flag: "nsL",
                ..NONE
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            inner(words, at, unknown, out, depth);
        }
        "env" => {
            let o = Opts {
                short_val: "uCS",
                short_flag: "i0v",
                long_val: &["--unset", "--chdir", "--split-string"],
                long_flag: &[
                    "--ignore-environment",
                    "--null",
                    "--debug",
                    "--default-signal",
                    "--ignore-signal",
                    "--block-signal",
                    "--list-signal-handling",
                ],
            };
            // `-S 'cmd args'` / `--split-string=…`: the string is split into the command.
            let mut i = 1;
            while let Some(w) = words.get(i) {
                let v = &w.value;
                let split = if let Some(s) = v.strip_prefix("--split-string=") {
                    Some(s.to_string())
                } else if v == "-S" || v == "--split-string" {
                    words.get(i + 1).map(|n| n.value.clone())
                } else if v.starts_with("-S") && !v.starts_with("--") {
                    Some(v[2..].to_string())
                } else {
                    None
                };
                if let Some(s) = split {
                    if w.literal && words.get(i + 1).is_none_or(|n| n.literal) {
                        out.scripts.push(shell_words(&s).join(" "));
                    } else {
                        opaque(out, "env -S splits a string known only when it runs".into());
                    }
                }
                if !v.starts_with('-') {
                    break;
                }
                i += 1;
            }
            let (at, unknown) = skip_opts(words, 1, &o);
            inner(words, at, unknown, out, depth);
        }
        "nice" => {
            let o = Opts {
                short_val: "n",
                short_flag: "0123456789",
                long_val: &["--adjustment"],
                long_flag: &[],
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            inner(words, at, unknown, out, depth);
        }
        "ionice" => {
            let o = Opts {
                short_val: "cnpPu",
                short_flag: "t",
                long_val: &["--class", "--classdata", "--pid", "--pgid", "--uid"],
                long_flag: &["--ignore"],
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            inner(words, at, unknown, out, depth);
        }
        "timeout" => {
            let o = Opts {
                short_val: "sk",
                short_flag: "v",
                long_val: &["--signal", "--kill-after"],
                long_flag: &["--preserve-status", "--foreground", "--verbose"],
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            // The first operand is the duration.
            inner(words, at + 1, unknown, out, depth);
        }
        "nohup" | "builtin" | "unbuffer" | "catchsegv" | "busybox" | "coproc" => {
            let (at, unknown) = skip_opts(words, 1, &NONE);
            // `coproc NAME { … }`: the command may follow a name, so look at every word.
            inner(
                words,
                at,
                (unknown || name == "coproc") && name != "busybox",
                out,
                depth,
            );
        }
        "command" => {
            let o = Opts {
                short_flag: "pvV",
                ..NONE
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            // `command -v x` only looks x up.
            let lookup = words[1..at.min(words.len())]
                .iter()
                .any(|w| w.value.starts_with('-') && w.value.contains(['v', 'V']));
            if !lookup {
                inner(words, at, unknown, out, depth);
            }
        }
        "exec" => {
            let o = Opts {
                short_val: "a",
                short_flag: "cl",
                ..NONE
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            inner(words, at, unknown, out, depth);
        }
        "time" => {
            let o = Opts {
                short_val: "fo",
                short_flag: "pvaq",
                long_val: &["--format", "--output"],
                long_flag: &["--portability", "--verbose", "--append", "--quiet"],
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            inner(words, at, unknown, out, depth);
        }
        "stdbuf" => {
            let o = Opts {
                short_val: "ioe",
                long_val: &["--input", "--output", "--error"],
                ..NONE
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            inner(words, at, unknown, out, depth);
        }
        "chroot" => {
            let o = Opts {
                long_val: &["--userspec", "--groups"],
                long_flag: &["--skip-chdir"],
                ..NONE
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            inner(words, at + 1, unknown, out, depth);
        }
        "setsid" => {
            let o = Opts {
                short_flag: "cfw",
                long_flag: &["--ctty", "--fork", "--wait"],
                ..NONE
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            inner(words, at, unknown, out, depth);
        }
        "taskset" | "chrt" => {
            let (at, unknown) = skip_opts(words, 1, &NONE);
            let pid_mode = words[1..at.min(words.len())]
                .iter()
                .any(|w| w.value == "-p" || w.value == "--pid");
            if !pid_mode {
                let _ = unknown;
                inner(words, at + 1, true, out, depth);
            }
        }
        "nsenter" | "unshare" | "strace" | "ltrace" | "firejail" | "fakeroot" | "pkexec"
        | "proxychains" | "proxychains4" | "torsocks" | "valgrind" | "sg" => {
            // Many options; look for the command at every later word.
            let (at, _) = skip_opts(words, 1, &NONE);
            inner(words, at, true, out, depth);
        }
        "flock" => {
            let o = Opts {
                short_val: "wEc",
                short_flag: "sxunoFvh",
                long_val: &["--timeout", "--conflict-exit-code", "--command"],
                long_flag: &[
                    "--shared",
                    "--exclusive",
                    "--unlock",
                    "--nonblock",
                    "--close",
                    "--no-fork",
                    "--verbose",
                ],
            };
            if let Some(k) = words
                .iter()
                .position(|w| w.value == "-c" || w.value == "--command")
            {
                script_from(&words[k + 1..(k + 2).min(words.len())], out, "flock -c");
            }
            let (at, unknown) = skip_opts(words, 1, &o);
            // The lock file, then the command (unless `-c` gave it).
            inner(words, at + 1, unknown, out, depth);
        }
        "watch" => {
            let o = Opts {
                short_val: "nq",
                short_flag: "dtbegcxpw",
                long_val: &["--interval", "--differences"],
                long_flag: &[
                    "--no-title",
                    "--beep",
                    "--errexit",
                    "--chgexit",
                    "--color",
                    "--exec",
                    "--precise",
                    "--no-wrap",
                ],
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            // Without -x the arguments are joined and given to `sh -c`.
            if at < words.len() {
                script_from(&words[at..], out, "watch");
            }
            inner(words, at, unknown, out, depth);
        }
        "xargs" => {
            let o = Opts {
                short_val: "aEdILnPs",
                short_flag: "0rtpxeil",
                long_val: &[
                    "--arg-file",
                    "--delimiter",
                    "--max-lines",
                    "--max-args",
                    "--max-procs",
                    "--max-chars",
                    "--process-slot-var",
                ],
                long_flag: &[
                    "--null",
                    "--no-run-if-empty",
                    "--verbose",
                    "--interactive",
                    "--exit",
                    "--open-tty",
                    "--show-limits",
                    "--replace",
                    "--eof",
                ],
            };
            let (at, unknown) = skip_opts(words, 1, &o);
            if at < words.len() {
                inner(words, at, unknown, out, depth);
            } else {
                out.runs.push(vec!["echo".to_string()]);
            }
        }
        "find" => {
            let mut i = 1;
            while i < words.len() {
                let v = words[i].value.as_str();
                match v {
                    "-exec" | "-execdir" | "-ok" | "-okdir" => {
                        let end = words[i + 1..]
                            .iter()
                            .position(|w| w.value == ";" || w.value == "+")
                            .map_or(words.len(), |p| i + 1 + p);
                        run(&words[i + 1..end], out, depth + 1, None);
                        i = end + 1;
                        continue;
                    }
                    // Deleting is what `rm` does; a rule about `rm` covers it.
                    "-delete" => out.runs.push(vec!["rm".to_string()]),
                    _ => {}
                }
                i += 1;
            }
        }
        "eval" => script_from(rest, out, "eval"),
        "source" | "." if rest.first().is_some_and(reads_a_stream) => {
            opaque(out, format!("{name} runs commands from a stream"));
        }
        "trap" => {
            if let Some(first) = rest.first() {
                if !first.value.starts_with('-') && rest.len() > 1 {
                    script_from(&rest[..1], out, "trap");
                }
            }
        }
        "su" | "runuser" => {
            let mut i = 1;
            while let Some(w) = words.get(i) {
                let v = &w.value;
                if v == "-c" || v == "--command" || v == "--session-command" {
                    script_from(&words[i + 1..(i + 2).min(words.len())], out, name);
                    i += 2;
                    continue;
                }
                if let Some(s) = v.strip_prefix("--command=") {
                    if w.literal {
                        out.scripts.push(s.to_string());
                    } else {
                        opaque(out, format!("{name} runs text known only when it runs"));
                    }
                }
                if v == "--" && name == "runuser" {
                    inner(words, i + 1, false, out, depth);
                    break;
                }
                i += 1;
            }
        }
        "script" => {
            if let Some(k) = words
                .iter()
                .position(|w| w.value == "-c" || w.value == "--command")
            {
                script_from(&words[k + 1..(k + 2).min(words.len())], out, "script -c");
            }
        }
        "git" => git(words, out),
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => {
            // awk programs can start commands (`system()`, `print | "cmd"`, `"cmd" | getline`).
            let prog = rest.iter().find(|w| !w.value.starts_with('-'));
            if rest.iter().any(|w| !w.literal)
                || prog.is_some_and(|p| p.value.contains("system") || p.value.contains('|'))
            {
                opaque(out, format!("{name} can run commands from its program"));
            }
        }
        n if SHELLS.contains(&n) => shell(name, words, out, stdin_text),
        _ => {}
    }
}

/// `sh [opts] -c 'text' [name args]`, `sh script`, `sh`/`sh -s args` (stdin: the text of a
/// here-document or here-string when it is literal, else unknown).
fn shell(name: &str, words: &[Word], out: &mut Runs, stdin_text: Option<&str>) {
    if name == "busybox" {
        return;
    }
    let mut i = 1;
    let mut dash_c = false;
    let mut dash_s = false;
    while let Some(w) = words.get(i) {
        let v = w.value.as_str();
        if v == "--" {
            i += 1;
            break;
        }
        if matches!(v, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 2;
            continue;
        }
        if v.starts_with("--") {
            i += 1;
            continue;
        }
        if (v.starts_with('-') || v.starts_with('+')) && v.len() > 1 {
            dash_c |= v[1..].contains('c');
            dash_s |= v.starts_with('-') && v[1..].contains('s');
            i += 1;
            continue;
        }
        break;
    }
    let from_stdin = |out: &mut Runs| match stdin_text {
        Some(text) => out.scripts.push(text.to_string()),
        None => opaque(
            out,
            format!("{name} reads the commands it runs from standard input"),
        ),
    };
    match (dash_c, words.get(i)) {
        (true, Some(text)) => {
            if text.literal {
                out.scripts.push(text.value.clone());
            } else {
                opaque(
                    out,
                    format!("{name} -c runs text that is only known when it runs"),
                );
            }
        }
        (true, None) => {}
        // `-s`: the operands are arguments; the commands come from standard input.
        (false, _) if dash_s => from_stdin(out),
        (false, Some(script)) if reads_stdin(script) => from_stdin(out),
        (false, Some(script)) if reads_a_stream(script) => opaque(
            out,
            format!("{name} runs commands from a stream or a computed file"),
        ),
        // A script file runs, like `./script`.
        (false, Some(_)) => {}
        (false, None) => from_stdin(out),
    }
}

/// A literal script operand naming standard input.
fn reads_stdin(w: &Word) -> bool {
    w.literal
        && !w.expands
        && matches!(
            w.value.as_str(),
            "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0"
        )
}

/// A script operand that is a stream (`<(…)`, `/dev/stdin`, `/proc/self/fd/0`) or computed.
fn reads_a_stream(w: &Word) -> bool {
    !w.literal
        || w.expands
        || w.value == "-"
        || w.value.starts_with("/dev/")
        || w.value.starts_with("/proc/")
}

/// Config keys whose value names a program git runs.
const GIT_PROGRAM_KEYS: [&str; 12] = [
    "pager",
    "editor",
    "command",
    "program",
    "helper",
    "fsmonitor",
    "hookspath",
    "external",
    "textconv",
    "sshcommand",
    "askpass",
    "proxy",
];

fn git(words: &[Word], out: &mut Runs) {
    let mut i = 1;
    let mut normalized = vec![words[0].value.clone()];
    let mut globals = false;
    while let Some(w) = words.get(i) {
        let v = w.value.as_str();
        let (config, step) = match v {
            "-c" => (words.get(i + 1).map(|n| (n.value.as_str(), n.literal)), 2),
            "--config-env" => (None, 2),
            _ if v.starts_with("--config-env=") => (None, 1),
            "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix" => (None, 2),
            _ if v.starts_with("--") && v.contains('=') => (None, 1),
            "--no-pager"
            | "-P"
            | "-p"
            | "--paginate"
            | "--bare"
            | "--literal-pathspecs"
            | "--glob-pathspecs"
            | "--noglob-pathspecs"
            | "--icase-pathspecs"
            | "--no-replace-objects"
            | "--no-optional-locks"
            | "--exec-path" => (None, 1),
            _ => break,
        };
        globals = true;
        if let Some((kv, literal)) = config {
            let (key, val) = kv.split_once('=').unwrap_or((kv, ""));
            let key = key.to_ascii_lowercase();
            if !literal {
                opaque(out, "git -c with a value known only when it runs".into());
            } else if key.starts_with("alias.") {
                if let Some(sh) = val.strip_prefix('!') {
                    out.scripts.push(sh.to_string());
                }
            } else if GIT_PROGRAM_KEYS.iter().any(|k| key.ends_with(k)) {
                opaque(out, format!("git -c {key}=… names a program git runs"));
            }
        }
        if matches!(v, "--config-env") || v.starts_with("--config-env=") {
            opaque(
                out,
                "git --config-env takes config from the environment".into(),
            );
        }
        i += step;
    }
    if globals && i < words.len() {
        normalized.extend(words[i..].iter().map(|w| w.value.clone()));
        out.runs.push(normalized);
    }
}
