//! Recall: BM25 over facts, deterministic and plain. Latin-script text is split into
//! lower-cased words (a few English stop words dropped); Chinese, Japanese and Korean text,
//! which has no spaces, into overlapping character bigrams (a lone character stays a
//! unigram), so a Chinese note is found by a Chinese question.
//!
//! What recall adds to a user turn is bounded: at most [`MAX_RECALLED`] facts and
//! [`MAX_RECALL_CHARS`] characters of fact text, in one tagged block appended to the user's
//! message (never the system prompt: the cached prefix stays byte-identical).

use std::collections::HashMap;

use super::fact::{truncate, Fact};

/// Most facts recalled into one user turn.
pub const MAX_RECALLED: usize = 4;
/// Most characters of fact text recalled into one user turn.
pub const MAX_RECALL_CHARS: usize = 2_400;
/// Most characters of pinned facts in the standing instructions.
pub const MAX_PINNED_CHARS: usize = 1_500;
/// A fact is recalled only when its score is at least this share of the best one.
const RELATIVE_CUTOFF: f64 = 0.3;

const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how",
    "i", "if", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "should", "so",
    "that", "the", "this", "to", "use", "we", "what", "when", "where", "which", "who", "why",
    "will", "with", "you", "your",
];

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x2FFFF) // extensions B–F
}

/// A light English suffix stripper (plural, `-ing`, `-ed`, agent `-er`/`-or`), so `edits`,
/// `editing` and `editor` meet at `edit`. Words of six letters or fewer keep their `-er`.
fn stem(w: String) -> String {
    if !w.is_ascii() || w.len() <= 3 {
        return w;
    }
    let mut s: &str = &w;
    if let Some(x) = s.strip_suffix("sses") {
        return format!("{x}ss");
    }
    if let Some(x) = s.strip_suffix("ies").filter(|x| x.len() >= 2) {
        return format!("{x}y");
    }
    if !s.ends_with("ss") && !s.ends_with("us") && !s.ends_with("is") {
        s = s.strip_suffix('s').unwrap_or(s);
    }
    for suffix in ["ing", "ed", "er", "or"] {
        if let Some(x) = s.strip_suffix(suffix) {
            let min = if suffix.len() == 2 && suffix != "ed" {
                4
            } else {
                3
            };
            if x.len() >= min && x.bytes().any(|b| b"aeiouy".contains(&b)) {
                return x.to_string();
            }
        }
    }
    s.to_string()
}

/// Search terms of `text`: lower-cased, lightly stemmed words of letters and digits, and
/// character bigrams of CJK runs.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let flush_word = |w: &mut String, out: &mut Vec<String>| {
        if !w.is_empty() {
            let lw = w.to_lowercase();
            if !STOP.contains(&lw.as_str()) {
                out.push(stem(lw));
            }
            w.clear();
        }
    };
    let flush_cjk = |run: &mut Vec<char>, out: &mut Vec<String>| {
        match run.len() {
            0 => {}
            1 => out.push(run[0].to_string()),
            _ => {
                for pair in run.windows(2) {
                    out.push(pair.iter().collect());
                }
            }
        }
        run.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            flush_word(&mut word, &mut out);
            cjk.push(c);
        } else if c.is_alphanumeric() {
            flush_cjk(&mut cjk, &mut out);
            word.push(c);
        } else {
            flush_word(&mut word, &mut out);
            flush_cjk(&mut cjk, &mut out);
        }
    }
    flush_word(&mut word, &mut out);
    flush_cjk(&mut cjk, &mut out);
    out
}

/// BM25 parameters.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// How many of the best facts [`select`] looks at first (it falls back to every match when
/// expired or skipped facts leave it short).
const TOP_FIRST: usize = 32;

/// A BM25 index over facts (k1 = 1.2, b = 0.75), built once per store change: an inverted
/// index, so a query touches only the facts that share a term with it. Each posting carries
/// its fact's term-frequency weight `f·(k1+1) / (f + k1·norm)`, computed at build time, so a
/// query only multiplies by the term's idf and adds.
#[derive(Debug, Default)]
pub struct Index {
    postings: HashMap<String, Vec<(u32, f32)>>,
    docs: usize,
}

impl Index {
    /// Indexes the search text of `facts` (same order).
    pub fn build(facts: &[Fact]) -> Index {
        let mut counts: Vec<HashMap<String, u32>> = Vec::with_capacity(facts.len());
        let mut lens: Vec<u32> = Vec::with_capacity(facts.len());
        for f in facts {
            let mut tf: HashMap<String, u32> = HashMap::new();
            for t in tokenize(&f.search_text()) {
                *tf.entry(t).or_insert(0) += 1;
            }
            lens.push(tf.values().sum());
            counts.push(tf);
        }
        let n = lens.len().max(1) as f64;
        let avg = (lens.iter().map(|l| *l as f64).sum::<f64>() / n).max(1.0);
        let mut idx = Index {
            postings: HashMap::new(),
            docs: facts.len(),
        };
        for (i, tf) in counts.into_iter().enumerate() {
            let k1norm = K1 * (1.0 - B + B * lens[i] as f64 / avg);
            for (t, f) in tf {
                let f = f as f64;
                let w = f * (K1 + 1.0) / (f + k1norm);
                idx.postings
                    .entry(t)
                    .or_default()
                    .push((i as u32, w as f32));
            }
        }
        idx
    }

    /// (index, score) of the facts matching `query`, best first (ties: lower index first).
    pub fn search(&self, query: &str) -> Vec<(usize, f64)> {
        self.search_top(query, usize::MAX)
    }

    /// The best `k` of [`Index::search`] (all of them when fewer match), without sorting
    /// the rest.
    pub fn search_top(&self, query: &str, k: usize) -> Vec<(usize, f64)> {
        let mut terms = tokenize(query);
        crate::sort::sort(&mut terms);
        terms.dedup();
        let n = self.docs as f64;
        // Dense accumulator: one slot per fact, and the list of the facts touched.
        let mut acc: Vec<f64> = vec![0.0; self.docs];
        let mut touched: Vec<u32> = Vec::new();
        for t in &terms {
            let Some(list) = self.postings.get(t) else {
                continue;
            };
            let df = list.len() as f64;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(doc, w) in list {
                let slot = &mut acc[doc as usize];
                if *slot == 0.0 {
                    touched.push(doc);
                }
                *slot += idf * w as f64;
            }
        }
        let mut scores: Vec<(usize, f64)> = touched
            .into_iter()
            .map(|d| (d as usize, acc[d as usize]))
            .filter(|(_, s)| *s > 0.0)
            .collect();
        let order = |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if k < scores.len() {
            scores.select_nth_unstable_by(k, order);
            scores.truncate(k);
        }
        crate::sort::sort_by(&mut scores, order);
        scores
    }

    /// Approximate heap bytes of the index (for the benchmark).
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(String, Vec<(u32, f32)>)>() + 8;
        self.postings
            .iter()
            .map(|(k, v)| k.capacity() + entry + v.capacity() * 8)
            .sum()
    }
}

/// The facts to recall for `query`: indices into `facts`, best first, within
/// [`MAX_RECALLED`] facts and [`MAX_RECALL_CHARS`] characters; expired facts (by `now`) and
/// `skip` ids are left out.
pub fn select(
    facts: &[Fact],
    index: &Index,
    query: &str,
    now: &str,
    skip: &[String],
) -> Vec<usize> {
    // The best few first; every match only when expired or skipped facts leave them short.
    let first = index.search_top(query, TOP_FIRST);
    let picked = pick(facts, &first, now, skip);
    if picked.len() == MAX_RECALLED || first.len() < TOP_FIRST {
        return picked;
    }
    let last = first.last().map(|r| r.1).unwrap_or(0.0);
    let top = first.first().map(|r| r.1).unwrap_or(0.0);
    if last < top * RELATIVE_CUTOFF {
        return picked;
    }
    pick(facts, &index.search(query), now, skip)
}

fn pick(facts: &[Fact], ranked: &[(usize, f64)], now: &str, skip: &[String]) -> Vec<usize> {
    let Some(&(_, top)) = ranked.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut chars = 0;
    for &(i, score) in ranked {
        if out.len() == MAX_RECALLED || score < top * RELATIVE_CUTOFF {
            break;
        }
        let f = &facts[i];
        if f.expired(now) || skip.contains(&f.id) {
            continue;
        }
        let len = f.body.chars().count();
        if chars + len > MAX_RECALL_CHARS && !out.is_empty() {
            continue;
        }
        chars += len.min(MAX_RECALL_CHARS);
        out.push(i);
    }
    out
}

/// The tagged block recalled facts ride in (appended to the user's message).
pub fn render_block(facts: &[&Fact]) -> String {
    let mut out = String::from(
        "<recalled-memory note=\"facts saved in earlier sessions, found by this message's words; they may be outdated, and what the user says now wins\">\n",
    );
    for f in facts {
        out.push_str(&format!(
            "[{} · {} · {}{} · updated {}]\n{}\n",
            f.id,
            f.scope.as_str(),
            f.kind.as_str(),
            f.subject
                .as_ref()
                .map(|s| format!(" · subject {s}"))
                .unwrap_or_default(),
            f.updated.get(..10).unwrap_or(&f.updated),
            truncate(&f.body, MAX_RECALL_CHARS)
        ));
    }
    out.push_str("</recalled-memory>");
    out
}

/// The pinned facts for the standing instructions, within [`MAX_PINNED_CHARS`]; returns the
/// block (empty when none) and the ids left out for lack of room.
pub fn pinned_block(facts: &[Fact], now: &str) -> (String, Vec<String>) {
    let mut pinned: Vec<&Fact> = facts
        .iter()
        .filter(|f| f.pinned && !f.expired(now))
        .collect();
    crate::sort::sort_by(&mut pinned, |a, b| {
        a.created.cmp(&b.created).then(a.id.cmp(&b.id))
    });
    let mut text = String::new();
    let mut left_out = Vec::new();
    let mut chars = 0;
    for f in pinned {
        let len = f.body.chars().count();
        if chars + len > MAX_PINNED_CHARS {
            left_out.push(f.id.clone());
            continue;
        }
        chars += len;
        text.push_str(&format!("[{} · {}] {}\n", f.id, f.scope.as_str(), f.body));
    }
    (text, left_out)
}

#[cfg(test)]
#[path = "recall_table.rs"]
mod recall_table;
