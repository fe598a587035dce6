//! Recall over 10,000 facts (`bench/memory_recall.sh`): the time of one recall (BM25 over the
//! cached index, selection within the limits) and the index's memory. Ignored in normal runs:
//! timing belongs to the bench script, never to an assertion.

#![allow(clippy::unwrap_used)]

use std::time::Instant;

use reasonix_forward::memory::recall::{select, Index};
use reasonix_forward::memory::{Fact, FactType, Scope};

const EN: &[&str] = &[
    "database",
    "postgres",
    "deploy",
    "helm",
    "cache",
    "redis",
    "login",
    "token",
    "review",
    "release",
    "frontend",
    "react",
    "tracing",
    "logging",
    "errors",
    "tests",
    "fuzz",
    "queue",
    "kafka",
    "schema",
    "migration",
    "index",
    "latency",
    "budget",
    "docs",
    "api",
    "grpc",
    "retry",
    "timeout",
    "sandbox",
    "policy",
    "ssh",
    "agent",
    "prompt",
    "window",
    "compaction",
];
const ZH: &[&str] = &[
    "数据库",
    "部署",
    "缓存",
    "登录",
    "审核",
    "发布",
    "前端",
    "日志",
    "错误",
    "测试",
    "队列",
    "迁移",
    "索引",
    "延迟",
    "预算",
    "文档",
    "接口",
    "重试",
    "超时",
    "沙箱",
    "策略",
];

fn facts(n: usize) -> Vec<Fact> {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    (0..n)
        .map(|i| {
            let mut body = String::new();
            for _ in 0..(12 + next() % 20) {
                if next() % 4 == 0 {
                    body.push_str(ZH[(next() % ZH.len() as u64) as usize]);
                } else {
                    body.push_str(EN[(next() % EN.len() as u64) as usize]);
                    body.push(' ');
                }
            }
            body.push_str(&format!("rule-{i}"));
            Fact {
                id: format!("m-{i:06}"),
                revision: 1,
                kind: FactType::Project,
                scope: Scope::Project,
                keywords: vec![],
                subject: None,
                created: "2026-12-01T00:00:00Z".into(),
                updated: "2026-12-01T00:00:00Z".into(),
                session: None,
                pinned: false,
                expires: None,
                body,
            }
        })
        .collect()
}

#[test]
#[ignore = "benchmark: run bench/memory_recall.sh"]
fn bench_memory_recall_10000() {
    let n: usize = std::env::var("BENCH_FACTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let facts = facts(n);
    let t = Instant::now();
    let index = Index::build(&facts);
    let build_ms = t.elapsed().as_secs_f64() * 1000.0;
    let queries = [
        "which database do we use for the queue migration?",
        "how do I deploy with helm and what is the timeout",
        "数据库迁移怎么做",
        "登录接口的超时和重试策略",
        "react frontend logging errors",
        "what is the latency budget of the grpc api",
    ];
    let mut times = Vec::new();
    for round in 0..50 {
        for q in queries {
            let t = Instant::now();
            let picked = select(&facts, &index, q, "2026-12-05", &[]);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            if round == 0 {
                assert!(!picked.is_empty(), "{q}");
            }
        }
    }
    // The slowest query's median too (a query whose best facts are skipped or too long
    // falls back to ranking every match).
    let mut worst = (0.0, "");
    for (qi, q) in queries.iter().enumerate() {
        let mut mine: Vec<f64> = times
            .iter()
            .skip(qi)
            .step_by(queries.len())
            .copied()
            .collect();
        mine.sort_by(f64::total_cmp);
        let m = mine[mine.len() / 2];
        if m > worst.0 {
            worst = (m, q);
        }
    }
    println!(
        "memory recall: slowest query median {:.2} ms: {:?}; {} of {} recalls over 5 ms",
        worst.0,
        worst.1,
        times.iter().filter(|t| **t > 5.0).count(),
        times.len()
    );
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let p95 = times[times.len() * 95 / 100];
    println!(
        "memory recall: {n} facts, index built in {build_ms:.0} ms, recall median {median:.2} ms, p95 {p95:.2} ms, index ~{:.1} MB",
        index.heap_bytes() as f64 / 1e6
    );
}
