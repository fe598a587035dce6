//! The permission decision table: rule forms, compound commands, modes, tighten-only.

#![allow(clippy::unwrap_used)] // tests may unwrap

use reasonix_remote::policy::{split_command, Decision, Mode, Policy};
use serde_json::{json, Value};

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn policy(mode: Mode, allow: &[&str], ask: &[&str], deny: &[&str]) -> Policy {
    Policy::new(mode, &s(allow), &s(ask), &s(deny)).expect("valid rules")
}

fn bash(cmd: &str) -> Value {
    json!({ "command": cmd })
}

fn kind(d: &Decision) -> &'static str {
    match d {
        Decision::Allow => "allow",
        Decision::Ask { .. } => "ask",
        Decision::Deny { .. } => "deny",
    }
}

#[test]
fn read_only_tools_pass_and_writers_follow_the_mode() {
    for (mode, writer) in [
        (Mode::Ask, "ask"),
        (Mode::Auto, "allow"),
        (Mode::Yolo, "allow"),
    ] {
        let p = policy(mode, &[], &[], &[]);
        assert_eq!(
            kind(&p.decide("read_file", &json!({"path": "a"}), true)),
            "allow",
            "{mode:?}"
        );
        assert_eq!(
            kind(&p.decide("write_file", &json!({"path": "a"}), false)),
            writer,
            "{mode:?}"
        );
        assert_eq!(
            kind(&p.decide("bash", &bash("cargo build"), false)),
            writer,
            "{mode:?}"
        );
        assert_eq!(
            kind(&p.decide("mcp__srv__do", &json!({}), false)),
            writer,
            "{mode:?}"
        );
    }
    let p = policy(Mode::Ask, &[], &[], &[]);
    match p.decide("edit_file", &json!({"path": "src/a.rs"}), false) {
        Decision::Ask { reason } => assert_eq!(reason, "edit_file wants to change src/a.rs"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rule_forms_tool_glob_prefix_and_edit_group() {
    let p = policy(
        Mode::Ask,
        &[
            "Edit(src/**)",
            "Bash(cargo test:*)",
            "mcp__github__*",
            "Read",
        ],
        &[],
        &["Edit(*.lock)", "read_file(secrets/**)"],
    );
    // Edit names the writer group; path globs are relative to the workspace.
    for tool in ["write_file", "edit_file", "multi_edit"] {
        assert_eq!(
            kind(&p.decide(tool, &json!({"path": "src/x/y.rs"}), false)),
            "allow",
            "{tool}"
        );
        assert_eq!(
            kind(&p.decide(tool, &json!({"path": "./src/y.rs"}), false)),
            "allow",
            "{tool}"
        );
        assert_eq!(
            kind(&p.decide(tool, &json!({"path": "docs/y.md"}), false)),
            "ask",
            "{tool}"
        );
        // A slash-free glob matches the file name anywhere; deny beats allow.
        assert_eq!(
            kind(&p.decide(tool, &json!({"path": "src/Cargo.lock"}), false)),
            "deny",
            "{tool}"
        );
    }
    // move_file needs both paths allowed; either denied denies.
    assert_eq!(
        kind(&p.decide(
            "move_file",
            &json!({"source_path": "src/a", "destination_path": "src/b"}),
            false
        )),
        "allow"
    );
    assert_eq!(
        kind(&p.decide(
            "move_file",
            &json!({"source_path": "src/a", "destination_path": "b"}),
            false
        )),
        "ask"
    );
    assert_eq!(
        kind(&p.decide(
            "move_file",
            &json!({"source_path": "a.lock", "destination_path": "src/b"}),
            false
        )),
        "deny"
    );
    // Deny applies to read-only tools too.
    assert_eq!(
        kind(&p.decide("read_file", &json!({"path": "secrets/k"}), true)),
        "deny"
    );
    // Tool-name globs (MCP servers).
    assert_eq!(
        kind(&p.decide("mcp__github__create_issue", &json!({}), false)),
        "allow"
    );
    assert_eq!(kind(&p.decide("mcp__other__x", &json!({}), false)), "ask");
    // Bash prefix: word boundary.
    assert_eq!(kind(&p.decide("bash", &bash("cargo test"), false)), "allow");
    assert_eq!(
        kind(&p.decide("bash", &bash("cargo test -p x -- --nocapture"), false)),
        "allow"
    );
    assert_eq!(
        kind(&p.decide("bash", &bash("cargo testing"), false)),
        "ask"
    );
    assert_eq!(
        kind(&p.decide("bash", &bash("cargo  test  --all"), false)),
        "allow",
        "whitespace is not significant"
    );
    // ... never with shell operators, substitutions or writing redirections.
    for cmd in [
        "cargo test > out.txt",
        "cargo test $(rm -rf x)",
        "cargo test `id`",
        "cargo test && curl x | sh",
    ] {
        assert_eq!(kind(&p.decide("bash", &bash(cmd), false)), "ask", "{cmd}");
    }
    assert_eq!(
        kind(&p.decide("bash", &bash("cargo test 2>&1"), false)),
        "allow",
        "fd duplication is fine"
    );
    assert_eq!(
        kind(&p.decide("bash", &bash("cargo test 2>/dev/null"), false)),
        "allow"
    );
    // Absolute paths inside the workspace match relative globs once the workspace is known.
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap();
    let p = policy(Mode::Ask, &["Edit(src/**)"], &[], &[]).with_workspace(&ws);
    assert_eq!(
        kind(&p.decide("write_file", &json!({"path": ws.join("src/a.rs")}), false)),
        "allow"
    );
}

#[test]
fn bad_rules_are_errors() {
    for bad in ["Bash(", "(x)", "Bash()", "Bash(:*)", "Edit([)", "Bad Name"] {
        let err = Policy::new(Mode::Ask, &s(&[bad]), &[], &[]).err();
        assert!(err.is_some(), "{bad} should not parse");
        assert!(
            err.unwrap().to_string().contains(bad),
            "error names the rule"
        );
    }
}

#[test]
fn decision_order_is_deny_ask_allow_fallback() {
    let p = policy(
        Mode::Auto,
        &["Bash(git:*)"],
        &["Bash(git push:*)"],
        &["Bash(git push --force:*)"],
    );
    assert_eq!(
        kind(&p.decide("bash", &bash("git commit -m x"), false)),
        "allow"
    );
    assert_eq!(
        kind(&p.decide("bash", &bash("git push origin main"), false)),
        "ask",
        "ask beats allow, even in auto"
    );
    match p.decide("bash", &bash("git push --force origin"), false) {
        Decision::Deny { reason } => assert_eq!(
            reason,
            "denied by rule `Bash(git push --force:*)` (matched `git push --force origin`)"
        ),
        other => panic!("{other:?}"),
    }
    // Bare Tool rules cover the whole tool.
    let p = policy(Mode::Yolo, &[], &[], &["Bash"]);
    assert_eq!(
        kind(&p.decide("bash", &bash("ls"), false)),
        "deny",
        "yolo still denies"
    );
    let p = policy(Mode::Ask, &["Bash"], &[], &[]);
    assert_eq!(
        kind(&p.decide("bash", &bash("make && ./run"), false)),
        "allow"
    );
    // ... but not pieces that write through a redirection or substitute commands.
    for cmd in [
        "make && ./run > log",
        "echo $(id)",
        "cat `ls`",
        "diff <(a) b",
    ] {
        assert_eq!(kind(&p.decide("bash", &bash(cmd), false)), "ask", "{cmd}");
    }
}

#[test]
fn compound_commands_are_decided_piece_by_piece() {
    let p = policy(
        Mode::Ask,
        &["Bash(npm test:*)"],
        &["Bash(curl:*)"],
        &["Bash(rm:*)"],
    );
    let cases = [
        ("npm test && ls -la", "allow"),
        ("npm test; git status | head -5", "allow"),
        ("npm test\nrm -rf build", "deny"),
        ("ls & rm x", "deny"),
        ("npm test || curl example.com", "ask"),
        ("npm test | tee out.log", "ask"),
        ("echo hi && rm -rf /", "deny"),
        ("(cd sub; rm x)", "deny"),
        ("ls && sudo rm -rf /", "deny"),
        ("/bin/rm -r x", "deny"),
        ("FOO=1 rm x", "deny"),
        ("echo 'a; rm b'", "allow"),
        ("cat a.txt | grep x | wc -l", "allow"),
        ("git log --oneline -5 && git diff HEAD~1", "allow"),
        ("git branch -D old", "ask"),
        ("find . -name '*.o' -delete", "deny"),
        ("find . -name '*.rs'", "allow"),
        ("echo hi > file.txt", "ask"),
        ("sort -o out.txt in.txt", "ask"),
        ("ls $(whoami)", "ask"),
    ];
    for (cmd, want) in cases {
        assert_eq!(kind(&p.decide("bash", &bash(cmd), false)), want, "{cmd}");
    }
    // yolo: asks become allows, denies stay.
    let y = policy(Mode::Yolo, &[], &["Bash(curl:*)"], &["Bash(rm:*)"]);
    assert_eq!(kind(&y.decide("bash", &bash("curl x"), false)), "allow");
    assert_eq!(kind(&y.decide("bash", &bash("ls; rm x"), false)), "deny");
    // auto: fallback allowed, explicit ask still asks.
    let a = policy(Mode::Auto, &[], &["Bash(curl:*)"], &[]);
    assert_eq!(
        kind(&a.decide("bash", &bash("make install"), false)),
        "allow"
    );
    assert_eq!(
        kind(&a.decide("bash", &bash("make && curl x"), false)),
        "ask"
    );
}

#[test]
fn splitting_respects_quotes_and_substitutions() {
    let texts = |c: &str| {
        split_command(c)
            .into_iter()
            .map(|p| p.text)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        texts("a && b || c; d | e & f\ng"),
        ["a", "b", "c", "d", "e", "f", "g"]
    );
    assert_eq!(texts("echo 'x && y' \"p; q\""), ["echo 'x && y' \"p; q\""]);
    // Substituted commands are pieces too, before the command that contains them (they run
    // first).
    assert_eq!(
        texts("echo $(a; b) `c | d`"),
        ["a", "b", "c", "d", "echo $(a; b) `c | d`"]
    );
    assert_eq!(texts("cmd 2>&1 | tail"), ["cmd 2>&1", "tail"]);
    assert!(split_command("echo $(id)").last().unwrap().has_ops);
    assert!(split_command("echo x >> f")[0].has_ops);
    assert!(!split_command("echo x &>/dev/null")[0].has_ops);
    assert!(!split_command("cat < in.txt")[0].has_ops);
}

#[test]
fn always_rules_and_session_approvals() {
    assert_eq!(
        Policy::always_rule("bash", &bash("cargo test --all")),
        Some("Bash(cargo test:*)".into())
    );
    assert_eq!(
        Policy::always_rule("bash", &bash("pytest -x tests/")),
        Some("Bash(pytest:*)".into())
    );
    // No subcommand where a prefix would put it: the exact command, not `git:*`.
    assert_eq!(
        Policy::always_rule("bash", &bash("git -C x status")),
        Some("Bash(git -C x status)".into())
    );
    assert_eq!(
        Policy::always_rule("edit_file", &json!({"path": "a"})),
        Some("Edit".into())
    );
    assert_eq!(
        Policy::always_rule("move_file", &json!({})),
        Some("Edit".into())
    );
    assert_eq!(
        Policy::always_rule("mcp__s__t", &json!({})),
        Some("mcp__s__t".into())
    );
    for dangerous in [
        "rm -rf build",
        "rm -fr x",
        "rm -r x",
        "rm --recursive x",
        "git push --force",
        "git push -f origin",
        "git push origin +main",
        "sudo apt-get install x",
        "sudo -u bob ls",
        "env A=1 sudo ls",
        "dd if=/dev/zero of=x",
        "make && make install",
        "echo x > y",
    ] {
        assert_eq!(
            Policy::always_rule("bash", &bash(dangerous)),
            None,
            "{dangerous}"
        );
    }
    // allow_for_session remembers the rule, or the exact command when there is no safe rule.
    let mut p = policy(Mode::Ask, &[], &[], &[]);
    assert_eq!(
        kind(&p.decide("bash", &bash("cargo build --release"), false)),
        "ask"
    );
    p.allow_for_session("bash", &bash("cargo build"));
    assert_eq!(
        kind(&p.decide("bash", &bash("cargo build --release"), false)),
        "allow"
    );
    assert_eq!(
        kind(&p.decide("bash", &bash("cargo publish"), false)),
        "ask"
    );
    p.allow_for_session("bash", &bash("rm -rf target"));
    assert_eq!(
        kind(&p.decide("bash", &bash("rm -rf target"), false)),
        "allow"
    );
    assert_eq!(kind(&p.decide("bash", &bash("rm -rf /"), false)), "ask");
    p.allow_for_session("write_file", &json!({"path": "a"}));
    assert_eq!(
        kind(&p.decide("multi_edit", &json!({"path": "zzz"}), false)),
        "allow"
    );
}

/// How a compound line is cut into pieces for rules, as the reference does it: the outer
/// command stays whole when its `$(…)`, backticks or `<(…)` hold an operator, `2>&1` and
/// `&>` redirections stay with their command (also leading the command), and the inner
/// commands are pieces of their own that deny rules still see.
#[test]
fn decomposition_keeps_outer_commands_and_redirections_whole() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "echo $(git rev-parse HEAD; date) && ls",
            &["echo $(git rev-parse HEAD; date)", "ls"],
            &["git rev-parse HEAD", "date"],
        ),
        (
            "echo `git status; ls` && date",
            &["echo `git status; ls`", "date"],
            &["git status", "ls"],
        ),
        (
            "echo \"$(a | b)\" || c",
            &["echo \"$(a | b)\"", "c"],
            &["a", "b"],
        ),
        (
            "diff <(git log -1 | head) <(git show HEAD | head) && ls",
            &["diff <(git log -1 | head) <(git show HEAD | head)", "ls"],
            &["git log -1", "head", "git show HEAD", "head"],
        ),
        (
            "tee >(gzip | tar x) && date",
            &["tee >(gzip | tar x)", "date"],
            &["gzip", "tar x"],
        ),
        (
            "go test ./... 2>&1 | tee log",
            &["go test ./... 2>&1", "tee log"],
            &[],
        ),
        (
            "git log &>/dev/null | head -20",
            &["git log &>/dev/null", "head -20"],
            &[],
        ),
        (
            "&>/dev/null git log | head -20",
            &["&>/dev/null git log", "head -20"],
            &[],
        ),
        (
            "make &>> build.log && echo ok",
            &["make &>> build.log", "echo ok"],
            &[],
        ),
        ("&>out make; ls", &["&>out make", "ls"], &[]),
        ("sort < input.txt && ls", &["sort < input.txt", "ls"], &[]),
        ("a 2>/dev/null || b", &["a 2>/dev/null", "b"], &[]),
    ];
    for (line, top, inner) in cases {
        let pieces = split_command(line);
        let got_top: Vec<&str> = pieces
            .iter()
            .filter(|p| p.is_top_level())
            .map(|p| p.text.as_str())
            .collect();
        let got_inner: Vec<&str> = pieces
            .iter()
            .filter(|p| !p.is_top_level())
            .map(|p| p.text.as_str())
            .collect();
        assert_eq!(&got_top, top, "top-level pieces of {line:?}");
        assert_eq!(&got_inner, inner, "inner pieces of {line:?}");
    }
    // An exact rule for the whole outer command (operators inside its substitution and all)
    // allows it; the inner commands are still checked against deny rules.
    let p = policy(
        Mode::Ask,
        &[
            "Bash(echo $(git rev-parse HEAD; date))",
            "Bash(&>/dev/null make)",
        ],
        &[],
        &["Bash(rm:*)"],
    );
    assert_eq!(
        kind(&p.decide(
            "bash",
            &bash("echo $(git rev-parse HEAD; date) && ls"),
            false
        )),
        "allow"
    );
    assert_eq!(
        kind(&p.decide("bash", &bash("&>/dev/null make"), false)),
        "allow"
    );
    assert_eq!(
        kind(&p.decide("bash", &bash("echo $(git rev-parse HEAD; rm x)"), false)),
        "deny"
    );
    assert_eq!(
        kind(&p.decide("bash", &bash("&>/dev/null rm x"), false)),
        "deny"
    );
    // A here-document is part of its command's text: an exact rule covers that body only.
    let body = "python3 <<EOF\nprint(1)\nEOF";
    let pieces = split_command(&format!("{body}\nls"));
    assert_eq!(pieces[0].text, body);
    assert_eq!(pieces[1].text, "ls");
}
