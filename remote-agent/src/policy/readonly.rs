//! Commands that pass without a rule because they cannot change anything.

use super::bash::{strip_assignments, Piece};

/// Commands that only read: they pass without a rule.
const READ_ONLY_COMMANDS: [&str; 52] = [
    "cat",
    "ls",
    "ll",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "head",
    "tail",
    "wc",
    "pwd",
    "echo",
    "printf",
    "which",
    "whereis",
    "type",
    "file",
    "stat",
    "du",
    "df",
    "tree",
    "sort",
    "uniq",
    "diff",
    "cmp",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "date",
    "whoami",
    "id",
    "hostname",
    "uname",
    "true",
    "false",
    "test",
    "[",
    "nl",
    "cut",
    "tr",
    "column",
    "jq",
    "sha256sum",
    "sha1sum",
    "md5sum",
    "cksum",
    "hexdump",
    "od",
    "strings",
    "cd",
    "find",
];

const READ_ONLY_GIT: [&str; 10] = [
    "status",
    "log",
    "diff",
    "show",
    "blame",
    "ls-files",
    "rev-parse",
    "describe",
    "shortlog",
    "grep",
];

/// True when `piece` is a command that cannot change anything.
pub fn is_read_only_command(piece: &Piece) -> bool {
    if piece.has_ops {
        return false;
    }
    let words = &piece.words;
    // `FOO=bar cat` could set LD_PRELOAD or similar.
    let Some(first) = words.first() else {
        return true;
    };
    if strip_assignments(words).len() != words.len() {
        return false;
    }
    let args = &words[1..];
    match first.as_str() {
        "find" => !args.iter().any(|a| {
            matches!(
                a.as_str(),
                "-exec"
                    | "-execdir"
                    | "-ok"
                    | "-okdir"
                    | "-delete"
                    | "-fprint"
                    | "-fprint0"
                    | "-fprintf"
                    | "-fls"
            )
        }),
        "sort" => !args.iter().any(|a| {
            a == "-o" || a.starts_with("--output") || (a.starts_with("-o") && !a.starts_with("--"))
        }),
        "uniq" => args.iter().filter(|a| !a.starts_with('-')).count() <= 1,
        "git" => {
            let Some(sub) = args.first() else {
                return false;
            };
            if args
                .iter()
                .any(|a| a.starts_with("--output") || a == "--ext-diff")
            {
                return false;
            }
            let rest = &args[1..];
            match sub.as_str() {
                s if READ_ONLY_GIT.contains(&s) => true,
                "branch" => rest.iter().all(|a| {
                    matches!(
                        a.as_str(),
                        "-a" | "-r"
                            | "-v"
                            | "-vv"
                            | "--list"
                            | "--all"
                            | "--show-current"
                            | "--remotes"
                    )
                }),
                "remote" => rest.is_empty() || rest.iter().all(|a| a == "-v" || a == "--verbose"),
                "tag" => rest.is_empty() || rest.iter().all(|a| a == "-l" || a == "--list"),
                _ => false,
            }
        }
        f => READ_ONLY_COMMANDS.contains(&f),
    }
}
