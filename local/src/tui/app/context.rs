//! `/compact [focus]` and `/context`: the session's context window as the user sees it.

use super::*;

impl App {
    /// `/compact [focus]`: ask the host to compact now.
    pub(super) fn compact_command(&mut self, focus: &str) -> Vec<Action> {
        if self.role == Some(ClientRole::Spectator) {
            self.set_hint("read-only spectator: /takeover to drive this session");
            return Vec::new();
        }
        if self.session.is_none() {
            self.set_hint("no session yet: nothing to compact");
            return Vec::new();
        }
        if self.turn_busy() {
            self.set_hint("a turn is running: /compact after it ends (or Ctrl-C to cancel it)");
            return Vec::new();
        }
        self.transcript.notice(
            if focus.is_empty() {
                "compacting the context…".to_string()
            } else {
                format!("compacting the context, keeping above all: {focus}")
            },
            Level::Info,
        );
        vec![Action::Compact {
            request_id: rid("compact"),
            focus: (!focus.is_empty()).then(|| focus.to_string()),
        }]
    }

    /// `/context`: open the overlay and ask the host for the split.
    pub(super) fn context_command(&mut self) -> Vec<Action> {
        self.overlay = Some(Overlay::Context {
            report: None,
            error: None,
        });
        if self.session.is_none() {
            if let Some(Overlay::Context { error, .. }) = &mut self.overlay {
                *error = Some("no session is open yet".into());
            }
            return Vec::new();
        }
        vec![Action::ContextReport]
    }

    /// The host's answer to `/context`.
    pub(super) fn context_report(&mut self, r: reasonix_forward::proto::ContextReport) {
        if let Some(Overlay::Context { report, error }) = &mut self.overlay {
            *report = Some(r);
            *error = None;
        }
    }

    /// The context window of the model in use, when configured (0 counts as none).
    pub(crate) fn context_window(&self) -> Option<u64> {
        let label = self.model.as_ref().or(self.last_model.as_ref())?;
        let w = self
            .settings
            .context_windows
            .get(label)
            .or_else(|| {
                self.last_model
                    .as_ref()
                    .and_then(|m| self.settings.context_windows.get(m))
            })
            .copied()?;
        (w > 0).then_some(w)
    }

    /// Context used, in per cent of the window, when both are known.
    pub(crate) fn context_pct(&self) -> Option<f64> {
        let w = self.context_window()?;
        Some(self.totals.context? as f64 * 100.0 / w as f64)
    }
}
