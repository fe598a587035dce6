//! Client-side wording of the context figures every front end shows: compaction events
//! (declared cache resets) and a session's usage and cost.

use reasonix_forward::proto::{CompactionKind, CompactionTrigger, Usage};

use crate::config::Prices;

/// One line describing a compaction event.
pub fn compaction_line(
    kind: CompactionKind,
    trigger: CompactionTrigger,
    tokens_before: u64,
    tokens_after: u64,
    count: usize,
) -> String {
    let what = match kind {
        CompactionKind::Snip => format!("snipped {count} old tool result(s)"),
        CompactionKind::Summary => format!("summarised {count} older message(s)"),
    };
    let why = match trigger {
        CompactionTrigger::Threshold => "the context crossed its threshold",
        CompactionTrigger::Forced => "forced: the next request would have overflowed",
        CompactionTrigger::User => "asked for with /compact",
    };
    format!(
        "context compacted ({why}): {what}, about {tokens_before} → {tokens_after} tokens; originals archived on the host; the next request misses the cache once"
    )
}

/// Input cost of one request at `p` (per 1M tokens): misses at the input price, hits at
/// the cached price, completion at the output price.
pub fn cost_of(usage: &Usage, p: &Prices) -> f64 {
    let uncached = if usage.cache_hit_tokens + usage.cache_miss_tokens > 0 {
        usage.cache_miss_tokens
    } else {
        usage.prompt_tokens
    };
    (uncached as f64 * p.input
        + usage.cache_hit_tokens as f64 * p.cached
        + usage.completion_tokens as f64 * p.output)
        / 1_000_000.0
}
