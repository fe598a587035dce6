//! Every child of a session, in memory: id, task, profile, status, answer, usage and (once
//! it ended) its transcript. `list_subagents` and `read_subagent_result` read it; a
//! background child is awaited through it. A daemon restart empties it: a child that was
//! running then is not resumed (its parent's call is reported interrupted), never run twice.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use reasonix_forward::sync::LockExt;
use tokio::sync::watch;

use super::{ChildResult, UsageSum};

/// Where a child stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildStatus {
    /// Waiting for a place among the running children (the limits).
    Queued,
    /// Running.
    Running,
    /// Finished with an answer.
    Completed,
    /// Stopped at its step limit (its answer is partial).
    StepLimit(u32),
    /// Cancelled.
    Cancelled,
    /// Failed (why).
    Failed(String),
}

impl ChildStatus {
    /// A short label.
    pub fn label(&self) -> String {
        match self {
            ChildStatus::Queued => "queued".into(),
            ChildStatus::Running => "running".into(),
            ChildStatus::Completed => "completed".into(),
            ChildStatus::StepLimit(n) => {
                format!("stopped at its limit of {n} model steps (partial answer)")
            }
            ChildStatus::Cancelled => "cancelled".into(),
            ChildStatus::Failed(_) => "failed".into(),
        }
    }

    /// True once the child ended.
    pub fn ended(&self) -> bool {
        !matches!(self, ChildStatus::Queued | ChildStatus::Running)
    }
}

struct Entry {
    description: String,
    profile: String,
    parent_call: String,
    started: Instant,
    status: ChildStatus,
    result: Option<ChildResult>,
    transcript: Option<String>,
    done: watch::Sender<bool>,
    /// Cancels this child alone (set once it runs).
    cancel: Option<tokio_util::sync::CancellationToken>,
}

/// The session's children.
#[derive(Default)]
pub struct Board {
    next: Mutex<u64>,
    children: Mutex<BTreeMap<String, Entry>>,
}

/// One line of `list_subagents`.
#[derive(Debug, Clone)]
pub struct Listing {
    /// Child id.
    pub id: String,
    /// Its task.
    pub description: String,
    /// Its profile.
    pub profile: String,
    /// The parent call that started it.
    pub parent_call: String,
    /// Status.
    pub status: ChildStatus,
    /// Seconds since it was started.
    pub elapsed_secs: u64,
    /// Usage so far (known once it ended).
    pub usage: UsageSum,
}

impl Board {
    /// Add a child (queued) and return its id (`sa-N`, unique in this daemon's life).
    pub fn register(&self, description: &str, profile: &str, parent_call: &str) -> String {
        let n = {
            let mut next = self.next.lock_or_recover();
            *next += 1;
            *next
        };
        let id = format!("sa-{n}");
        let (done, _) = watch::channel(false);
        self.children.lock_or_recover().insert(
            id.clone(),
            Entry {
                description: description.to_string(),
                profile: profile.to_string(),
                parent_call: parent_call.to_string(),
                started: Instant::now(),
                status: ChildStatus::Queued,
                result: None,
                transcript: None,
                done,
                cancel: None,
            },
        );
        id
    }

    /// Set a child's status.
    pub fn set_status(&self, id: &str, status: ChildStatus) {
        if let Some(e) = self.children.lock_or_recover().get_mut(id) {
            e.status = status;
        }
    }

    /// The token that cancels child `id` alone (the user's cancel of one child).
    pub fn set_cancel(&self, id: &str, cancel: tokio_util::sync::CancellationToken) {
        if let Some(e) = self.children.lock_or_recover().get_mut(id) {
            e.cancel = Some(cancel);
        }
    }

    /// Cancel child `id` (and its own children): it stops at once and its parent call gets
    /// its partial answer as cancelled. `Err` names the known children when there is no
    /// such child, or says it already ended.
    pub fn cancel(&self, id: &str) -> Result<(), String> {
        let children = self.children.lock_or_recover();
        let Some(e) = children.get(id) else {
            let known: Vec<&str> = children.keys().map(String::as_str).collect();
            return Err(format!(
                "no subagent {id:?} in this session (known: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ));
        };
        if e.status.ended() {
            return Err(format!(
                "subagent {id} already ended ({})",
                e.status.label()
            ));
        }
        match &e.cancel {
            Some(c) => c.cancel(),
            // Queued: it is cancelled as soon as it would start.
            None => {
                return Err(format!(
                    "subagent {id} is still queued; cancel the turn to stop it"
                ))
            }
        }
        Ok(())
    }

    /// A child ended with `result`.
    pub fn finish(&self, id: &str, result: &ChildResult, transcript: Option<String>) {
        if let Some(e) = self.children.lock_or_recover().get_mut(id) {
            e.status = result.status.clone();
            e.result = Some(result.clone());
            e.transcript = transcript;
            e.done.send_replace(true);
        }
    }

    /// Every child, oldest first.
    pub fn list(&self) -> Vec<Listing> {
        let children = self.children.lock_or_recover();
        let mut out: Vec<Listing> = children
            .iter()
            .map(|(id, e)| Listing {
                id: id.clone(),
                description: e.description.clone(),
                profile: e.profile.clone(),
                parent_call: e.parent_call.clone(),
                status: e.status.clone(),
                elapsed_secs: e.started.elapsed().as_secs(),
                usage: e.result.as_ref().map(|r| r.usage).unwrap_or_default(),
            })
            .collect();
        reasonix_forward::sort::sort_by_key(&mut out, |l| l.id[3..].parse::<u64>().unwrap_or(0));
        out
    }

    /// The result of child `id` (waiting for it to end when `wait`), with its transcript.
    /// `Err` when there is no such child.
    pub async fn result(
        &self,
        id: &str,
        wait: bool,
    ) -> Result<(ChildStatus, Option<ChildResult>, Option<String>), String> {
        let mut rx = {
            let children = self.children.lock_or_recover();
            let Some(e) = children.get(id) else {
                let known: Vec<&str> = children.keys().map(String::as_str).collect();
                return Err(format!(
                    "no subagent {id:?} in this session{}; a daemon restart forgets background subagents (their parent call was reported interrupted)",
                    if known.is_empty() {
                        String::new()
                    } else {
                        format!(" (known: {})", known.join(", "))
                    }
                ));
            };
            e.done.subscribe()
        };
        if wait {
            let _ = rx.wait_for(|d| *d).await;
        }
        let children = self.children.lock_or_recover();
        let e = children
            .get(id)
            .ok_or_else(|| format!("no subagent {id:?} in this session"))?;
        Ok((e.status.clone(), e.result.clone(), e.transcript.clone()))
    }
}
