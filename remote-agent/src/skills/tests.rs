use super::*;
use reasonix_forward::proto::CommandFileProblem;

fn file(name: &str, path: &str, text: &str) -> SkillFile {
    SkillFile {
        name: name.into(),
        path: path.into(),
        text: text.into(),
        assets: Vec::new(),
    }
}

#[test]
fn builtins_parse_and_are_inline() {
    let set = Skills::merge(builtin::files(), Vec::new(), &[], Vec::new(), &[]);
    assert!(set.notices.is_empty(), "{:?}", set.notices);
    let names: Vec<&str> = set.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["explore", "init", "review"]);
    let review = set.profile("review").expect("review");
    assert!(review.read_only);
    assert_eq!(review.run_as, RunAs::Inline);
    assert!(set.profile("explore").expect("explore").read_only);
    assert!(!set.profile("init").expect("init").read_only);
}

#[test]
fn precedence_and_malformed_notices() {
    let set = Skills::merge(
        builtin::files(),
        vec![
            file("review", "/home/u/.reasonix/skills/review/SKILL.md", "mine"),
            file(
                "deploy",
                "/home/u/.reasonix/skills/deploy/SKILL.md",
                "user deploy",
            ),
        ],
        &[],
        vec![
            file(
                "deploy",
                ".reasonix/skills/deploy/SKILL.md",
                "project deploy",
            ),
            file(
                "lint",
                ".reasonix/skills/lint/SKILL.md",
                "---\nname: lint\nallowed-tools: [read_file]\n---\nLint $1",
            ),
            file(
                "bad",
                ".reasonix/skills/bad/SKILL.md",
                "---\nname: bad\n\nmodel deepseek\n---\nx",
            ),
        ],
        &[CommandFileProblem {
            path: ".reasonix/skills/huge/SKILL.md".into(),
            problem: "too big".into(),
        }],
    );
    let names: Vec<&str> = set.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["deploy", "explore", "init", "lint", "review"]);
    assert_eq!(
        set.profile("review").map(|s| s.source),
        Some(SkillSource::BuiltIn)
    );
    assert_eq!(
        set.profile("deploy").map(|s| s.source),
        Some(SkillSource::User)
    );
    let bad = set
        .notices
        .iter()
        .find(|n| n.contains("bad/SKILL.md"))
        .expect("bad noticed");
    assert!(bad.contains("line 4"), "{bad}");
    assert!(set
        .notices
        .iter()
        .any(|n| n.contains("huge") && n.contains("too big")));
    assert_eq!(set.notices.len(), 4, "{:?}", set.notices);
}

#[test]
fn expand_inline_subagent_and_models() {
    let mut set = Skills::merge(
        builtin::files(),
        Vec::new(),
        &[],
        vec![
            file(
                "fix",
                ".reasonix/skills/fix/SKILL.md",
                "---\nmodel: deepseek/deepseek-chat\neffort: low\n---\nFix $1 then $$",
            ),
            file(
                "kid",
                ".reasonix/skills/kid/SKILL.md",
                "---\nrun-as: subagent\n---\nchild",
            ),
            file("ref", ".reasonix/skills/ref/SKILL.md", "Use the refs"),
        ],
        &[],
    );
    let models = vec!["deepseek/deepseek-chat".to_string()];
    let e = set
        .expand_line("/fix src/a.rs", &models)
        .expect("a skill")
        .expect("runs");
    assert!(
        e.text
            .starts_with("<skill name=\"fix\" source=\"project\">\nFix src/a.rs then $\n"),
        "{}",
        e.text
    );
    assert_eq!(e.turn.model.as_deref(), Some("deepseek/deepseek-chat"));
    assert_eq!(e.turn.effort, Some(ReasoningEffort::Low));
    let refused = set
        .expand_line("/fix x", &["openai/gpt".into()])
        .expect("skill")
        .expect_err("model");
    assert!(
        refused.contains("deepseek/deepseek-chat") && refused.contains("configured: openai/gpt"),
        "{refused}"
    );
    let kid = set
        .expand_line("/kid", &models)
        .expect("skill")
        .expect_err("subagent");
    assert!(kid.contains("subagent"), "{kid}");
    // `/kid args` runs it as a child of its profile; inline skills are not children.
    assert_eq!(
        set.subagent_line("/kid  map the parser "),
        Some(("kid".to_string(), "map the parser".to_string()))
    );
    let (_, task) = set.subagent_line("/kid").expect("a subagent skill");
    assert!(task.contains("/kid"), "{task}");
    assert!(set.subagent_line("/fix x").is_none());
    assert!(set.subagent_line("/nope x").is_none());
    assert!(set.expand_line("/nope x", &models).is_none());
    assert!(set.expand_line("plain text", &models).is_none());
    // Args with no placeholder are appended; project files are named by path.
    if let Some(s) = set.skills.iter_mut().find(|s| s.name == "ref") {
        s.assets = vec![SkillAsset {
            path: "references/api.md".into(),
            text: None,
        }];
    }
    let e = set
        .expand_line("/ref the api", &models)
        .expect("skill")
        .expect("runs");
    assert!(e.text.contains("Arguments: the api"), "{}", e.text);
    assert!(
        e.text.contains("- .reasonix/skills/ref/references/api.md"),
        "{}",
        e.text
    );
    // Built-in text is byte-stable: the same bytes every time.
    let a = set
        .expand_line("/review", &models)
        .expect("s")
        .expect("r")
        .text;
    assert_eq!(
        a,
        set.expand_line("/review", &models)
            .expect("s")
            .expect("r")
            .text
    );
    assert!(a.contains("by severity") || a.contains("Critical"));
}

#[test]
fn reads_project_folder_confined() {
    let ws = tempfile::tempdir().expect("tempdir");
    let root = ws.path().join(PROJECT_DIR).join("audit");
    std::fs::create_dir_all(root.join("scripts")).expect("mkdir");
    std::fs::write(root.join("SKILL.md"), "---\nread-only: true\n---\nAudit").expect("w");
    std::fs::write(root.join("scripts/run.sh"), "echo").expect("w");
    let set = Skills::load(ws.path(), &SkillSettings::default());
    let audit = set.profile("audit").expect("audit");
    assert_eq!(audit.path, ".reasonix/skills/audit/SKILL.md");
    assert_eq!(audit.assets.len(), 1);
    assert_eq!(
        audit.assets[0].text, None,
        "project asset text is not inlined"
    );
    let e = expand(audit, "", &[]).expect("runs");
    assert!(e.text.contains(".reasonix/skills/audit/scripts/run.sh"));
}

#[test]
fn skill_of_a_journaled_turn() {
    let set = Skills::merge(builtin::files(), Vec::new(), &[], Vec::new(), &[]);
    let e = set.expand_line("/review x", &[]).expect("s").expect("r");
    assert_eq!(skill_of_turn_text(&e.text).as_deref(), Some("review"));
    assert_eq!(skill_of_turn_text("<skill name=\"../x\">"), None);
    assert_eq!(skill_of_turn_text("review this"), None);
}

#[test]
fn a_skill_turn_is_titled_by_its_command() {
    let set = Skills::merge(builtin::files(), Vec::new(), &[], Vec::new(), &[]);
    let e = set
        .expand_line("/explore the parser", &[])
        .expect("s")
        .expect("r");
    assert_eq!(crate::journal::title_of(&e.text), "/explore");
    assert_eq!(crate::journal::title_of("fix the bug\nmore"), "fix the bug");
}
