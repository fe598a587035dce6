//! Per-turn checkpoints and rewind of a session (files, conversation or both).

use super::*;
use crate::checkpoint::CheckpointError;

/// Why a rewind was refused or failed. Each goes on the wire with the code
/// [`ErrorCode::Rewind`](reasonix_forward::proto::ErrorCode::Rewind) and its text as the
/// message.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    /// A turn is running; only an idle or paused session is rewound.
    #[error("a turn is running; cancel it before rewinding")]
    TurnRunning,
    /// The turn to rewind to is not in the session.
    #[error("no turn {to_turn} in this session (turns 1..={last})")]
    NoSuchTurn {
        /// The turn asked for.
        to_turn: u64,
        /// The session's last turn.
        last: u64,
    },
    /// The host has no checkpoint store, so files cannot be rewound.
    #[error("checkpoints are unavailable on this host (see the daemon log)")]
    NoCheckpoints,
    /// Restoring the files from the checkpoint failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The blocking task restoring the files died.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
    /// The journal could not be flushed or read back around the cut.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Cutting the conversation out of the journal failed.
    #[error(transparent)]
    JournalCut(CheckpointError),
    /// The journal writer stopped before the cut ran.
    #[error("the journal writer stopped during the rewind")]
    WriterStopped,
}

impl Session {
    /// Take the checkpoint of the current turn (before its first mutation).
    pub(super) async fn checkpoint_turn(&self) {
        let Some(store) = self.runtime.checkpoints.clone() else {
            return;
        };
        let turn = self.lock().turn;
        let id = self.id.clone();
        let taken = tokio::task::spawn_blocking(move || store.begin_turn(&id, turn)).await;
        match taken {
            Ok(Ok(info)) => {
                let mut notes = info.notes.clone();
                notes.extend(
                    info.not_covered
                        .iter()
                        .map(|n| format!("{}: {}", n.path, n.reason)),
                );
                self.record(EventKind::Checkpoint {
                    id: info.id,
                    paths: notes,
                });
            }
            Ok(Err(e)) => {
                self.record(EventKind::Notice {
                    text: format!(
                        "checkpoint failed ({e}); changes made in this turn cannot be rewound"
                    ),
                });
            }
            Err(e) => tracing::error!("checkpoint task failed: {e}"),
        }
    }

    /// Rewind the session to just before turn `to_turn`: files (`code`), the conversation,
    /// or both. Refused while a turn runs. Deduplicated by `request_id`.
    pub async fn rewind(
        &self,
        request_id: &str,
        to_turn: u64,
        scope: reasonix_forward::proto::RewindScope,
        dry_run: bool,
    ) -> Result<(String, Vec<String>), RewindError> {
        use reasonix_forward::proto::RewindScope;
        {
            let mut inner = self.lock();
            if !matches!(inner.state, TurnState::Idle | TurnState::Paused) {
                return Err(RewindError::TurnRunning);
            }
            if to_turn == 0 || to_turn > inner.turn {
                return Err(RewindError::NoSuchTurn {
                    to_turn,
                    last: inner.turn,
                });
            }
            if !dry_run && !inner.seen_requests.insert(request_id.to_string()) {
                return Ok(("duplicate rewind request ignored".into(), Vec::new()));
            }
        }
        let mut summary = Vec::new();
        let mut paths = Vec::new();
        if matches!(scope, RewindScope::Code | RewindScope::Both) {
            let Some(store) = self.runtime.checkpoints.clone() else {
                return Err(RewindError::NoCheckpoints);
            };
            let id = self.id.clone();
            let report =
                tokio::task::spawn_blocking(move || store.rewind(&id, to_turn, dry_run)).await??;
            summary.push(report.summary());
            paths = report.paths();
        }
        if matches!(scope, RewindScope::Conversation | RewindScope::Both) {
            if dry_run {
                summary.push(format!(
                    "dry run: the conversation would be cut back to before turn {to_turn}"
                ));
            } else {
                self.rewind_conversation(to_turn).await?;
                summary.push(format!(
                    "conversation rewound to before turn {to_turn} (the removed part is archived next to the journal)"
                ));
            }
        }
        let text = summary.join("; ");
        if !dry_run {
            self.record(EventKind::Notice { text: text.clone() });
        }
        Ok((text, paths))
    }

    async fn rewind_conversation(&self, to_turn: u64) -> Result<(), RewindError> {
        // The cut runs on the journal writer thread, ordered after every event queued before
        // it and once they are durable (a durability point), so no file I/O happens here.
        let (tx, rx) = oneshot::channel();
        let boundary = {
            let inner = self.lock();
            let path = self.journal_path.clone();
            inner.journal.after_flush(move |flushed| {
                let result = flushed.map_err(RewindError::from).and_then(|()| {
                    crate::checkpoint::truncate_journal(&path, to_turn)
                        .map_err(RewindError::JournalCut)?;
                    Ok(crate::journal::read_events(&path).map(|(events, _)| events)?)
                });
                let _ = tx.send(result);
            });
            inner.journal.last_seq()
        };
        let mut events = rx.await.map_err(|_| RewindError::WriterStopped)??;
        // Lock order: the conversation before the session.
        let mut conv = self.main.lock_or_recover();
        let mut inner = self.lock();
        // Events queued after the cut was ordered are in the file after it; keep them in
        // memory too. Numbering stays monotonic so clients never mistake new events for ones
        // they saw.
        events.extend(inner.events.iter().filter(|e| e.seq > boundary).cloned());
        inner.journal.continue_after(boundary);
        conv.messages = agent::messages_from_events(&events);
        inner.turn = events.iter().map(|e| e.turn).max().unwrap_or(0);
        // A rewind to before an approval brings the unapproved plan back.
        inner.plan = crate::plan::PlanState::from_events(&events);
        inner.goal = crate::goal::GoalState::from_events(&events);
        inner.events = events;
        inner.state = TurnState::Idle;
        inner.cancel = None;
        drop(inner);
        drop(conv);
        // The planner's conversation is rebuilt from the kept events at its next turn.
        *self.planner.lock_or_recover() = None;
        Ok(())
    }
}
