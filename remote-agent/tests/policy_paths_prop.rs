//! Property: a path rule decides on what a path *is*. For every rule set, every file tool and
//! every mode, all spellings of one target (absolute, `./`, `..` detours, `//`, symlinked
//! directories, a symlinked workspace alias) get the same decision as its plain
//! workspace-relative spelling.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use reasonix_remote::policy::{Decision, Mode, Policy};
use reasonix_remote::tools::{ToolRegistry, READER_TOOLS, WRITER_TOOLS};
use serde_json::{json, Value};

/// Targets (workspace-relative, canonical) inside the fixture.
const TARGETS: [&str; 10] = [
    "secrets/k",
    "secrets/sub/deep.txt",
    "secrets/new",
    "src/main.rs",
    "src/lib/mod.rs",
    "docs/a.md",
    "Cargo.lock",
    ".env",
    "src/.env",
    "new/file.txt",
];

/// Rules drawn into each case's allow/ask/deny lists.
const RULES: [&str; 14] = [
    "Edit(secrets/**)",
    "Read(secrets/**)",
    "Edit(src/**)",
    "Read(src/*.rs)",
    "Edit(*.lock)",
    "Read(.env)",
    "write_file(docs/**)",
    "read_file(src/lib/**)",
    "Edit(./secrets/sub/**)",
    "Edit(lnk/**)",
    "Edit",
    "Read",
    "move_file(new/**)",
    "grep(src/**)",
];

struct Fixture {
    _d: tempfile::TempDir,
    _outside: tempfile::TempDir,
    ws: PathBuf,
    alias: PathBuf,
}

fn fixture() -> Fixture {
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap();
    for dir in ["secrets/sub", "src/lib", "docs"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    for f in [
        "secrets/k",
        "secrets/sub/deep.txt",
        "src/main.rs",
        "src/lib/mod.rs",
        "docs/a.md",
    ] {
        std::fs::write(ws.join(f), "x").unwrap();
    }
    std::os::unix::fs::symlink("secrets", ws.join("lnk")).unwrap();
    std::os::unix::fs::symlink(".", ws.join("here")).unwrap();
    std::os::unix::fs::symlink(ws.join("src"), ws.join("abs_src")).unwrap();
    std::os::unix::fs::symlink("..", ws.join("src/up")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let alias = outside.path().join("alias");
    std::os::unix::fs::symlink(&ws, &alias).unwrap();
    Fixture {
        _d: d,
        _outside: outside,
        ws,
        alias,
    }
}

/// One way of writing a path component sequence.
#[derive(Debug, Clone)]
enum Step {
    /// Insert `./` before component `at`.
    Dot(usize),
    /// Double the slash before component `at`.
    Slash(usize),
    /// Insert `<dir>/..` before component `at` (dir is a real or missing directory).
    Detour(usize, &'static str),
    /// Replace a leading `secrets` with the `lnk` symlink, or `src` with `abs_src`.
    Link,
    /// Go through `here/` (a symlink to the workspace root) at the start.
    Here,
    /// Go through `src/up/` (a symlink to `..` inside src) at the start.
    Up,
}

fn spell(target: &str, steps: &[Step], root: Option<&Path>) -> String {
    let mut parts: Vec<String> = target.split('/').map(String::from).collect();
    for st in steps {
        match st {
            Step::Link => {
                if parts[0] == "secrets" {
                    parts[0] = "lnk".into();
                } else if parts[0] == "src" {
                    parts[0] = "abs_src".into();
                }
            }
            Step::Here => parts.insert(0, "here".into()),
            Step::Up => {
                parts.insert(0, "up".into());
                parts.insert(0, "src".into());
            }
            Step::Dot(at) => {
                let at = at % (parts.len() + 1);
                parts.insert(at, ".".into());
            }
            Step::Slash(at) => {
                // Never first: a leading empty component would make the path absolute.
                let at = 1 + at % parts.len();
                parts.insert(at, String::new());
            }
            Step::Detour(at, dir) => {
                let at = at % (parts.len() + 1);
                parts.insert(at, "..".into());
                parts.insert(at, (*dir).into());
            }
        }
    }
    let rel = parts.join("/");
    match root {
        Some(r) => format!("{}/{}", r.display(), rel),
        None => rel,
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..6).prop_map(Step::Dot),
        (0usize..6).prop_map(Step::Slash),
        // Detours go at the front, where each directory exists (or is missing) for sure.
        prop_oneof![Just("src"), Just("docs"), Just("missing"), Just("secrets")]
            .prop_map(|d| Step::Detour(0, d)),
        Just(Step::Link),
        Just(Step::Here),
        Just(Step::Up),
    ]
}

fn kind(d: &Decision) -> &'static str {
    match d {
        Decision::Allow => "allow",
        Decision::Ask { .. } => "ask",
        Decision::Deny { .. } => "deny",
    }
}

/// The call a tool makes with `path` as its (first) path argument.
fn call(tool: &str, path: &str) -> Value {
    match tool {
        "move_file" => json!({"source_path": path, "destination_path": "docs/moved.md"}),
        "glob" => json!({ "pattern": format!("{path}/*") }),
        "grep" => json!({"pattern": "x", "path": path}),
        _ => json!({ "path": path }),
    }
}

fn file_tools() -> Vec<&'static str> {
    let registry = ToolRegistry::builtin();
    let names = registry.names();
    let mut tools: Vec<&'static str> = WRITER_TOOLS
        .iter()
        .chain(READER_TOOLS.iter())
        .copied()
        .collect();
    // Every file tool is a registered tool; the groups cannot drift from the registry.
    for t in &tools {
        assert!(names.contains(t), "{t} is not a registered tool");
    }
    tools.sort_unstable();
    tools
}

#[test]
fn same_target_same_decision() {
    // One fixture for all cases: the property is about spellings, not about fresh files.
    let f = fixture();
    let tools = file_tools();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let strategy = (
        0usize..TARGETS.len(),
        proptest::collection::vec(step(), 0..5),
        0u8..3,
        proptest::collection::vec(0usize..RULES.len(), 0..3),
        proptest::collection::vec(0usize..RULES.len(), 0..2),
        proptest::collection::vec(0usize..RULES.len(), 0..3),
    );
    let result = runner.run(&strategy, |(target, steps, root, allow, ask, deny)| {
        let pick = |v: &[usize]| v.iter().map(|i| RULES[*i].to_string()).collect::<Vec<_>>();
        let target = TARGETS[target];
        let root_path = match root {
            0 => None,
            1 => Some(f.ws.as_path()),
            _ => Some(f.alias.as_path()),
        };
        let spelled = spell(target, &steps, root_path);
        for mode in [Mode::Ask, Mode::Auto, Mode::Yolo] {
            let p = Policy::new(mode, &pick(&allow), &pick(&ask), &pick(&deny))
                .unwrap()
                .with_workspace(&f.ws);
            for tool in &tools {
                let ro = READER_TOOLS.contains(tool);
                let want = kind(&p.decide(tool, &call(tool, target), ro));
                let got = kind(&p.decide(tool, &call(tool, &spelled), ro));
                prop_assert_eq!(
                    got,
                    want,
                    "{:?} {} `{}` vs `{}` allow={:?} ask={:?} deny={:?}",
                    mode,
                    tool,
                    spelled,
                    target,
                    pick(&allow),
                    pick(&ask),
                    pick(&deny)
                );
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn rules_reach_their_targets() {
    // The property above would hold for a policy that ignores paths; pin that rules do match.
    let f = fixture();
    let p = Policy::new(
        Mode::Ask,
        &[],
        &[],
        &["Edit(secrets/**)".into(), "Edit(lnk/**)".into()],
    )
    .unwrap()
    .with_workspace(&f.ws);
    for spelled in ["secrets/k", "lnk/k", "here/secrets/k", "src/up/secrets/k"] {
        assert_eq!(
            kind(&p.decide("write_file", &call("write_file", spelled), false)),
            "deny",
            "{spelled}"
        );
    }
    let p = Policy::new(Mode::Ask, &["Edit(src/**)".into()], &[], &[])
        .unwrap()
        .with_workspace(&f.ws);
    assert_eq!(
        kind(&p.decide("edit_file", &call("edit_file", "abs_src/main.rs"), false)),
        "allow"
    );
    assert_eq!(
        kind(&p.decide("edit_file", &call("edit_file", "src/../docs/a.md"), false)),
        "ask"
    );
}
