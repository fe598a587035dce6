//! Routing of a user turn when a planner model is configured (issue 38 §2): a pure function
//! of the user's text and the turn's metadata, with no classifier call. It decides whether
//! the executor answers at once ([`Route::Direct`]), or the planner plans first — a light
//! plan (1–4 steps, a small research budget) or a full one (risks, acceptance criteria,
//! verification, rollback) — and whether the plan then runs ([`Route::Plan`]), waits for the
//! user's approval ([`Route::Approval`]) or is all the user wants ([`Route::PlanOnly`]).
//!
//! Explicit phrases in English and Chinese steer it ("plan first"/"先规划", "just do it"/
//! "直接改", "plan only, don't execute"/"只规划，不要执行", "wait for my approval"/"等我确认"),
//! wherever they stand in the message, but not inside quotes or code (a quoted phrase is
//! something the user talks about, not an instruction). When steering phrases conflict, the
//! one that executes less wins (plan only > approval > plan > direct), so a conflict fails
//! closed.
//!
//! The decision carries a short reason code ([`Decision::reason`]), never the user's text,
//! so it can be journaled and shown as it is.

/// Where a turn goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Straight to the executor (questions, short follow-ups, small bounded edits).
    Direct,
    /// The planner plans, then the executor executes the plan.
    Plan,
    /// The planner plans and the turn ends: the plan waits for the user's approval.
    Approval,
    /// The planner plans and nothing executes.
    PlanOnly,
}

impl Route {
    /// `direct`, `plan`, `approval`, `plan_only`.
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Direct => "direct",
            Route::Plan => "plan",
            Route::Approval => "approval",
            Route::PlanOnly => "plan_only",
        }
    }

    /// Nothing may execute unless the user approves (plan only, approval): a planner that
    /// does not converge must not hand the task to the executor.
    pub fn fail_closed(self) -> bool {
        matches!(self, Route::Approval | Route::PlanOnly)
    }
}

/// How deep the planner plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// No plan (a direct turn).
    None,
    /// 1–4 steps, a small research budget.
    Light,
    /// Risks, acceptance criteria, verification commands, rollback; a larger budget.
    Full,
}

impl Depth {
    /// `none`, `light`, `full`.
    pub fn as_str(self) -> &'static str {
        match self {
            Depth::None => "none",
            Depth::Light => "light",
            Depth::Full => "full",
        }
    }

    /// Model steps the planner may take before it must have handed its plan over (its
    /// research budget); 0 for no plan.
    pub fn budget(self) -> u32 {
        match self {
            Depth::None => 0,
            Depth::Light => 6,
            Depth::Full => 16,
        }
    }
}

/// What the host knows about a turn besides its text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnMeta {
    /// The session already has turns (a short message is then a follow-up).
    pub follow_up: bool,
    /// Files attached to the turn.
    pub attachments: usize,
    /// Plan mode (§1) is on: the user already asked for a plan and its approval.
    pub plan_mode: bool,
}

/// The routing of one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Where the turn goes.
    pub route: Route,
    /// How deep the planner plans.
    pub depth: Depth,
    /// Why, as a short code (never the user's text).
    pub reason: &'static str,
}

/// Phrases that ask for a plan and nothing else.
const PLAN_ONLY: &[&str] = &[
    "plan only",
    "only plan",
    "just plan",
    "just a plan",
    "only a plan",
    "don't execute",
    "dont execute",
    "do not execute",
    "don't implement",
    "do not implement",
    "without executing",
    "don't change anything",
    "do not change anything",
    "don't make any changes",
    "no changes yet",
    "只规划",
    "仅规划",
    "只做规划",
    "只出方案",
    "只给方案",
    "只要计划",
    "不要执行",
    "别执行",
    "不要实施",
    "先别改",
    "不要改代码",
];

/// Phrases that ask to approve the plan before it runs.
const APPROVAL: &[&str] = &[
    "wait for my approval",
    "wait for approval",
    "wait for my ok",
    "wait for my go",
    "until i approve",
    "let me approve",
    "let me review the plan",
    "ask me before",
    "check with me before",
    "get my approval",
    "等我确认",
    "等我批准",
    "等我同意",
    "我确认后",
    "确认后再",
    "经我同意",
    "让我先看",
    "先给我看",
];

/// Phrases that ask for a plan before the work.
const PLAN: &[&str] = &[
    "plan first",
    "plan it first",
    "plan this first",
    "make a plan",
    "write a plan",
    "draft a plan",
    "come up with a plan",
    "plan before",
    "plan it out",
    "think it through first",
    "先规划",
    "先计划",
    "先做计划",
    "先做个计划",
    "先出方案",
    "先出个方案",
    "先想清楚",
    "规划一下",
    "做个规划",
];

/// Phrases that ask to skip planning.
const DIRECT: &[&str] = &[
    "just do it",
    "just go",
    "go ahead and",
    "no plan",
    "no need to plan",
    "no need for a plan",
    "don't plan",
    "do not plan",
    "skip the plan",
    "skip planning",
    "without a plan",
    "without planning",
    "直接改",
    "直接做",
    "直接执行",
    "直接修",
    "直接写",
    "不用规划",
    "不要规划",
    "别规划",
    "不用计划",
    "不需要计划",
    "跳过规划",
];

/// Words of work that reaches across the code base or can do damage: a full plan.
const RISKY: &[&str] = &[
    "migrat",
    "database",
    "schema",
    "production",
    "deploy",
    "security",
    "authentication",
    "permission",
    "delete all",
    "drop table",
    "rewrite",
    "architecture",
    "across the",
    "every file",
    "all files",
    "whole code",
    "entire code",
    "codebase",
    "breaking change",
    "concurren",
    "redesign",
    "迁移",
    "数据库",
    "生产",
    "部署",
    "安全",
    "权限",
    "重写",
    "重构",
    "架构",
    "所有文件",
    "整个项目",
    "全部代码",
    "并发",
];

/// Words of vague work with no clear end: a full plan (the planner must pin it down).
const VAGUE: &[&str] = &[
    "improve",
    "make it better",
    "clean up",
    "cleanup",
    "optimi",
    "somehow",
    "figure out",
    "overhaul",
    "优化",
    "改进",
    "完善",
    "整理",
];

/// Words of implementation work: at least a light plan unless small and anchored.
const WORK: &[&str] = &[
    "implement",
    "add ",
    "build",
    "create",
    "write ",
    "support",
    "refactor",
    "introduce",
    "integrate",
    "extend",
    "port ",
    "document",
    "实现",
    "添加",
    "新增",
    "增加",
    "支持",
    "编写",
    "开发",
    "集成",
];

/// Words of a small edit (with a concrete anchor, it goes straight to the executor).
const SMALL_EDIT: &[&str] = &[
    "typo",
    "rename",
    "fix",
    "change",
    "update",
    "bump",
    "replace",
    "remove",
    "tweak",
    "set ",
    "拼写",
    "重命名",
    "修复",
    "修改",
    "改成",
    "改为",
    "替换",
    "删掉",
    "更新",
];

/// Openings of a question.
const QUESTION_START: &[&str] = &[
    "what",
    "why",
    "how",
    "where",
    "when",
    "who",
    "which",
    "is ",
    "are ",
    "does ",
    "do ",
    "can ",
    "could ",
    "should ",
    "explain",
    "describe",
    "show me",
    "tell me",
    "list ",
    "什么",
    "为什么",
    "怎么",
    "如何",
    "哪",
    "是否",
    "解释",
    "说明一下",
];

/// Openings of a request phrased as a question ("can you add ...?").
const REQUEST_START: &[&str] = &[
    "can you",
    "could you",
    "would you",
    "will you",
    "please",
    "能不能",
    "能否",
    "你能",
    "请",
];

/// Short messages that continue what is going on.
const FOLLOW_UP: &[&str] = &[
    "yes",
    "no",
    "ok",
    "okay",
    "thanks",
    "thank you",
    "continue",
    "go on",
    "try again",
    "retry",
    "again",
    "looks good",
    "lgtm",
    "do that",
    "好",
    "好的",
    "继续",
    "可以",
    "谢谢",
    "再试",
    "没问题",
    "行",
];

/// Route a turn of `text` with `meta`.
pub fn route(text: &str, meta: TurnMeta) -> Decision {
    let plain = unquoted(text).to_lowercase();
    let plain = plain.trim();
    let plan_depth = || {
        if full_work(plain) {
            Depth::Full
        } else {
            Depth::Light
        }
    };
    if has(plain, PLAN_ONLY) {
        return Decision {
            route: Route::PlanOnly,
            depth: plan_depth(),
            reason: "explicit_plan_only",
        };
    }
    if has(plain, APPROVAL) {
        return Decision {
            route: Route::Approval,
            depth: plan_depth(),
            reason: "explicit_approval",
        };
    }
    if meta.plan_mode {
        return Decision {
            route: Route::Approval,
            depth: plan_depth(),
            reason: "plan_mode",
        };
    }
    // A direct phrase inside a plan phrase's negation ("no need to plan first") is the
    // user's word: look for the direct phrases first where they overlap.
    let direct = has(plain, DIRECT);
    let plan = has(&strip(plain, DIRECT), PLAN);
    if plan {
        return Decision {
            route: Route::Plan,
            depth: plan_depth(),
            reason: "explicit_plan",
        };
    }
    if direct {
        return Decision {
            route: Route::Direct,
            depth: Depth::None,
            reason: "explicit_direct",
        };
    }
    let direct = |reason| Decision {
        route: Route::Direct,
        depth: Depth::None,
        reason,
    };
    if plain.is_empty() {
        return direct("empty");
    }
    if plain.starts_with('/') || plain.starts_with('!') {
        return direct("command");
    }
    let chars = plain.chars().count();
    if is_question(plain) && !REQUEST_START.iter().any(|r| plain.starts_with(r)) {
        return direct("question");
    }
    if meta.follow_up && chars <= 24 && FOLLOW_UP.iter().any(|f| plain.starts_with(f)) {
        return direct("short_follow_up");
    }
    if has(plain, RISKY) {
        return Decision {
            route: Route::Plan,
            depth: Depth::Full,
            reason: "risky",
        };
    }
    if chars > 600 || clauses(plain) >= 4 {
        return Decision {
            route: Route::Plan,
            depth: Depth::Full,
            reason: "cross_cutting",
        };
    }
    if has(plain, VAGUE) && !anchored(plain) {
        return Decision {
            route: Route::Plan,
            depth: Depth::Full,
            reason: "ambiguous",
        };
    }
    if has(plain, SMALL_EDIT) && !has(plain, WORK) && chars <= 160 {
        return direct("small_edit");
    }
    if has(plain, WORK) || has(plain, VAGUE) {
        if chars <= 80 && anchored(plain) && meta.attachments == 0 && has(plain, SMALL_EDIT) {
            return direct("small_edit");
        }
        return Decision {
            route: Route::Plan,
            depth: Depth::Light,
            reason: "bounded_work",
        };
    }
    if meta.follow_up && chars <= 80 {
        return direct("short_follow_up");
    }
    if chars <= 120 {
        return direct("short_request");
    }
    Decision {
        route: Route::Plan,
        depth: Depth::Light,
        reason: "long_request",
    }
}

/// Work big enough for a full plan when the user asked for a plan.
fn full_work(plain: &str) -> bool {
    has(plain, RISKY)
        || plain.chars().count() > 600
        || clauses(plain) >= 4
        || (has(plain, VAGUE) && !anchored(plain))
}

fn has(text: &str, phrases: &[&str]) -> bool {
    phrases.iter().any(|p| contains_phrase(text, p))
}

/// `phrase` in `text`, not as the middle of an ASCII word ("plan onlyx" does not count,
/// "replan first" neither).
fn contains_phrase(text: &str, phrase: &str) -> bool {
    let ascii_start = phrase
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    text.match_indices(phrase).any(|(i, _)| {
        !ascii_start
            || text[..i]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_ascii_alphanumeric())
    })
}

/// `text` without the `phrases` in it.
fn strip(text: &str, phrases: &[&str]) -> String {
    let mut out = text.to_string();
    for p in phrases {
        out = out.replace(p, " ");
    }
    out
}

fn is_question(plain: &str) -> bool {
    plain.ends_with('?')
        || plain.ends_with('？')
        || plain.ends_with('吗')
        || plain.ends_with("呢")
        || QUESTION_START.iter().any(|q| plain.starts_with(q))
}

/// A concrete place: a path, a file name, an identifier in backticks was there (quotes are
/// gone by now, so look for the shapes), a line number.
fn anchored(plain: &str) -> bool {
    plain
        .split(|c: char| c.is_whitespace() || "，。,;；".contains(c))
        .any(|w| {
            let w =
                w.trim_matches(|c: char| !c.is_alphanumeric() && c != '/' && c != '.' && c != '_');
            (w.contains('/') && w.len() > 2)
                || (w.contains('.')
                    && w.rsplit('.').next().is_some_and(|e| {
                        (1..=5).contains(&e.len()) && e.chars().all(|c| c.is_ascii_alphanumeric())
                    })
                    && !w.ends_with('.'))
                || (w.contains('_') && w.len() > 3)
                || w.contains("()")
        })
        || plain.contains("line ")
        || plain.contains('行')
        || plain.contains("⟨code⟩")
}

/// Separate pieces of work: items of a list, sentences joined by "then"/"and also"/"然后".
fn clauses(plain: &str) -> usize {
    let items = plain
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("- ")
                || l.starts_with("* ")
                || l.chars().next().is_some_and(|c| c.is_ascii_digit()) && l.contains(". ")
        })
        .count();
    let joins = [
        "then ",
        "and also",
        "after that",
        "然后",
        "接着",
        "并且",
        "同时",
    ]
    .iter()
    .map(|j| plain.matches(j).count())
    .sum::<usize>();
    items.max(joins + 1)
}

/// `text` with quoted passages and code replaced by a marker: a phrase the user quotes is
/// talked about, not meant.
fn unquoted(text: &str) -> String {
    const PAIRS: &[(char, char)] = &[
        ('"', '"'),
        ('`', '`'),
        ('“', '”'),
        ('‘', '’'),
        ('「', '」'),
        ('『', '』'),
        ('《', '》'),
    ];
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // A single quote quotes only when it opens at a word start (not "don't").
        let single = c == '\''
            && i.checked_sub(1)
                .and_then(|p| chars.get(p))
                .is_none_or(|p| !p.is_alphanumeric());
        let close = if single {
            Some('\'')
        } else {
            PAIRS.iter().find(|(o, _)| *o == c).map(|(_, cl)| *cl)
        };
        if let Some(close) = close {
            let end = chars[i + 1..]
                .iter()
                .position(|&x| x == close)
                .map(|p| i + 1 + p);
            if let Some(end) = end {
                let code = c == '`';
                out.push_str(if code {
                    " ⟨code⟩ "
                } else {
                    " ⟨quote⟩ "
                });
                i = end + 1;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
