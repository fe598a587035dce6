//! The bash-versus-file-deny table shared by the local and the SSH end-to-end tests: a
//! workspace with covered files, the command shapes the model tries, the scripted model
//! turn, and the checks on disk and on what the model and the user saw.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use serde_json::{json, Value};

/// The deny rules under test, as a TOML array.
pub const DENY: &str = r#"["Edit(secrets/**)", "Edit(**/*.env)"]"#;
/// The same rules as the model reads them.
pub const RULES: [&str; 2] = ["Edit(secrets/**)", "Edit(**/*.env)"];

/// One command the model tries. `sandbox_only`: the bash reader cannot see that it writes a
/// covered path, so only the sandbox and the after-call check stand in its way (the rest may
/// be refused early by the reader, naming the rule).
pub struct Shape {
    pub cmd: &'static str,
    pub sandbox_only: bool,
}

const fn s(cmd: &'static str, sandbox_only: bool) -> Shape {
    Shape { cmd, sandbox_only }
}

/// The table: the issue's shapes and more.
pub const SHAPES: &[Shape] = &[
    s("cd secrets && echo x > k", true),
    s("printf x | dd of=secrets/k", true),
    s("python3 -c \"open('secrets/k','w').write('x')\"", true),
    s("perl -e 'open(F, \">\", \"secrets/k\") or die \"$!\\n\"; print F \"x\"; close F or die \"$!\\n\"'", true),
    s("sh -c 'cd secrets; echo x > k'", true),
    s("awk 'BEGIN { f = \"secrets/\" \"k\"; print \"x\" > f }'", true),
    s("node -e \"require('fs').writeFileSync('secr' + 'ets/k', 'x')\"", true),
    s("install -m 600 src/a.txt secrets/k", false),
    s("cp src/a.txt secrets/k", false),
    s("mv src/a.txt secrets/moved", false),
    s("echo x | tee secrets/k", false),
    s("tar -xf evil.tar", true),
    s("unzip -o evil.zip", true),
    s("cp .git/index idx.tmp && GIT_INDEX_FILE=idx.tmp git checkout -- .", true),
    s("ln -s secrets/k lnk && echo x > lnk", false),
    s("python3 -c \"import os; os.symlink('secrets/k', 'lnk')\" && echo x > lnk", true),
    s("python3 -c \"import os; os.symlink('secrets', 'dl')\" && echo x > dl/new", true),
    s("python3 -c \"open('config/new.env','w').write('B=2')\"", true),
    s("mkdir -p deep/er && cd deep/er && echo C=3 > made.env", false),
    s("rm secrets/k", false),
    s("cd secrets && rm -rf sub", true),
    s("chmod 777 secrets/k", false),
    s("python3 -c \"import os; os.chmod('secrets/k', 0o777)\"", true),
    s("mkdir -p elsewhere && cd elsewhere && mv ../secr*s .", true),
    s("cd config && echo more >> app.env", false),
    s("cd config && f=app.e; echo more >> ${f}nv", true),
    s("cd secrets && truncate -s 0 k", true),
    s("cd secrets && sed -i s/secret/x/ k", true),
    s("cd secrets && touch new", true),
    s("cd secrets/sub && python3 -c \"import os; os.rename('k2', 'k3')\"", true),
    s("cd secrets && ln k ../hard && echo x >> ../hard", true),
    s("find . -path ./secrets/k -exec sh -c 'echo x > \"$1\"' _ {} \\;", false),
    s("find . -name k -path '*ecrets*' -exec sh -c 'echo x > \"$1\"' _ {} \\;", true),
    s("cd config && mv app.env app.txt", false),
    s("cd config && mv app.e?v app.txt", true),
    s("x=secrets; cat src/a.txt > $x/k", true),
];

/// Commands an allow rule in [`ASK_ALLOW`] lets run unasked in `ask` mode (plain, no shell
/// operators), each writing a covered path the reader cannot see.
pub const ASK_SHAPES: &[&str] = &[
    "python3 -c \"open('secrets/k','w').write('x')\"",
    "perl -e 'open(F, \">\", \"secrets/k\") or die \"$!\\n\"; print F \"x\"; close F or die \"$!\\n\"'",
    "node -e \"require('fs').writeFileSync('secrets/k', 'x')\"",
    "dd if=src/a.txt of=secrets/k",
    "tar -xf evil.tar",
    "unzip -o evil.zip",
    "python3 -c \"open('config/new.env','w').write('B=2')\"",
];

/// The allow rules of the `ask` runs.
pub const ASK_ALLOW: &str = r#"["Bash(python3:*)", "Bash(perl:*)", "Bash(node:*)", "Bash(dd:*)", "Bash(tar:*)", "Bash(unzip:*)"]"#;

fn sh(cwd: &Path, script: &str) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(p: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Fills `ws` (created if missing): covered files `secrets/k`, `secrets/sub/k2`,
/// `config/app.env`; an uncovered `src/a.txt`; a git repository whose HEAD has another
/// `secrets/k`; `evil.tar` and `evil.zip`, which would overwrite the secret and add
/// `config/arch.env`. `stage` is a scratch directory outside the workspace.
pub fn populate(ws: &Path, stage: &Path) {
    write(&stage.join("secrets/k"), "pwned\n", 0o644);
    write(&stage.join("config/arch.env"), "PWNED=1\n", 0o644);
    std::fs::create_dir_all(ws).expect("ws");
    sh(
        stage,
        &format!("tar -cf '{}/evil.tar' secrets config", ws.display()),
    );
    sh(
        stage,
        &format!(
            "python3 -c \"import zipfile; z = zipfile.ZipFile('{}/evil.zip', 'w'); z.write('secrets/k'); z.write('config/arch.env'); z.close()\"",
            ws.display()
        ),
    );
    write(&ws.join("secrets/k"), "committed\n", 0o644);
    sh(
        ws,
        "git init -q && git add secrets && git -c user.email=t@t -c user.name=t commit -qm c",
    );
    write(&ws.join("secrets/k"), "secret\n", 0o644);
    write(&ws.join("secrets/sub/k2"), "two\n", 0o600);
    write(&ws.join("config/app.env"), "A=1\n", 0o644);
    write(&ws.join("src/a.txt"), "plain\n", 0o644);
}

/// Every covered path (under `secrets/`, or named `*.env`, outside `.git`) with its kind,
/// permission bits and content.
pub fn covered_state(ws: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![ws.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(ws).expect("inside").display().to_string();
            if rel == ".git" {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if rel == "secrets" || rel.starts_with("secrets/") || rel.ends_with(".env") {
                let what = if meta.file_type().is_symlink() {
                    format!("link -> {:?}", std::fs::read_link(&p).ok())
                } else if meta.is_dir() {
                    format!("dir {:o}", meta.permissions().mode() & 0o7777)
                } else {
                    format!(
                        "file {:o} {:?}",
                        meta.permissions().mode() & 0o7777,
                        std::fs::read_to_string(&p).unwrap_or_default()
                    )
                };
                out.insert(rel, what);
            }
            if meta.is_dir() && !meta.file_type().is_symlink() {
                stack.push(p);
            }
        }
    }
    out
}

/// The scripted model turn: every shape of [`SHAPES`] as its own bash call `b<i>`, each
/// followed by an uncovered marker write `src/ran-<i>`, then a background job that creates
/// `config/bg.env` late, `wait` and `bash_output` for it, then a final answer.
pub fn full_turn() -> Vec<MockReply> {
    let mut calls: Vec<MockToolCall> = SHAPES
        .iter()
        .enumerate()
        .map(|(i, sh)| {
            // The marker goes to the workspace whatever directory the shape `cd`ed into.
            let cmd = format!(
                "RX_WS=\"$PWD\"; {}; echo ran > \"$RX_WS/src/ran-{i}\"",
                sh.cmd
            );
            MockToolCall::new(
                &format!("b{i}"),
                "bash",
                &json!({ "command": cmd }).to_string(),
            )
        })
        .collect();
    calls.push(MockToolCall::new(
        "bg",
        "bash",
        &json!({"command": "sleep 0.3; python3 -c \"open('config/bg.env','w').write('late')\"; echo bg-done", "run_in_background": true}).to_string(),
    ));
    calls.push(MockToolCall::new(
        "wait",
        "wait",
        &json!({"job_ids": ["job_1"], "timeout_seconds": 30}).to_string(),
    ));
    calls.push(MockToolCall::new(
        "bgout",
        "bash_output",
        &json!({"job_id": "job_1"}).to_string(),
    ));
    vec![MockReply::tool_calls(calls, 3), MockReply::text(&["done"])]
}

/// The `ask` turn: each of [`ASK_SHAPES`] as bash call `a<i>`, then a final answer.
pub fn ask_turn() -> Vec<MockReply> {
    let calls = ASK_SHAPES
        .iter()
        .enumerate()
        .map(|(i, c)| {
            MockToolCall::new(
                &format!("a{i}"),
                "bash",
                &json!({ "command": c }).to_string(),
            )
        })
        .collect();
    vec![MockReply::tool_calls(calls, 3), MockReply::text(&["done"])]
}

/// How one call was stopped, as the model read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The bash reader refused it before it ran.
    Reader,
    /// It ran; a read-only mount refused the write.
    Mount,
    /// It ran and wrote; the after-call check undid it.
    Undone,
    /// The reader could not see through it and asked; the headless run said no (only in
    /// `ask` and `auto` mode, where such a command never runs unapproved).
    Asked,
}

/// The events of a `reasonix run --json` stdout.
pub fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The `tool_finished` event of call `id`.
pub fn finished<'a>(events: &'a [Value], id: &str) -> Option<&'a Value> {
    events
        .iter()
        .find(|e| e["type"] == "tool_finished" && e["call_id"] == id)
}

/// How the model was told about call `id`, or why it was not told properly.
pub fn stopped(events: &[Value], id: &str) -> Result<Stopped, String> {
    let e = finished(events, id).ok_or_else(|| format!("no tool_finished for {id}"))?;
    let out = e["output"].as_str().unwrap_or("");
    if e["denied"] == "headless" {
        return Ok(Stopped::Asked);
    }
    if !RULES.iter().any(|r| out.contains(r)) {
        return Err(format!("the result names no rule: {out}"));
    }
    if out.starts_with("denied by the permission policy") {
        Ok(Stopped::Reader)
    } else if out.contains("[denied write undone") {
        if e["is_error"] != true {
            return Err(format!("an undone write is not an error: {out}"));
        }
        Ok(Stopped::Undone)
    } else if out.contains("[the sandbox mounts the paths covered by the deny rule") {
        Ok(Stopped::Mount)
    } else {
        Err(format!("names a rule, but not as a denial: {out}"))
    }
}

/// The notices a run printed.
pub fn notices(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "notice")
        .filter_map(|e| e["text"].as_str().map(str::to_string))
        .collect()
}

/// Checks a run of [`full_turn`] in `ws` (whose covered state was `initial`); `confined`
/// says whether bash ran under bubblewrap. Returns one line per shape for the table, or
/// every problem found.
pub fn check_full_turn(
    label: &str,
    stdout: &str,
    ws: &Path,
    initial: &BTreeMap<String, String>,
    confined: bool,
    yolo: bool,
) -> Result<Vec<String>, Vec<String>> {
    let evs = events(stdout);
    let mut problems = Vec::new();
    let mut lines = Vec::new();
    let now = covered_state(ws);
    if &now != initial {
        problems.push(format!(
            "{label}: covered paths changed\n  before {initial:?}\n  after  {now:?}"
        ));
    }
    let mut undone_results = 0;
    for (i, shape) in SHAPES.iter().enumerate() {
        match stopped(&evs, &format!("b{i}")) {
            Ok(how) => {
                if shape.sandbox_only && how == Stopped::Reader {
                    problems.push(format!("{label} #{i} `{}`: the reader refused a shape it should not see; the table no longer tests the sandbox", shape.cmd));
                }
                if yolo && how == Stopped::Asked {
                    problems.push(format!("{label} #{i}: yolo never asks"));
                }
                if !confined && how == Stopped::Mount {
                    problems.push(format!("{label} #{i}: a mount without the sandbox?"));
                }
                let ran = matches!(how, Stopped::Mount | Stopped::Undone);
                if ran && !ws.join(format!("src/ran-{i}")).exists() {
                    problems.push(format!(
                        "{label} #{i} `{}`: the uncovered marker write did not stay",
                        shape.cmd
                    ));
                }
                undone_results += usize::from(how == Stopped::Undone);
                lines.push(format!("{label:14} #{i:2} {how:?}  `{}`", shape.cmd));
            }
            Err(why) => problems.push(format!("{label} #{i} `{}`: {why}", shape.cmd)),
        }
    }
    // The background job: its late `.env` file is found when it ends.
    let bgout = finished(&evs, "bgout")
        .and_then(|e| e["output"].as_str())
        .unwrap_or("");
    if !(bgout.contains("bg-done")
        && bgout.contains("created `config/bg.env` (denied by `Edit(**/*.env)`): removed"))
    {
        problems.push(format!("{label}: background job not checked: {bgout}"));
    }
    undone_results += 1;
    let undone_notices = notices(&evs)
        .iter()
        .filter(|n| n.starts_with("denied write undone after bash"))
        .count();
    if undone_notices != undone_results {
        problems.push(format!(
            "{label}: {undone_results} results report undone writes but the user got {undone_notices} notices: {:?}",
            notices(&evs)
        ));
    }
    if problems.is_empty() {
        Ok(lines)
    } else {
        Err(problems)
    }
}

/// Checks a run of [`ask_turn`].
pub fn check_ask_turn(
    label: &str,
    stdout: &str,
    ws: &Path,
    initial: &BTreeMap<String, String>,
) -> Result<Vec<String>, Vec<String>> {
    let evs = events(stdout);
    let mut problems = Vec::new();
    let mut lines = Vec::new();
    let now = covered_state(ws);
    if &now != initial {
        problems.push(format!(
            "{label}: covered paths changed\n  before {initial:?}\n  after  {now:?}"
        ));
    }
    for (i, cmd) in ASK_SHAPES.iter().enumerate() {
        match stopped(&evs, &format!("a{i}")) {
            Ok(Stopped::Reader) => problems.push(format!(
                "{label} #{i} `{cmd}`: refused by the reader, so it never reached the sandbox"
            )),
            Ok(how) => lines.push(format!("{label:14} #{i:2} {how:?}  `{cmd}`")),
            Err(why) => problems.push(format!("{label} #{i} `{cmd}`: {why}")),
        }
    }
    if evs
        .iter()
        .any(|e| e["type"] == "approval_requested" || e["denied"] == "headless")
    {
        problems.push(format!(
            "{label}: a call asked; the allow rules should let every shape run"
        ));
    }
    if !notices(&evs)
        .iter()
        .any(|n| n.contains("created `config/new.env` (`Edit(**/*.env)`): removed"))
    {
        problems.push(format!(
            "{label}: no notice for config/new.env: {:?}",
            notices(&evs)
        ));
    }
    if problems.is_empty() {
        Ok(lines)
    } else {
        Err(problems)
    }
}

/// A user config for the mock provider at `base_url` with `[permissions]` `mode`, the
/// [`DENY`] rules, `allow` (a TOML array) and `[sandbox] bash`.
pub fn config_toml(
    base_url: &str,
    key_env: &str,
    mode: &str,
    allow: &str,
    sandbox: &str,
) -> String {
    format!(
        "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"{key_env}\"\n\n[permissions]\nmode = \"{mode}\"\ndeny = {DENY}\nallow = {allow}\n\n[sandbox]\nbash = \"{sandbox}\"\n"
    )
}
