//! "Read-only" means proven read-only, and "always allow" never stores a rule wider than the
//! approval.

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
    // wrappers: exactly what was approved
    ("env FOO=1 make", Some("Bash(env FOO=1 make)")),
    ("xargs -n1 echo", Some("Bash(xargs -n1 echo)")),
    ("timeout 10 cargo test", Some("Bash(timeout 10 cargo test)")),
    ("nice -n 5 make", Some("Bash(nice -n 5 make)")),
    ("nohup ./server", Some("Bash(nohup ./server)")),
    ("command ls", Some("Bash(command ls)")),
    ("exec make", Some("Bash(exec make)")),
    ("stdbuf -oL make", Some("Bash(stdbuf -oL make)")),
    ("time make", Some("Bash(time make)")),
    // interpreters
    ("bash build.sh", Some("Bash(bash build.sh)")),
    ("sh -c 'make all'", Some("Bash(sh -c 'make all')")),
    ("python3 -c 'print(1)'", Some("Bash(python3 -c 'print(1)')")),
    ("python3 script.py", Some("Bash(python3 script.py)")),
    (
        "node -e 'console.log(1)'",
        Some("Bash(node -e 'console.log(1)')"),
    ),
    ("perl -e 'print 1'", Some("Bash(perl -e 'print 1')")),
    ("eval make", Some("Bash(eval make)")),
    ("awk '{print $1}' f", Some("Bash(awk '\\{print $1\\}' f)")),
    // find
    ("find . -name '*.o'", Some("Bash(find . -name '\\*.o')")),
    (
        "find . -name x -exec ls {} +",
        Some("Bash(find . -name x -exec ls \\{\\} +)"),
    ),
    // a subcommand that cannot be told
    (
        "git -c user.name=x commit",
        Some("Bash(git -c user.name=x commit)"),
    ),
    ("cargo +nightly build", Some("Bash(cargo +nightly build)")),
    ("./run.sh --fast", Some("Bash(./run.sh --fast)")),
    ("FOO=1 make", Some("Bash(FOO=1 make)")),
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
