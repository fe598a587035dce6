//! What the `history` tool searches: every message of the session as journaled (before any
//! compaction touched it) and every archived original, ranked with BM25.

use std::collections::HashMap;

/// One searchable message.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryDoc {
    /// Id to load it by: `e<seq>` for a journal event, the archive id for an archived one.
    pub id: String,
    /// Turn it belongs to.
    pub turn: u64,
    /// `user`, `assistant`, `tool` (with the tool's name) or `archived`.
    pub role: String,
    /// Its text.
    pub text: String,
}

/// A session's searchable history (implemented by the session, handed to tools).
pub trait HistorySource: Send + Sync {
    /// Every document, oldest first.
    fn documents(&self) -> Vec<HistoryDoc>;
}

/// No history (contexts outside a session).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHistory;

impl HistorySource for NoHistory {
    fn documents(&self) -> Vec<HistoryDoc> {
        Vec::new()
    }
}

/// Lower-cased alphanumeric words (underscores and dots inside identifiers split too, so
/// `foo_bar.rs` matches `foo`, `bar` and `rs`).
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// BM25 (k1 = 1.2, b = 0.75) scores of `docs` for `query`; returns (index, score) of the
/// documents that match at least one term, best first (ties: newer first).
pub fn bm25(docs: &[HistoryDoc], query: &str) -> Vec<(usize, f64)> {
    let terms: Vec<String> = {
        let mut t = tokenize(query);
        reasonix_forward::sort::sort(&mut t);
        t.dedup();
        t
    };
    if terms.is_empty() || docs.is_empty() {
        return Vec::new();
    }
    let tfs: Vec<HashMap<String, usize>> = docs
        .iter()
        .map(|d| {
            let mut m = HashMap::new();
            for w in tokenize(&d.text) {
                *m.entry(w).or_insert(0) += 1;
            }
            m
        })
        .collect();
    let lens: Vec<usize> = tfs.iter().map(|m| m.values().sum()).collect();
    let avg = lens.iter().sum::<usize>() as f64 / docs.len() as f64;
    let n = docs.len() as f64;
    let (k1, b) = (1.2, 0.75);
    let mut scores: Vec<(usize, f64)> = Vec::new();
    for (i, tf) in tfs.iter().enumerate() {
        let mut s = 0.0;
        for t in &terms {
            let Some(&f) = tf.get(t) else { continue };
            let df = tfs.iter().filter(|m| m.contains_key(t)).count() as f64;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            let f = f as f64;
            s += idf * f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * lens[i] as f64 / avg.max(1.0)));
        }
        if s > 0.0 {
            scores.push((i, s));
        }
    }
    reasonix_forward::sort::sort_by(&mut scores, |a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    scores
}

/// Up to `max` characters of `text` around the first query term found in it.
pub fn snippet(text: &str, query: &str, max: usize) -> String {
    let lower = text.to_lowercase();
    let at = tokenize(query)
        .iter()
        .filter_map(|t| lower.find(t.as_str()))
        .min()
        .unwrap_or(0);
    // Byte offsets of the lower-cased text are close to the original's for the scripts we
    // meet; clamp to char boundaries of the original.
    let mut start = at.saturating_sub(max / 3).min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + max).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut s = text[start..end].replace('\n', " ");
    if start > 0 {
        s.insert(0, '…');
    }
    if end < text.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, text: &str) -> HistoryDoc {
        HistoryDoc {
            id: id.into(),
            turn: 1,
            role: "tool".into(),
            text: text.into(),
        }
    }

    #[test]
    fn rare_terms_rank_first() {
        let docs = vec![
            doc(
                "a",
                "the build failed with error E0308 mismatched types in parser.rs",
            ),
            doc("b", "the build passed"),
            doc("c", "the the the build build"),
        ];
        let r = bm25(&docs, "E0308 build");
        assert_eq!(r[0].0, 0);
        assert_eq!(r.len(), 3);
        assert!(bm25(&docs, "nothing-here-xyz").is_empty());
        let s = snippet(&docs[0].text, "mismatched", 20);
        assert!(s.contains("mismatched"), "{s}");
    }
}
