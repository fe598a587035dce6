//! Per-turn checkpoints and rewind of a session (files, conversation or both).

use super::*;

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
    ) -> Result<(String, Vec<String>), String> {
        use reasonix_forward::proto::RewindScope;
        {
            let mut inner = self.lock();
            if !matches!(inner.state, TurnState::Idle | TurnState::Paused) {
                return Err("a turn is running; cancel it before rewinding".into());
            }
            if to_turn == 0 || to_turn > inner.turn {
                return Err(format!(
                    "no turn {to_turn} in this session (turns 1..={})",
                    inner.turn
                ));
            }
            if !dry_run && !inner.seen_requests.insert(request_id.to_string()) {
                return Ok(("duplicate rewind request ignored".into(), Vec::new()));
            }
        }
        let mut summary = Vec::new();
        let mut paths = Vec::new();
        if matches!(scope, RewindScope::Code | RewindScope::Both) {
            let Some(store) = self.runtime.checkpoints.clone() else {
                return Err("checkpoints are unavailable on this host (see the daemon log)".into());
            };
            let id = self.id.clone();
            let report = tokio::task::spawn_blocking(move || store.rewind(&id, to_turn, dry_run))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
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

    async fn rewind_conversation(&self, to_turn: u64) -> Result<(), String> {
        // The cut runs on the journal writer thread, ordered after every event queued before
        // it and once they are durable (a durability point), so no file I/O happens here.
        let (tx, rx) = oneshot::channel();
        let boundary = {
            let inner = self.lock();
            let path = self.journal_path.clone();
            inner.journal.after_flush(move |flushed| {
                let result = flushed.map_err(|e| e.to_string()).and_then(|()| {
                    crate::checkpoint::truncate_journal(&path, to_turn)
                        .map_err(|e| e.to_string())?;
                    crate::journal::read_events(&path)
                        .map(|(events, _)| events)
                        .map_err(|e| e.to_string())
                });
                let _ = tx.send(result);
            });
            inner.journal.last_seq()
        };
        let mut events = rx
            .await
            .map_err(|_| "the journal writer stopped during the rewind".to_string())??;
        let mut inner = self.lock();
        // Events queued after the cut was ordered are in the file after it; keep them in
        // memory too. Numbering stays monotonic so clients never mistake new events for ones
        // they saw.
        events.extend(inner.events.iter().filter(|e| e.seq > boundary).cloned());
        inner.journal.continue_after(boundary);
        inner.messages = agent::messages_from_events(&events);
        inner.turn = events.iter().map(|e| e.turn).max().unwrap_or(0);
        inner.events = events;
        inner.state = TurnState::Idle;
        inner.cancel = None;
        Ok(())
    }
}
