//! The pure core of delegation scheduling: a fleet's dependency graph (validated before
//! anything runs: duplicate ids, unknown dependencies and cycles are refused, the cycle named),
//! the order items become ready in, and the admission rule every child of one conversation
//! obeys (at most `max_children` at once, at most `max_writers` writers at once, never two
//! writers whose write paths overlap). No I/O; the glue in `tools/` drives it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use reasonix_forward::sync::LockExt;

use super::paths::overlap;

/// Delegation limits (`[agent] max_subagent_depth`, `max_subagents`, `max_subagent_writers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How deep children may nest (the main conversation is depth 0).
    pub max_depth: u32,
    /// Children of one conversation running at once.
    pub max_children: usize,
    /// Writing children of one conversation running at once.
    pub max_writers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 2,
            max_children: 6,
            max_writers: 3,
        }
    }
}

/// What a child claims while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// True for a child that may write.
    pub writer: bool,
    /// Its canonical write paths; `None` for a writer of the whole workspace.
    pub write_paths: Option<Vec<PathBuf>>,
}

/// The children of one conversation running now.
#[derive(Debug, Default)]
pub struct Admission {
    running: HashMap<u64, Claim>,
    next: u64,
}

impl Admission {
    /// Admit `claim` if the limits allow it now: returns the lease to [`release`](Self::release).
    pub fn try_admit(&mut self, claim: &Claim, limits: &Limits) -> Option<u64> {
        if self.running.len() >= limits.max_children.max(1) {
            return None;
        }
        if claim.writer {
            let writers: Vec<&Claim> = self.running.values().filter(|c| c.writer).collect();
            if writers.len() >= limits.max_writers.max(1) {
                return None;
            }
            if writers
                .iter()
                .any(|c| overlap(c.write_paths.as_deref(), claim.write_paths.as_deref()))
            {
                return None;
            }
        }
        self.next += 1;
        self.running.insert(self.next, claim.clone());
        Some(self.next)
    }

    /// The child of `lease` finished.
    pub fn release(&mut self, lease: u64) {
        self.running.remove(&lease);
    }

    /// Children running now (writers among them).
    pub fn counts(&self) -> (usize, usize) {
        (
            self.running.len(),
            self.running.values().filter(|c| c.writer).count(),
        )
    }
}

/// [`Admission`] for async children: [`Slots::acquire`] waits until the claim fits.
#[derive(Debug, Default)]
pub struct Slots {
    state: Mutex<Admission>,
    changed: tokio::sync::Notify,
}

/// A child's place among the running ones; released when dropped.
pub struct Slot<'a> {
    slots: &'a Slots,
    lease: u64,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.slots.state.lock_or_recover().release(self.lease);
        self.slots.changed.notify_waiters();
    }
}

impl Slots {
    /// Wait until `claim` fits the limits, then hold its place.
    pub async fn acquire(&self, claim: &Claim, limits: &Limits) -> Slot<'_> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(lease) = self.state.lock_or_recover().try_admit(claim, limits) {
                return Slot { slots: self, lease };
            }
            notified.await;
        }
    }

    /// Children running now (writers among them).
    pub fn counts(&self) -> (usize, usize) {
        self.state.lock_or_recover().counts()
    }
}

/// Where an item of a fleet stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemState {
    /// Dependencies not finished yet.
    Waiting,
    /// Started.
    Running,
    /// Finished with an answer.
    Done,
    /// Finished with an error.
    Failed,
    /// Never started (the text says why).
    Skipped(String),
}

/// A validated fleet: which items are ready, as the others finish.
#[derive(Debug)]
pub struct Schedule {
    ids: Vec<String>,
    deps: Vec<Vec<usize>>,
    state: Vec<ItemState>,
    fail_fast: bool,
}

impl Schedule {
    /// Validate `items` (`(id, depends_on)`): every id unique and non-empty, every dependency
    /// a known id, no cycle. `Err` says which rule broke, naming the ids (a cycle as
    /// `a -> b -> a`), before anything runs.
    pub fn new(items: &[(String, Vec<String>)], fail_fast: bool) -> Result<Schedule, String> {
        if items.is_empty() {
            return Err("the fleet has no items".into());
        }
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, (id, _)) in items.iter().enumerate() {
            if id.trim().is_empty() {
                return Err(format!("item {} has an empty id", i + 1));
            }
            if index.insert(id.as_str(), i).is_some() {
                return Err(format!("item id {id:?} is used twice; ids must be unique"));
            }
        }
        let mut deps = Vec::with_capacity(items.len());
        for (id, on) in items {
            let mut d = Vec::new();
            for dep in on {
                match index.get(dep.as_str()) {
                    Some(&j) => {
                        if !d.contains(&j) {
                            d.push(j)
                        }
                    }
                    None => {
                        let mut known: Vec<&str> = index.keys().copied().collect();
                        known.sort_unstable();
                        return Err(format!(
                            "item {id:?} depends on unknown id {dep:?}; the fleet's ids are: {}",
                            known.join(", ")
                        ));
                    }
                }
            }
            deps.push(d);
        }
        if let Some(cycle) = find_cycle(&deps) {
            let names: Vec<&str> = cycle.iter().map(|&i| items[i].0.as_str()).collect();
            return Err(format!(
                "the fleet's dependencies form a cycle: {}; nothing was run",
                names.join(" -> ")
            ));
        }
        Ok(Schedule {
            ids: items.iter().map(|(id, _)| id.clone()).collect(),
            deps,
            state: vec![ItemState::Waiting; items.len()],
            fail_fast,
        })
    }

    /// The items that may start now (all dependencies done), marked running. Items whose
    /// dependency failed or was skipped are skipped, naming it.
    pub fn ready(&mut self) -> Vec<usize> {
        loop {
            let mut changed = false;
            for i in 0..self.state.len() {
                if self.state[i] != ItemState::Waiting {
                    continue;
                }
                if let Some(&bad) = self.deps[i]
                    .iter()
                    .find(|&&j| matches!(self.state[j], ItemState::Failed | ItemState::Skipped(_)))
                {
                    self.state[i] = ItemState::Skipped(format!(
                        "not run: its dependency {:?} did not finish",
                        self.ids[bad]
                    ));
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut out = Vec::new();
        for i in 0..self.state.len() {
            if self.state[i] == ItemState::Waiting
                && self.deps[i]
                    .iter()
                    .all(|&j| self.state[j] == ItemState::Done)
            {
                self.state[i] = ItemState::Running;
                out.push(i);
            }
        }
        out
    }

    /// Item `i` finished (`ok`: with an answer). With `fail_fast`, a failure skips every item
    /// not started yet.
    pub fn finish(&mut self, i: usize, ok: bool) {
        self.state[i] = if ok {
            ItemState::Done
        } else {
            ItemState::Failed
        };
        if !ok && self.fail_fast {
            let why = format!(
                "not run: item {:?} failed and fail_fast is set",
                self.ids[i]
            );
            for s in &mut self.state {
                if *s == ItemState::Waiting {
                    *s = ItemState::Skipped(why.clone());
                }
            }
        }
    }

    /// True when no item runs and none can start any more.
    pub fn over(&self) -> bool {
        !self
            .state
            .iter()
            .any(|s| matches!(s, ItemState::Waiting | ItemState::Running))
    }

    /// Each item's state.
    pub fn states(&self) -> &[ItemState] {
        &self.state
    }

    /// The item ids in order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }
}

/// A cycle of `deps` as the item indices along it, the first repeated at the end.
fn find_cycle(deps: &[Vec<usize>]) -> Option<Vec<usize>> {
    // 0 unvisited, 1 on the stack, 2 done.
    let mut color = vec![0u8; deps.len()];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for start in 0..deps.len() {
        if color[start] != 0 {
            continue;
        }
        color[start] = 1;
        stack.push((start, 0));
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&dep) = deps[node].get(*next) {
                *next += 1;
                match color[dep] {
                    0 => {
                        color[dep] = 1;
                        stack.push((dep, 0));
                    }
                    1 => {
                        let from = stack.iter().position(|&(n, _)| n == dep).unwrap_or(0);
                        let mut cycle: Vec<usize> = stack[from..].iter().map(|&(n, _)| n).collect();
                        cycle.push(dep);
                        return Some(cycle);
                    }
                    _ => {}
                }
            } else {
                color[node] = 2;
                stack.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn items(spec: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        spec.iter()
            .map(|(id, d)| (id.to_string(), d.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn cycles_unknown_ids_and_duplicates_are_refused_by_name() {
        let err = Schedule::new(
            &items(&[("a", &["c"]), ("b", &["a"]), ("c", &["b"])]),
            false,
        )
        .unwrap_err();
        assert!(err.contains("cycle"), "{err}");
        assert!(
            err.contains("a -> c -> b -> a"),
            "the cycle is named in dependency order: {err}"
        );
        let err = Schedule::new(&items(&[("a", &["a"])]), false).unwrap_err();
        assert!(err.contains("a -> a"), "{err}");
        let err = Schedule::new(&items(&[("a", &[]), ("b", &["zz"])]), false).unwrap_err();
        assert!(
            err.contains("unknown id \"zz\"") && err.contains("a, b"),
            "{err}"
        );
        let err = Schedule::new(&items(&[("a", &[]), ("a", &[])]), false).unwrap_err();
        assert!(err.contains("used twice"), "{err}");
        assert!(Schedule::new(&[], false).is_err());
    }

    #[test]
    fn items_start_when_dependencies_finish_and_failures_skip_dependents() {
        let mut s = Schedule::new(
            &items(&[
                ("a", &[]),
                ("b", &["a"]),
                ("c", &["a"]),
                ("d", &["b", "c"]),
                ("e", &[]),
            ]),
            false,
        )
        .unwrap();
        assert_eq!(s.ready(), vec![0, 4]);
        assert_eq!(s.ready(), Vec::<usize>::new());
        s.finish(0, true);
        assert_eq!(s.ready(), vec![1, 2]);
        s.finish(1, false);
        s.finish(2, true);
        assert_eq!(s.ready(), Vec::<usize>::new());
        assert!(matches!(&s.states()[3], ItemState::Skipped(w) if w.contains("\"b\"")));
        assert!(!s.over(), "e still runs");
        s.finish(4, true);
        assert!(s.over());
    }

    #[test]
    fn fail_fast_skips_everything_not_started() {
        let mut s = Schedule::new(&items(&[("a", &[]), ("b", &["a"]), ("c", &[])]), true).unwrap();
        assert_eq!(s.ready(), vec![0, 2]);
        s.finish(2, false);
        assert!(matches!(&s.states()[1], ItemState::Skipped(w) if w.contains("fail_fast")));
        s.finish(0, true);
        assert_eq!(s.ready(), Vec::<usize>::new());
        assert!(s.over());
    }

    #[test]
    fn admission_bounds_children_writers_and_overlapping_write_paths() {
        let limits = Limits::default();
        let mut a = Admission::default();
        let w = |p: &str| Claim {
            writer: true,
            write_paths: Some(vec![PathBuf::from(p)]),
        };
        let r = Claim {
            writer: false,
            write_paths: None,
        };
        let l1 = a.try_admit(&w("/w/src"), &limits).unwrap();
        assert!(a.try_admit(&w("/w/src/x.rs"), &limits).is_none(), "overlap");
        assert!(a.try_admit(&w("/w/docs"), &limits).is_some());
        assert!(a.try_admit(&w("/w/tests"), &limits).is_some());
        assert!(a.try_admit(&w("/w/bench"), &limits).is_none(), "3 writers");
        assert!(a
            .try_admit(
                &Claim {
                    writer: true,
                    write_paths: None
                },
                &limits
            )
            .is_none());
        for _ in 0..3 {
            assert!(a.try_admit(&r, &limits).is_some());
        }
        assert!(a.try_admit(&r, &limits).is_none(), "6 children");
        assert_eq!(a.counts(), (6, 3));
        a.release(l1);
        assert!(a.try_admit(&w("/w/src/x.rs"), &limits).is_some());
    }

    /// A 64-item fleet run by the schedule and the admission rule together, in a simulated
    /// clock: every item starts after its dependencies finished, and never more than the
    /// limits run at once.
    #[test]
    fn a_64_item_fleet_runs_in_topological_order_within_the_limits() {
        let n: usize = 64;
        let spec: Vec<(String, Vec<String>)> = (0..n)
            .map(|i| {
                let deps = [i / 2, i / 3, i.saturating_sub(5)]
                    .into_iter()
                    .filter(|&j| j < i)
                    .map(|j| format!("i{j}"))
                    .collect();
                (format!("i{i}"), deps)
            })
            .collect();
        let limits = Limits::default();
        let mut s = Schedule::new(&spec, false).unwrap();
        let mut adm = Admission::default();
        let mut waiting: Vec<usize> = Vec::new();
        let mut running: Vec<(usize, u64, u32)> = Vec::new();
        let mut finished_at = vec![None; n];
        let mut started_at = vec![None; n];
        let mut clock = 0u32;
        while !s.over() {
            waiting.extend(s.ready());
            waiting.retain(|&i| {
                let claim = Claim {
                    writer: i % 2 == 0,
                    write_paths: Some(vec![PathBuf::from(format!("/w/{}", i % 5))]),
                };
                match adm.try_admit(&claim, &limits) {
                    Some(lease) => {
                        started_at[i] = Some(clock);
                        running.push((i, lease, clock + 1 + (i as u32 % 3)));
                        false
                    }
                    None => true,
                }
            });
            let (c, w) = adm.counts();
            assert!(c <= 6 && w <= 3, "{c} children, {w} writers at once");
            clock += 1;
            running.retain(|&(i, lease, end)| {
                if end <= clock {
                    adm.release(lease);
                    s.finish(i, true);
                    finished_at[i] = Some(clock);
                    false
                } else {
                    true
                }
            });
        }
        for (i, (_, deps)) in spec.iter().enumerate() {
            let start = started_at[i].unwrap();
            for d in deps {
                let j: usize = d[1..].parse().unwrap();
                assert!(
                    finished_at[j].unwrap() <= start,
                    "i{i} started before {d} finished"
                );
            }
        }
    }
}
