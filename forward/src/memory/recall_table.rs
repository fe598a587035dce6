//! The recall table: queries in English and Chinese and the fact each must find first.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::memory::fact::{Fact, FactType, Scope};

fn fact(id: &str, subject: Option<&str>, keywords: &[&str], body: &str) -> Fact {
    Fact {
        id: id.into(),
        revision: 1,
        kind: FactType::Project,
        scope: Scope::Project,
        keywords: keywords.iter().map(|k| k.to_string()).collect(),
        subject: subject.map(str::to_string),
        created: "2026-12-01T00:00:00Z".into(),
        updated: "2026-12-01T00:00:00Z".into(),
        session: None,
        pinned: false,
        expires: None,
        body: body.into(),
    }
}

fn facts() -> Vec<Fact> {
    vec![
        fact("db", Some("database"), &["postgres"], "We use Postgres 16 for all services; SQLite was ruled out on day 1 because it has no concurrent writers."),
        fact("orm", None, &["sqlx"], "Queries go through sqlx with compile-time checked macros; no ORM such as diesel."),
        fact("deploy", Some("deploy"), &["kubernetes", "helm"], "Deployments run through the Helm chart in deploy/chart; never kubectl apply by hand."),
        fact("ci", None, &["github actions"], "CI is GitHub Actions; the nightly workflow runs the fuzzers for one hour."),
        fact("fmt", None, &["style"], "Run cargo fmt and clippy with -D warnings before every commit."),
        fact("errors", None, &["anyhow", "thiserror"], "Library crates define errors with thiserror; only binaries use anyhow."),
        fact("logging", None, &["tracing"], "Logging uses tracing with JSON lines to a file, never println in library code."),
        fact("api-docs", None, &["reference"], "The public HTTP API reference lives at docs/api/openapi.yaml."),
        fact("release", Some("release-cadence"), &[], "Releases are cut every second Tuesday from the main branch with a signed tag."),
        fact("tests-e2e", None, &["testing"], "End-to-end tests use a real sshd and the mock provider; mocks only in unit tests."),
        fact("frontend", None, &["react", "typescript"], "The dashboard frontend is React with TypeScript and Vite; no Redux, state lives in Zustand."),
        fact("timezone", None, &[], "All timestamps are stored in UTC and shown in the user's local timezone."),
        fact("zh-db", Some("数据库"), &[], "数据库统一使用 PostgreSQL，不要引入 MySQL。"),
        fact("zh-deploy", None, &[], "上线前必须先在预发布环境验证，周五下午不发布。"),
        fact("zh-style", None, &[], "代码注释用英文写，提交信息用中文写。"),
        fact("zh-cache", None, &[], "缓存层使用 Redis 集群，过期时间默认为十分钟。"),
        fact("zh-auth", None, &[], "用户登录使用短信验证码，不支持邮箱密码登录。"),
        fact("zh-perf", None, &[], "接口响应时间的目标是九十九分位低于两百毫秒。"),
        fact("zh-review", None, &[], "每个合并请求至少需要两位同事审核通过。"),
        fact("zh-docs", None, &[], "设计文档放在飞书知识库的架构目录下。"),
        fact("ja-note", None, &[], "日本語のドキュメントは翻訳チームが管理します。"),
        fact("ko-note", None, &[], "한국어 번역은 외부 업체가 담당합니다."),
    ]
}

/// (query, the fact it must find first).
const TABLE: &[(&str, &str)] = &[
    ("which database should I use?", "db"),
    ("can we switch to sqlite?", "db"),
    ("postgres version", "db"),
    ("should I add diesel as an ORM?", "orm"),
    ("how are SQL queries written", "orm"),
    ("how do I deploy the service", "deploy"),
    ("run kubectl apply for the new config", "deploy"),
    ("update the helm chart", "deploy"),
    ("the nightly workflow failed", "ci"),
    ("set up github actions", "ci"),
    ("what to run before a commit", "fmt"),
    ("clippy warnings", "fmt"),
    ("should this crate use anyhow for errors", "errors"),
    ("add a thiserror enum", "errors"),
    ("add some println debugging", "logging"),
    ("where do the logs go? tracing setup", "logging"),
    ("where is the openapi spec", "api-docs"),
    ("HTTP API reference", "api-docs"),
    ("when is the next release", "release"),
    ("tag a release on main", "release"),
    ("write an end-to-end test with sshd", "tests-e2e"),
    ("can I mock the provider in e2e tests", "tests-e2e"),
    ("add redux to the dashboard", "frontend"),
    ("frontend state management", "frontend"),
    ("store timestamps in local time?", "timezone"),
    ("数据库用什么？", "zh-db"),
    ("能不能用 MySQL", "zh-db"),
    ("数据库选型", "zh-db"),
    ("周五可以发布吗", "zh-deploy"),
    ("上线流程是什么", "zh-deploy"),
    ("预发布环境怎么验证", "zh-deploy"),
    ("提交信息用什么语言写", "zh-style"),
    ("代码注释的规范", "zh-style"),
    ("缓存过期时间是多少", "zh-cache"),
    ("Redis 怎么配置", "zh-cache"),
    ("登录方式有哪些", "zh-auth"),
    ("支持邮箱登录吗", "zh-auth"),
    ("接口响应时间要求", "zh-perf"),
    ("性能目标", "zh-perf"),
    ("合并请求需要几个人审核", "zh-review"),
    ("设计文档在哪里", "zh-docs"),
    ("架构文档放哪", "zh-docs"),
    ("ドキュメントの翻訳は誰が管理", "ja-note"),
    ("한국어 번역 담당", "ko-note"),
];

#[test]
fn every_query_finds_its_fact_first() {
    let facts = facts();
    let index = Index::build(&facts);
    let mut misses = Vec::new();
    for (query, want) in TABLE {
        let got = select(&facts, &index, query, "2026-12-05", &[]);
        let ids: Vec<&str> = got.iter().map(|i| facts[*i].id.as_str()).collect();
        if ids.first() != Some(want) {
            misses.push(format!("{query:?}: want {want}, got {ids:?}"));
        }
    }
    assert!(TABLE.len() >= 40);
    assert!(misses.is_empty(), "recall misses:\n{}", misses.join("\n"));
}

#[test]
fn unrelated_queries_recall_nothing() {
    let facts = facts();
    let index = Index::build(&facts);
    for q in ["hello", "thanks!", "ok", "好的", "谢谢"] {
        assert!(
            select(&facts, &index, q, "2026-12-05", &[]).is_empty(),
            "{q:?}"
        );
    }
}

#[test]
fn limits_expiry_and_skips() {
    let mut many: Vec<Fact> = (0..10)
        .map(|i| {
            fact(
                &format!("f{i}"),
                None,
                &[],
                &format!("widget rule number {i} {}", "x".repeat(500)),
            )
        })
        .collect();
    many[0].expires = Some("2026-01-01".into());
    let index = Index::build(&many);
    let got = select(
        &many,
        &index,
        "widget rule",
        "2026-12-05",
        &["f1".to_string()],
    );
    assert!(got.len() <= MAX_RECALLED);
    assert!(!got.contains(&0), "expired fact recalled");
    assert!(!got.contains(&1), "skipped fact recalled");
    let chars: usize = got.iter().map(|i| many[*i].body.chars().count()).sum();
    assert!(chars <= MAX_RECALL_CHARS, "{chars}");
    let block = render_block(&got.iter().map(|i| &many[*i]).collect::<Vec<_>>());
    assert!(block.starts_with("<recalled-memory") && block.ends_with("</recalled-memory>"));
}

#[test]
fn cjk_is_split_into_bigrams() {
    assert_eq!(tokenize("数据库"), ["数据", "据库"]);
    assert_eq!(tokenize("用 Postgres16 的"), ["用", "postgres16", "的"]);
    assert_eq!(tokenize("The DB, and the API"), ["db", "api"]);
    assert_eq!(tokenize("edits editor editing"), ["edit", "edit", "edit"]);
    assert_eq!(
        tokenize("processes process queries"),
        ["process", "process", "query"]
    );
}

#[test]
fn pinned_block_is_bounded() {
    let mut a = fact("a", None, &[], &"a".repeat(1000));
    a.pinned = true;
    let mut b = fact("b", None, &[], &"b".repeat(1000));
    b.pinned = true;
    let (text, left) = pinned_block(&[a, b], "2026-12-05");
    assert!(text.contains("[a · project]"));
    assert_eq!(left, ["b"]);
}

/// Many near-identical facts: the top-k path must give exactly the prefix of the full
/// ranking, and `select` must still fill up from further down when the best ones are skipped.
#[test]
fn top_k_is_the_prefix_of_the_full_ranking_and_skips_fall_back() {
    let many: Vec<Fact> = (0..200)
        .map(|i| {
            fact(
                &format!("m-{i:03}"),
                None,
                &[],
                &format!(
                    "deploy helm chart {} timeout retry {}",
                    "staging ".repeat(i % 7),
                    "note ".repeat(i % 5)
                ),
            )
        })
        .collect();
    let index = Index::build(&many);
    for q in [
        "deploy staging",
        "helm timeout retry",
        "note",
        "chart staging note",
    ] {
        let all = index.search(q);
        for k in [1, 4, 32, 500] {
            let top = index.search_top(q, k);
            assert_eq!(top.as_slice(), &all[..k.min(all.len())], "{q} k={k}");
        }
    }
    // Skip the 40 best: select must look past the first TOP_FIRST and still pick 4.
    let q = "deploy staging";
    let all = index.search(q);
    let skip: Vec<String> = all[..40].iter().map(|(i, _)| many[*i].id.clone()).collect();
    let picked = select(&many, &index, q, "2026-12-05", &skip);
    let want: Vec<usize> = all[40..44].iter().map(|(i, _)| *i).collect();
    assert_eq!(picked, want);
}
