//! "Read-only" means proven read-only, and "always allow" never stores a rule wider than the
//! approval, nor any rule for a command whose effect is not fixed by its words.

#![allow(clippy::unwrap_used)] // tests may unwrap

use reasonix_remote::policy::{is_read_only_command, split_command, Decision, Mode, Policy};
use serde_json::json;

fn read_only(cmd: &str) -> bool {
    let pieces = split_command(cmd);
    !pieces.is_empty() && pieces.iter().all(is_read_only_command)
}

/// Commands with an option or operand that runs another program or writes.
const NOT_READ_ONLY: &[&str] = &[
    "rg --pre ./evil x",
    "rg --pre=./evil x",
    "rg --pre-glob '*.pdf' --pre x y",
    "rg -z x",
    "rg --search-zip x",
    "rg -iz x",
    "git grep -O x",
    "git grep -Ovim x",
    "git grep --open-files-in-pager=vim x",
    "git grep --open-files-in-pager x",
    "git grep --open x",
    "git grep -nO x",
    "sort --compress-program=sh x",
    "sort --compress-prog=sh x",
    "sort -o out x",
    "sort -oout x",
    "sort --output=out x",
    "sort -T /tmp x",
    "sort -ro out x",
    "tree -o out",
    "tree -R -H . -o x",
    "date -s 2020-01-01",
    "date --set=2020-01-01",
    "date 0101000020",
    "hostname evil",
    "hostname -F file",
    "file -C -m magic",
    "file --compile",
    "find . -exec cat {} \\;",
    "find . -execdir ls \\;",
    "find . -ok ls \\;",
    "find . -delete",
    "find . -fprint out",
    "find . -fprintf out %p",
    "find . -fls out",
    "sed -i s/a/b/ f",
    "sed -n p f",
    "awk 'BEGIN{system(\"id\")}'",
    "awk '{print}' f",
    "less f",
    "more f",
    "vi f",
    "man ls",
    "xxd -r dump out",
    "xxd f",
    "git -c core.pager=sh log",
    "git -c alias.st='!sh' st",
    "git --config-env=core.pager=X log",
    "git -C other status",
    "git --git-dir=other/.git log",
    "git log --output=out",
    "git log --outp=out",
    "git diff --ext-diff",
    "git diff --ext",
    "git diff --textconv",
    "git show --textconv HEAD",
    "git branch -D x",
    "git branch newname",
    "git tag v1",
    "git remote add x y",
    "git push",
    "git checkout .",
    "uniq in out",
    "cat x > y",
    "cat $(id)",
    "echo `id`",
    "LD_PRELOAD=x cat f",
    "$x",
    "./cat f",
    "/tmp/cat f",
    "jq -L /tmp/mods . f",
    "jq --rawfile x /etc/shadow .",
    "od --unknown f",
    "hexdump -Z f",
    "env cat f",
    "xargs cat",
    "tee f",
    "touch f",
    "dd if=a of=b",
    "python3 -c 'print(1)'",
];

/// Commands that are read-only with the options given.
const READ_ONLY: &[&str] = &[
    "cat -n f",
    "ls -la",
    "grep -rn x src",
    "rg -n --hidden -g '*.rs' x",
    "rg -A 3 -tpy x",
    "rg --json x",
    "sort -rn -k2 f",
    "sort -t, -k 2 f",
    "sort --unique f",
    "tree -L 2 -a",
    "tree --dirsfirst -I target",
    "date",
    "date +%s",
    "date -u -d yesterday +%F",
    "hostname",
    "hostname -f",
    "file -b --mime-type f",
    "find . -name '*.rs' -type f",
    "find . -maxdepth 2 -print0",
    "git status --short",
    "git log --oneline -5",
    "git diff HEAD~1 --stat",
    "git show HEAD:README.md",
    "git grep -n x",
    "git --no-pager log",
    "git branch -a",
    "git remote -v",
    "git tag -l",
    "head -5 f",
    "tail -n 20 f",
    "wc -l f",
    "jq -r .a f",
    "od -An -tx1 f",
    "hexdump -C f",
    "uniq -c f",
    "echo hi 2>/dev/null",
    "cat f | grep x | wc -l",
    "[[ -f x ]]",
];

#[test]
fn read_only_means_proven_read_only() {
    let mut wrong = Vec::new();
    for cmd in NOT_READ_ONLY {
        if read_only(cmd) {
            wrong.push(format!("`{cmd}` must not be read-only"));
        }
    }
    for cmd in READ_ONLY {
        if !read_only(cmd) {
            wrong.push(format!("`{cmd}` should be read-only"));
        }
    }
    eprintln!(
        "read-only table: {} refused, {} accepted",
        NOT_READ_ONLY.len(),
        READ_ONLY.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Not read-only means it asks in ask mode with no rules.
    let p = Policy::new(Mode::Ask, &[], &[], &[]).unwrap();
    for cmd in NOT_READ_ONLY {
        let d = p.decide("bash", &json!({ "command": cmd }), false);
        assert!(matches!(d, Decision::Ask { .. }), "{cmd}: {d:?}");
    }
}

/// Approved commands and the rule "always allow" may store for them.
const ALWAYS: &[(&str, Option<&str>)] = &[
    ("cargo test --all", Some("Bash(cargo test:*)")),
    ("pytest -x tests/", Some("Bash(pytest:*)")),
    ("npm run build", Some("Bash(npm run:*)")),
    ("make", Some("Bash(make:*)")),
    // wrappers around a fixed command: exactly what was approved
    ("timeout 10 cargo test", Some("Bash(timeout 10 cargo test)")),
    ("nice -n 5 make", Some("Bash(nice -n 5 make)")),
    ("nohup ./server", Some("Bash(nohup ./server)")),
    ("command ls", Some("Bash(command ls)")),
    ("exec make", Some("Bash(exec make)")),
    ("stdbuf -oL make", Some("Bash(stdbuf -oL make)")),
    ("time make", Some("Bash(time make)")),
    // interpreters running a script file
    ("bash build.sh", Some("Bash(bash build.sh)")),
    ("python3 script.py", Some("Bash(python3 script.py)")),
    ("python3 -m pytest -x", Some("Bash(python3 -m pytest -x)")),
    ("node build.js --fast", Some("Bash(node build.js --fast)")),
    ("awk -f prog.awk f", Some("Bash(awk -f prog.awk f)")),
    ("jq '.a' f.json", Some("Bash(jq '.a' f.json)")),
    // find without -exec
    ("find . -name '*.o'", Some("Bash(find . -name '\\*.o')")),
    // a subcommand that cannot be told
    (
        "git -c user.name=x commit",
        Some("Bash(git -c user.name=x commit)"),
    ),
    ("cargo +nightly build", Some("Bash(cargo +nightly build)")),
    ("./run.sh --fast", Some("Bash(./run.sh --fast)")),
    // dangerous or not a single plain command: session only
    ("rm -rf build", None),
    ("sudo make install", None),
    ("env sudo make install", None),
    ("timeout 5 rm -rf x", None),
    ("git push --force", None),
    ("git -C x push -f", None),
    ("make && make install", None),
    ("echo x > y", None),
    ("echo $(id)", None),
    ("$CC x.c", None),
    ("echo x | sh", None),
];

#[test]
fn always_allow_stores_no_wider_rule() {
    let mut wrong = Vec::new();
    for (cmd, want) in ALWAYS {
        let got = Policy::always_rule("bash", &json!({ "command": cmd }));
        if got.as_deref() != *want {
            wrong.push(format!("`{cmd}`: stored {got:?}, want {want:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Each stored rule allows the approved command again, and nothing a wrapper could run.
    for (cmd, want) in ALWAYS {
        let Some(rule) = want else { continue };
        let p = Policy::new(Mode::Ask, &[rule.to_string()], &[], &[]).unwrap();
        let again = p.decide("bash", &json!({ "command": cmd }), false);
        assert_eq!(again, Decision::Allow, "{rule} allows `{cmd}`");
    }
    let p = Policy::new(Mode::Ask, &["Bash(env FOO=1 make)".into()], &[], &[]).unwrap();
    for other in [
        "env FOO=1 make install",
        "env rm -rf /",
        "env FOO=1 make; touch x",
    ] {
        let d = p.decide("bash", &json!({ "command": other }), false);
        assert!(matches!(d, Decision::Ask { .. }), "{other}: {d:?}");
    }
    // A session approval of the same commands behaves the same way.
    let mut p = Policy::new(Mode::Ask, &[], &[], &[]).unwrap();
    p.allow_for_session("bash", &json!({"command": "python3 -c 'print(1)'"}));
    let d = p.decide("bash", &json!({"command": "python3 -c 'import os'"}), false);
    assert!(matches!(d, Decision::Ask { .. }), "{d:?}");
    eprintln!("always-allow table: {} approvals", ALWAYS.len());
}

/// Commands whose effect is not fixed by their words: code or shell text carried in the call,
/// environment assignments, commands found or read when they run. "Always allow" stores no
/// rule for any of them (not even the exact command); they are approved once or for the
/// session.
const DYNAMIC: &[&str] = &[
    // shell text
    "eval make",
    "eval 'rm x'",
    "bash -c 'make all'",
    "sh -c ls",
    "zsh -c 'echo hi'",
    "dash -c make",
    "bash -lc make",
    "bash -x -c make",
    "bash --norc -c make",
    "/bin/sh -c make",
    "bash -s",
    "sh -s arg",
    "bash",
    "sh < script",
    "bash <<'EOF'\nmake\nEOF",
    "sh <<< 'make'",
    "su -c make",
    "flock /tmp/l -c make",
    "script -c make",
    "trap 'make' EXIT",
    "watch make",
    "git -c alias.x='!make' x",
    "env -S 'make all'",
    // programs given inline
    "python3 -c 'print(1)'",
    "python -c pass",
    "python3.12 -c pass",
    "python3 -Bc pass",
    "python3 - <<EOF\nprint(1)\nEOF",
    "python3 <<EOF\nprint(1)\nEOF",
    "python3 <<< 'print(1)'",
    "python3",
    "pypy3 -c pass",
    "node -e 'console.log(1)'",
    "node --eval 'x'",
    "node --eval='x'",
    "node -p 1",
    "nodejs -e x",
    "bun -e x",
    "deno eval 'x'",
    "perl -e 'print 1'",
    "perl -ne 'print' f",
    "perl -E 'say 1'",
    "ruby -e 'p 1'",
    "ruby -pe 'x' f",
    "php -r 'echo 1;'",
    "lua -e 'print(1)'",
    "Rscript -e '1'",
    "osascript -e 'x'",
    "pwsh -c 'x'",
    "pwsh -Command x",
    "tclsh",
    "awk '{print $1}' f",
    "gawk 'BEGIN{}'",
    "sed -n '1p' f",
    "sed -i 's/a/b/' f",
    // commands found or read when they run
    "find . -name x -exec ls {} +",
    "find . -execdir ls {} \\;",
    "find . -ok ls {} \\;",
    "find . -okdir ls {} \\;",
    "xargs -n1 echo",
    "xargs make",
    "parallel echo ::: a b",
    "source env.sh",
    ". ./env.sh",
    // variables
    "FOO=1 make",
    "A=1 B=2 cargo test",
    "PATH=/tmp:$PATH make",
    "env make",
    "env FOO=1 make",
    "env -i make",
    "/usr/bin/env make",
    "$CC x.c",
    "\"$x\" y",
    "${CMD}",
    "$(echo make)",
    "`echo make`",
    "r=make; $r",
    "make $(echo all)",
    "make `echo all`",
];

/// Wrappers that store an exact rule around a fixed command, and a dangerous one.
const WRAPPERS: &[&str] = &[
    "",
    "timeout 5 ",
    "nice -n 5 ",
    "nohup ",
    "command ",
    "exec ",
    "time ",
    "stdbuf -oL ",
    "ionice -c 3 ",
    "setsid ",
    "builtin ",
    "sudo ",
];

#[test]
fn always_allow_never_stores_a_rule_for_a_dynamic_command() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for wrapper in WRAPPERS {
        for cmd in DYNAMIC {
            let full = format!("{wrapper}{cmd}");
            checked += 1;
            if let Some(rule) = Policy::always_rule("bash", &json!({ "command": full })) {
                wrong.push(format!("`{full}` stored `{rule}`"));
            }
        }
    }
    // Every rule an approval may store, against every dynamic shape: none of them allows one.
    let mut crossed = 0;
    for (approved, want) in ALWAYS {
        let Some(rule) = want else { continue };
        let p = Policy::new(Mode::Ask, &[rule.to_string()], &[], &[]).unwrap();
        for cmd in DYNAMIC {
            crossed += 1;
            let d = p.decide("bash", &json!({ "command": cmd }), false);
            if d == Decision::Allow && !read_only(cmd) {
                wrong.push(format!(
                    "rule `{rule}` (stored for `{approved}`) allows dynamic `{cmd}`"
                ));
            }
        }
    }
    eprintln!(
        "always-allow vs dynamic shapes: {checked} wrapped shapes stored nothing; {crossed} stored rules x shapes checked; {} wrong",
        wrong.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(DYNAMIC.len() >= 75, "the table shrank");
}

#[test]
fn dynamic_commands_can_still_be_approved_for_the_session_exactly() {
    for cmd in DYNAMIC {
        let mut p = Policy::new(Mode::Ask, &[], &[], &[]).unwrap();
        p.allow_for_session("bash", &json!({ "command": cmd }));
        // The approved command runs again without asking ...
        assert_eq!(
            p.decide("bash", &json!({ "command": cmd }), false),
            Decision::Allow,
            "`{cmd}` approved for the session"
        );
        // ... and nothing else rides on it.
        let other = format!("{cmd} ; rm -rf ~/x");
        assert!(
            matches!(
                p.decide("bash", &json!({ "command": other }), false),
                Decision::Ask { .. }
            ),
            "`{other}` after approving `{cmd}`"
        );
    }
    // A here-document program is approved with its body: another body asks again.
    let mut p = Policy::new(Mode::Ask, &[], &[], &[]).unwrap();
    p.allow_for_session(
        "bash",
        &json!({ "command": "python3 <<EOF\nprint(1)\nEOF" }),
    );
    let d = p.decide(
        "bash",
        &json!({ "command": "python3 <<EOF\nimport os; os.remove('x')\nEOF" }),
        false,
    );
    assert!(matches!(d, Decision::Ask { .. }), "{d:?}");
}
