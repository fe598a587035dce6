//! The routing table: phrasings in English and Chinese with the route each must get.

use super::*;

const NEW: TurnMeta = TurnMeta {
    follow_up: false,
    attachments: 0,
    plan_mode: false,
};
const LATER: TurnMeta = TurnMeta {
    follow_up: true,
    attachments: 0,
    plan_mode: false,
};

use Depth::{Full, Light, None as No};
use Route::{Approval, Direct, Plan, PlanOnly};

/// (text, meta, route, depth, reason)
const TABLE: &[(&str, TurnMeta, Route, Depth, &str)] = &[
    // Questions go straight to the executor.
    (
        "What does the link layer do on resume?",
        NEW,
        Direct,
        No,
        "question",
    ),
    ("why is the build failing", NEW, Direct, No, "question"),
    ("How do I run the e2e tests?", NEW, Direct, No, "question"),
    ("where is the journal written", NEW, Direct, No, "question"),
    ("Is the sandbox on by default?", NEW, Direct, No, "question"),
    ("explain compaction to me", NEW, Direct, No, "question"),
    ("这个函数是做什么的？", NEW, Direct, No, "question"),
    ("为什么测试失败了", NEW, Direct, No, "question"),
    ("如何启动守护进程", NEW, Direct, No, "question"),
    ("沙箱默认开启吗", NEW, Direct, No, "question"),
    // Short follow-ups.
    ("yes", LATER, Direct, No, "short_follow_up"),
    ("ok, continue", LATER, Direct, No, "short_follow_up"),
    ("try again", LATER, Direct, No, "short_follow_up"),
    ("thanks!", LATER, Direct, No, "short_follow_up"),
    ("继续", LATER, Direct, No, "short_follow_up"),
    ("好的", LATER, Direct, No, "short_follow_up"),
    (
        "now the other one too",
        LATER,
        Direct,
        No,
        "short_follow_up",
    ),
    // Small, bounded edits.
    ("fix the typo in README.md", NEW, Direct, No, "small_edit"),
    (
        "rename run_turn to drive_turn in runner/turn.rs",
        NEW,
        Direct,
        No,
        "small_edit",
    ),
    (
        "bump the version in Cargo.toml to 0.4.1",
        NEW,
        Direct,
        No,
        "small_edit",
    ),
    (
        "change the default of max_steps to 60",
        NEW,
        Direct,
        No,
        "small_edit",
    ),
    (
        "remove the unused import in src/lib.rs",
        NEW,
        Direct,
        No,
        "small_edit",
    ),
    ("修复 README.md 里的拼写错误", NEW, Direct, No, "small_edit"),
    (
        "把 max_steps 的默认值改成 60",
        NEW,
        Direct,
        No,
        "small_edit",
    ),
    ("重命名 foo_bar 为 baz_qux", NEW, Direct, No, "small_edit"),
    // Bounded implementation work: a light plan.
    (
        "add a --quiet flag to reasonix run",
        NEW,
        Plan,
        Light,
        "bounded_work",
    ),
    (
        "implement retry with backoff for the web fetch tool",
        NEW,
        Plan,
        Light,
        "bounded_work",
    ),
    (
        "write a unit test for the steps parser",
        NEW,
        Plan,
        Light,
        "bounded_work",
    ),
    (
        "support YAML config files next to TOML",
        NEW,
        Plan,
        Light,
        "bounded_work",
    ),
    (
        "给 run 命令添加一个 --quiet 参数",
        NEW,
        Plan,
        Light,
        "bounded_work",
    ),
    ("实现网页抓取工具的重试", NEW, Plan, Light, "bounded_work"),
    ("为步骤解析器编写单元测试", NEW, Plan, Light, "bounded_work"),
    // Cross-cutting, ambiguous or risky work: a full plan.
    (
        "migrate the session store to sqlite",
        NEW,
        Plan,
        Full,
        "risky",
    ),
    ("rewrite the policy engine", NEW, Plan, Full, "risky"),
    (
        "rename Session to Workbench across the codebase",
        NEW,
        Plan,
        Full,
        "risky",
    ),
    (
        "deploy the new daemon to production",
        NEW,
        Plan,
        Full,
        "risky",
    ),
    (
        "change the database schema for journals",
        NEW,
        Plan,
        Full,
        "risky",
    ),
    ("make it better", NEW, Plan, Full, "ambiguous"),
    ("improve performance somehow", NEW, Plan, Full, "ambiguous"),
    ("clean up the code", NEW, Plan, Full, "ambiguous"),
    (
        "add a cache, then wire it into the gateway, then add metrics, then document it",
        NEW,
        Plan,
        Full,
        "cross_cutting",
    ),
    (
        "- add the flag\n- parse it\n- document it\n- test it",
        NEW,
        Plan,
        Full,
        "cross_cutting",
    ),
    ("把会话存储迁移到 sqlite", NEW, Plan, Full, "risky"),
    ("重构整个项目的错误处理", NEW, Plan, Full, "risky"),
    ("优化一下性能", NEW, Plan, Full, "ambiguous"),
    ("修改数据库结构", NEW, Plan, Full, "risky"),
    // Explicit: plan first.
    (
        "plan first: add a --quiet flag",
        NEW,
        Plan,
        Light,
        "explicit_plan",
    ),
    (
        "fix the typo in README.md, but plan first",
        NEW,
        Plan,
        Light,
        "explicit_plan",
    ),
    (
        "Make a plan for the sqlite migration",
        NEW,
        Plan,
        Full,
        "explicit_plan",
    ),
    (
        "先规划一下：添加 --quiet 参数",
        NEW,
        Plan,
        Light,
        "explicit_plan",
    ),
    ("修复拼写错误，先规划", NEW, Plan, Light, "explicit_plan"),
    ("迁移数据库，先出方案", NEW, Plan, Full, "explicit_plan"),
    // Explicit: just do it.
    ("just do it", LATER, Direct, No, "explicit_direct"),
    (
        "rewrite the policy engine, just do it",
        NEW,
        Direct,
        No,
        "explicit_direct",
    ),
    (
        "add a --quiet flag, no need to plan first",
        NEW,
        Direct,
        No,
        "explicit_direct",
    ),
    (
        "skip the plan and migrate the store to sqlite",
        NEW,
        Direct,
        No,
        "explicit_direct",
    ),
    ("直接改", LATER, Direct, No, "explicit_direct"),
    (
        "重构错误处理，直接改就行",
        NEW,
        Direct,
        No,
        "explicit_direct",
    ),
    (
        "添加 --quiet 参数，不用规划",
        NEW,
        Direct,
        No,
        "explicit_direct",
    ),
    // Explicit: plan only, don't execute.
    (
        "plan only, don't execute",
        LATER,
        PlanOnly,
        Light,
        "explicit_plan_only",
    ),
    (
        "add a --quiet flag. Plan only, don't execute.",
        NEW,
        PlanOnly,
        Light,
        "explicit_plan_only",
    ),
    (
        "migrate to sqlite — just a plan please, do not execute",
        NEW,
        PlanOnly,
        Full,
        "explicit_plan_only",
    ),
    (
        "just do it, but plan only",
        NEW,
        PlanOnly,
        Light,
        "explicit_plan_only",
    ),
    (
        "只规划，不要执行",
        LATER,
        PlanOnly,
        Light,
        "explicit_plan_only",
    ),
    (
        "把存储迁移到 sqlite，只规划，不要执行",
        NEW,
        PlanOnly,
        Full,
        "explicit_plan_only",
    ),
    (
        "添加 --quiet 参数，先别改",
        NEW,
        PlanOnly,
        Light,
        "explicit_plan_only",
    ),
    // Explicit: wait for my approval.
    (
        "add a --quiet flag and wait for my approval",
        NEW,
        Approval,
        Light,
        "explicit_approval",
    ),
    (
        "plan first and wait for my approval before changing anything",
        NEW,
        Approval,
        Light,
        "explicit_approval",
    ),
    (
        "rewrite the policy engine; ask me before you change files",
        NEW,
        Approval,
        Full,
        "explicit_approval",
    ),
    (
        "添加 --quiet 参数，等我确认",
        NEW,
        Approval,
        Light,
        "explicit_approval",
    ),
    (
        "先规划，等我确认后再改",
        NEW,
        Approval,
        Light,
        "explicit_approval",
    ),
    (
        "重写策略引擎，我确认后再动手",
        NEW,
        Approval,
        Full,
        "explicit_approval",
    ),
    // Quoted phrases are talked about, not meant.
    ("what does \"plan first\" do?", NEW, Direct, No, "question"),
    (
        "add a test that routes 'just do it' to the executor",
        NEW,
        Plan,
        Light,
        "bounded_work",
    ),
    (
        "document the phrase `plan only, don't execute` in README.md",
        NEW,
        Plan,
        Light,
        "bounded_work",
    ),
    ("“先规划”这个短语是什么意思？", NEW, Direct, No, "question"),
    (
        "给路由添加对「直接改」的测试",
        NEW,
        Plan,
        Light,
        "bounded_work",
    ),
    (
        "fix the typo in 'wait for my approval' in docs/SPEC.md",
        NEW,
        Direct,
        No,
        "small_edit",
    ),
    (
        "can you add a --quiet flag to reasonix run?",
        NEW,
        Plan,
        Light,
        "bounded_work",
    ),
    ("请实现网页抓取工具的重试", NEW, Plan, Light, "bounded_work"),
    // Plan mode (§1) asks for a plan and its approval already.
    (
        "add a --quiet flag",
        TurnMeta {
            follow_up: false,
            attachments: 0,
            plan_mode: true,
        },
        Approval,
        Light,
        "plan_mode",
    ),
    // Commands and nothing.
    ("/context", LATER, Direct, No, "command"),
    ("   ", NEW, Direct, No, "empty"),
];

#[test]
fn the_routing_table() {
    assert!(TABLE.len() >= 60, "{} rows", TABLE.len());
    let zh = TABLE
        .iter()
        .filter(|r| r.0.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)))
        .count();
    assert!(zh >= 25, "{zh} Chinese rows");
    let mut wrong = Vec::new();
    for (text, meta, route_, depth, reason) in TABLE {
        let d = route(text, *meta);
        let want = Decision {
            route: *route_,
            depth: *depth,
            reason,
        };
        if d != want {
            wrong.push(format!(
                "{text:?}: got {} {} {}, want {} {} {}",
                d.route.as_str(),
                d.depth.as_str(),
                d.reason,
                want.route.as_str(),
                want.depth.as_str(),
                want.reason
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} rows wrong:\n{}",
        wrong.len(),
        TABLE.len(),
        wrong.join("\n")
    );
}

#[test]
fn the_reason_never_carries_the_users_text() {
    for (text, meta, ..) in TABLE {
        let d = route(text, *meta);
        assert!(
            d.reason.len() <= 24 && d.reason.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{}",
            d.reason
        );
    }
}

#[test]
fn fail_closed_routes_and_budgets() {
    assert!(Route::PlanOnly.fail_closed() && Route::Approval.fail_closed());
    assert!(!Route::Plan.fail_closed() && !Route::Direct.fail_closed());
    assert!(Depth::Light.budget() < Depth::Full.budget());
    assert_eq!(Depth::None.budget(), 0);
}
