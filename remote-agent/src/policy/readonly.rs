//! Commands that pass without a rule because they are proven read-only: the command is on an
//! allowlist, and so is every option it is given where the command has options that run
//! another program or write (`rg --pre`, `sort -o`, `sort --compress-program`, `tree -o`,
//! `date -s`, `git grep -O`, `find -exec`, ...). Anything else is not read-only, so it falls
//! to the rules and the mode.
//!
//! Long options are compared whole: GNU tools accept unambiguous abbreviations
//! (`--compress-prog`), and an abbreviation is simply not on the allowlist.

use super::bash::Piece;
use super::wrappers::is_assignment;

/// Commands without an option or operand that writes or runs anything.
const ANY_ARGS: [&str; 43] = [
    ":",
    "cat",
    "ls",
    "ll",
    "grep",
    "egrep",
    "fgrep",
    "head",
    "tail",
    "wc",
    "pwd",
    "echo",
    "printf",
    "which",
    "whereis",
    "type",
    "stat",
    "du",
    "df",
    "diff",
    "cmp",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "whoami",
    "id",
    "uname",
    "true",
    "false",
    "test",
    "[",
    "[[",
    "nl",
    "cut",
    "tr",
    "column",
    "sha256sum",
    "sha1sum",
    "md5sum",
    "cksum",
    "strings",
    "cd",
];

/// Option syntax of one command: short letters without and with a value, long options
/// without and with a value. Options not listed make the command not read-only.
struct Flags {
    short: &'static str,
    short_val: &'static str,
    long: &'static [&'static str],
    long_val: &'static [&'static str],
}

/// Checks every option of `args` against `f`. Returns the operands, or None when an option
/// is not allowed. `numeric`: `-5` style counts are operands of the option syntax.
fn operands<'a>(args: &'a [String], f: &Flags, numeric: bool) -> Option<Vec<&'a String>> {
    let mut ops = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            ops.extend(args[i + 1..].iter());
            return Some(ops);
        }
        if !a.starts_with('-') || a == "-" {
            ops.push(a);
            i += 1;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, has_value) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            if f.long_val.contains(&name) {
                i += if has_value { 1 } else { 2 };
            } else if f.long.contains(&name) && !has_value {
                i += 1;
            } else {
                return None;
            }
            continue;
        }
        let body: Vec<char> = a[1..].chars().collect();
        if numeric && body.iter().all(|c| c.is_ascii_digit()) {
            i += 1;
            continue;
        }
        let mut step = 1;
        for (k, ch) in body.iter().enumerate() {
            if f.short_val.contains(*ch) {
                if k + 1 == body.len() {
                    step = 2;
                }
                break;
            }
            if !f.short.contains(*ch) {
                return None;
            }
        }
        i += step;
    }
    Some(ops)
}

const RG: Flags = Flags {
    // Everything except -z (runs decompressors); --pre, --pre-glob and --search-zip are absent.
    short: "abcFhHiIlLnNopPqsSuUvwxU0.",
    short_val: "ABCdeEfgjmMrtT",
    long: &[
        "binary",
        "byte-offset",
        "case-sensitive",
        "color",
        "column",
        "count",
        "count-matches",
        "crlf",
        "files",
        "files-with-matches",
        "files-without-match",
        "fixed-strings",
        "follow",
        "heading",
        "hidden",
        "ignore-case",
        "invert-match",
        "json",
        "line-number",
        "no-heading",
        "no-filename",
        "no-ignore",
        "no-ignore-vcs",
        "no-line-number",
        "no-messages",
        "null",
        "only-matching",
        "pretty",
        "quiet",
        "smart-case",
        "sort-files",
        "stats",
        "text",
        "trim",
        "type-list",
        "vimgrep",
        "with-filename",
        "word-regexp",
        "line-regexp",
        "multiline",
        "multiline-dotall",
        "pcre2",
        "unrestricted",
        "no-config",
        "glob-case-insensitive",
        "passthru",
        "debug",
        "files-with-matches",
    ],
    long_val: &[
        "after-context",
        "before-context",
        "context",
        "regexp",
        "file",
        "glob",
        "iglob",
        "max-count",
        "max-depth",
        "max-filesize",
        "max-columns",
        "type",
        "type-not",
        "type-add",
        "threads",
        "sort",
        "sortr",
        "encoding",
        "engine",
        "colors",
        "replace",
        "field-match-separator",
        "field-context-separator",
        "path-separator",
        "context-separator",
        "ignore-file",
        "dfa-size-limit",
        "regex-size-limit",
    ],
};

const SORT: Flags = Flags {
    // No -o/--output (writes), -T (writes temporary files) or --compress-program (runs it).
    short: "bdfgiMhnRrVcCmsuz",
    short_val: "ktS",
    long: &[
        "ignore-leading-blanks",
        "dictionary-order",
        "ignore-case",
        "general-numeric-sort",
        "ignore-nonprinting",
        "month-sort",
        "human-numeric-sort",
        "numeric-sort",
        "random-sort",
        "reverse",
        "version-sort",
        "check",
        "merge",
        "stable",
        "unique",
        "zero-terminated",
        "debug",
    ],
    long_val: &[
        "key",
        "field-separator",
        "buffer-size",
        "parallel",
        "sort",
        "files0-from",
        "random-source",
    ],
};

const TREE: Flags = Flags {
    // No -o (writes a file) or -R (writes 00Tree.html files with -H).
    short: "adlfxsughDFqNQpiACJXnr",
    short_val: "LPI",
    long: &[
        "noreport",
        "dirsfirst",
        "gitignore",
        "prune",
        "inodes",
        "device",
        "du",
        "si",
        "matchdirs",
        "ignore-case",
        "fromfile",
        "help",
        "version",
    ],
    long_val: &["filelimit", "charset", "timefmt", "sort", "gitfile", "info"],
};

const FILE: Flags = Flags {
    // No -C/--compile (writes magic.mgc).
    short: "bcEhiklLNnprsSzZ0",
    short_val: "efFmP",
    long: &[
        "brief",
        "checking-printout",
        "keep-going",
        "list",
        "dereference",
        "mime",
        "mime-type",
        "mime-encoding",
        "no-buffer",
        "no-pad",
        "preserve-date",
        "raw",
        "special-files",
        "no-sandbox",
        "uncompress",
        "uncompress-noreport",
        "print0",
        "extension",
        "apple",
        "no-dereference",
    ],
    long_val: &[
        "exclude",
        "exclude-quiet",
        "files-from",
        "separator",
        "magic-file",
        "parameter",
    ],
};

const DATE: Flags = Flags {
    // No -s/--set; operands must be `+FORMAT` (a bare operand sets the clock).
    short: "uRI",
    short_val: "dfr",
    long: &["utc", "universal", "rfc-email", "debug", "iso-8601"],
    long_val: &[
        "date",
        "file",
        "reference",
        "rfc-3339",
        "iso-8601",
        "resolution",
    ],
};

const HOSTNAME: Flags = Flags {
    // No -F/--file or operands (they set the name).
    short: "aAdfiIsy",
    short_val: "",
    long: &[
        "alias",
        "all-fqdns",
        "domain",
        "fqdn",
        "long",
        "ip-address",
        "all-ip-addresses",
        "short",
        "yp",
        "nis",
    ],
    long_val: &[],
};

const HEXDUMP: Flags = Flags {
    short: "bcCdovx",
    short_val: "ensf",
    long: &[],
    long_val: &[],
};

const OD: Flags = Flags {
    short: "bcdDfFiIlLoOsvxX",
    short_val: "AjNStw",
    long: &["output-duplicates", "traditional"],
    long_val: &[
        "address-radix",
        "skip-bytes",
        "read-bytes",
        "format",
        "strings",
        "width",
        "endian",
    ],
};

const JQ: Flags = Flags {
    // jq only reads; `--rawfile`/`--slurpfile` read files. No module search paths (-L).
    short: "cnrjaseSCMtR",
    short_val: "f",
    long: &[
        "compact-output",
        "null-input",
        "raw-input",
        "raw-output",
        "join-output",
        "ascii-output",
        "slurp",
        "exit-status",
        "sort-keys",
        "color-output",
        "monochrome-output",
        "tab",
        "seq",
        "stream",
        "raw-output0",
    ],
    long_val: &["arg", "argjson", "indent", "from-file"],
};

/// find actions that write or run commands.
const FIND_WRITES: [&str; 9] = [
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
];

/// git subcommands that only read, and for each the options that run programs or write.
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

/// git long options (and every abbreviation of them) that run a program or write a file.
const GIT_DANGEROUS_LONG: [&str; 7] = [
    "output",
    "ext-diff",
    "textconv",
    "open-files-in-pager",
    "exec",
    "upload-pack",
    "receive-pack",
];

fn git_read_only(args: &[String]) -> bool {
    // Global options before the subcommand: only ones that change nothing are accepted; `-c`,
    // `--config-env`, `--exec-path`, `-C`, `--git-dir` and `--work-tree` can name programs or
    // another repository's config.
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "--no-pager" | "-P" | "--no-optional-locks" | "--literal-pathspecs" => i += 1,
            _ => break,
        }
    }
    let Some(sub) = args.get(i) else {
        return false;
    };
    let rest = &args[i + 1..];
    for a in rest {
        if let Some(long) = a.strip_prefix("--") {
            let name = long.split_once('=').map_or(long, |(n, _)| n);
            // parse-options accepts unambiguous prefixes, so `--outp` is `--output`.
            if !name.is_empty()
                && GIT_DANGEROUS_LONG
                    .iter()
                    .any(|d| d.starts_with(name) && name.len() >= 2)
            {
                return false;
            }
        }
    }
    match sub.as_str() {
        // `git grep -O[pager]` opens matches in a pager program.
        "grep" => !rest
            .iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('O')),
        s if READ_ONLY_GIT.contains(&s) => true,
        "branch" => rest.iter().all(|a| {
            matches!(
                a.as_str(),
                "-a" | "-r" | "-v" | "-vv" | "--list" | "--all" | "--show-current" | "--remotes"
            )
        }),
        "remote" => rest.is_empty() || rest.iter().all(|a| a == "-v" || a == "--verbose"),
        "tag" => rest.is_empty() || rest.iter().all(|a| a == "-l" || a == "--list"),
        _ => false,
    }
}

/// True when `piece` is a command that cannot change anything.
pub fn is_read_only_command(piece: &Piece) -> bool {
    if piece.has_ops || piece.opaque.is_some() {
        return false;
    }
    let words = &piece.words;
    let Some(first) = words.first() else {
        return true;
    };
    // `FOO=bar cat` could set LD_PRELOAD or similar.
    if is_assignment(first) {
        return false;
    }
    let args = &words[1..];
    match first.as_str() {
        "find" => !args.iter().any(|a| FIND_WRITES.contains(&a.as_str())),
        "rg" => operands(args, &RG, false).is_some(),
        "sort" => operands(args, &SORT, false).is_some(),
        "tree" => operands(args, &TREE, false).is_some(),
        "file" => operands(args, &FILE, false).is_some(),
        "date" => {
            operands(args, &DATE, false).is_some_and(|ops| ops.iter().all(|o| o.starts_with('+')))
        }
        "hostname" => operands(args, &HOSTNAME, false).is_some_and(|ops| ops.is_empty()),
        "hexdump" => operands(args, &HEXDUMP, false).is_some(),
        "od" => operands(args, &OD, false).is_some(),
        "jq" => operands(args, &JQ, false).is_some(),
        // `uniq in out` writes `out`.
        "uniq" => args.iter().filter(|a| !a.starts_with('-')).count() <= 1,
        "git" => git_read_only(args),
        f => ANY_ARGS.contains(&f),
    }
}
