//! Stable sorting with one compiled sort routine for every element type and order.
//!
//! `slice::sort_by` is generic over the element type and the comparison: each call site with
//! its own closure compiles a copy of the standard library's sort (about 4 KB at the host's
//! `opt-level = "z"`), and the static host binary had 46 of them (issue 17's size goal). Here
//! the indices of the elements are sorted by one non-generic function through a `dyn`
//! comparison (ties broken by index, so the result is what a stable sort gives), and the
//! elements are then moved into that order by swaps, also through a `dyn` callback. What
//! stays generic per call site is two small closures. For the host's lists (directory
//! entries, search hits, sessions: thousands at most) the indirection costs nothing
//! measurable.

use std::cmp::Ordering;

/// Sorts `v` stably by `cmp` (like [`slice::sort_by`]).
pub fn sort_by<T>(v: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    let order = {
        let items: &[T] = v;
        sorted_indices(items.len(), &mut |a, b| cmp(&items[a], &items[b]))
    };
    permute(order, &mut |a, b| v.swap(a, b));
}

/// Sorts `v` stably by the key `f` gives (like [`slice::sort_by_key`]).
pub fn sort_by_key<T, K: Ord>(v: &mut [T], mut f: impl FnMut(&T) -> K) {
    sort_by(v, |a, b| f(a).cmp(&f(b)));
}

/// Sorts `v` (like [`slice::sort`]).
pub fn sort<T: Ord>(v: &mut [T]) {
    sort_by(v, T::cmp);
}

/// The indices `0..n` in the order `cmp` gives, equal elements in their original order.
fn sorted_indices(n: usize, cmp: &mut dyn FnMut(usize, usize) -> Ordering) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_unstable_by(|&a, &b| cmp(a, b).then(a.cmp(&b)));
    idx
}

/// Moves the elements so that position `i` holds what was at `order[i]`, by swaps: each
/// cycle of the permutation is followed once.
fn permute(order: Vec<usize>, swap: &mut dyn FnMut(usize, usize)) {
    let mut done = vec![false; order.len()];
    for start in 0..order.len() {
        if done[start] {
            continue;
        }
        let mut j = start;
        loop {
            done[j] = true;
            let k = order[j];
            if k == start {
                break;
            }
            swap(j, k);
            j = k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the standard library's stable sort, on every permutation-ish input of a
    /// small generator: same order, ties kept in their original order.
    #[test]
    fn sorts_like_the_standard_stable_sort() {
        let mut seed = 7u64;
        for len in 0..60 {
            for _ in 0..20 {
                let v: Vec<(u8, usize)> = (0..len)
                    .map(|i| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        (((seed >> 33) % 5) as u8, i)
                    })
                    .collect();
                let mut ours = v.clone();
                sort_by(&mut ours, |a, b| a.0.cmp(&b.0));
                let mut std = v.clone();
                std.sort_by_key(|a| a.0);
                assert_eq!(ours, std);
                let mut ours = v.clone();
                sort_by_key(&mut ours, |x| std::cmp::Reverse(x.0));
                let mut std = v.clone();
                std.sort_by_key(|x| std::cmp::Reverse(x.0));
                assert_eq!(ours, std);
                let mut ours = v.clone();
                sort(&mut ours);
                let mut std = v;
                std.sort();
                assert_eq!(ours, std);
            }
        }
        let mut words = vec![
            "pear".to_string(),
            "apple".into(),
            "fig".into(),
            "apple".into(),
        ];
        sort(&mut words);
        assert_eq!(words, ["apple", "apple", "fig", "pear"]);
    }
}
