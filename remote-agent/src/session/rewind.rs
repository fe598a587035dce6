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
                self.rewind_conversation(to_turn)?;
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

    fn rewind_conversation(&self, to_turn: u64) -> Result<(), String> {
        let mut inner = self.lock();
        let _ = inner.journal.sync();
        crate::checkpoint::truncate_journal(&self.journal_path, to_turn)
            .map_err(|e| e.to_string())?;
        let last_seq = inner.journal.last_seq();
        let (mut journal, events) = Journal::open(&self.journal_path).map_err(|e| e.to_string())?;
        // Keep numbering monotonic so clients never mistake new events for ones they saw.
        journal.continue_after(last_seq);
        inner.messages = agent::messages_from_events(&events);
        inner.turn = events.iter().map(|e| e.turn).max().unwrap_or(0);
        inner.events = events;
        inner.journal = journal;
        inner.state = TurnState::Idle;
        inner.cancel = None;
        Ok(())
    }
}
