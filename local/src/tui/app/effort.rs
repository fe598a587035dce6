//! `/effort`: how hard the model reasons. The level is a request parameter of the session
//! (re-opening the session hands the daemon the new settings, as `/model` does), so a change
//! takes effect from the next model request and never touches the conversation.

use reasonix_forward::proto::ReasoningEffort;

use super::*;
use crate::config::effort_list;

/// The effort levels one model takes and the one it uses unless told otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelEfforts {
    /// Levels the model takes, lowest first.
    pub supported: Vec<ReasoningEffort>,
    /// Level used when the user chose none (`None`: the provider decides).
    pub default: Option<ReasoningEffort>,
}

impl App {
    /// The levels of the session's model (`None` when the label is not one the config knows:
    /// the gateway checks it then).
    pub(super) fn model_efforts(&self) -> Option<&ModelEfforts> {
        self.settings
            .efforts
            .get(self.model.as_deref().unwrap_or(""))
    }

    /// The label `/effort` messages name.
    fn model_label(&self) -> String {
        self.model
            .clone()
            .unwrap_or_else(|| "the default model".into())
    }

    /// `/effort [low|medium|high|max|default]`.
    pub(super) fn effort_command(&mut self, arg: &str) -> Vec<Action> {
        let levels = self.model_efforts().cloned();
        if arg.is_empty() {
            let now = self.effort.map_or("the provider's default", |e| e.as_str());
            let text = match &levels {
                Some(l) => format!(
                    "effort: {now}; {} takes {} (default: {})",
                    self.model_label(),
                    effort_list(&l.supported),
                    l.default.map_or("the provider's", |e| e.as_str())
                ),
                None => format!("effort: {now}"),
            };
            self.transcript.notice(
                format!("{text}. Usage: /effort low|medium|high|max|default"),
                Level::Info,
            );
            return Vec::new();
        }
        let choice = if arg.eq_ignore_ascii_case("default") {
            None
        } else {
            match ReasoningEffort::parse(arg) {
                Some(e) => Some(e),
                None => {
                    self.set_hint(format!(
                        "/effort: `{arg}` is not a level; use low, medium, high, max or default"
                    ));
                    return Vec::new();
                }
            }
        };
        if let (Some(e), Some(l)) = (choice, &levels) {
            if !l.supported.contains(&e) {
                self.transcript.notice(
                    format!(
                        "/effort {e}: {} does not take that level; it supports: {}",
                        self.model_label(),
                        effort_list(&l.supported)
                    ),
                    Level::Warn,
                );
                return Vec::new();
            }
        }
        self.effort_choice = choice;
        self.effort = choice.or_else(|| levels.and_then(|l| l.default));
        self.transcript.notice(
            format!(
                "effort: {} (from the next request; the conversation is unchanged)",
                self.effort.map_or("the provider's default", |e| e.as_str())
            ),
            Level::Info,
        );
        self.reopen_with_settings()
    }

    /// After a model switch: keep the chosen level where the new model takes it, else fall
    /// back to its default and say so.
    pub(super) fn effort_after_model_switch(&mut self) {
        let Some(levels) = self.model_efforts().cloned() else {
            self.effort = self.effort_choice;
            return;
        };
        match self.effort_choice {
            Some(e) if !levels.supported.contains(&e) => {
                self.effort = levels.default;
                self.transcript.notice(
                    format!(
                        "effort {e} is not a level of {} (it supports: {}); using {}",
                        self.model_label(),
                        effort_list(&levels.supported),
                        levels
                            .default
                            .map_or("the provider's default", |d| d.as_str())
                    ),
                    Level::Warn,
                );
            }
            Some(e) => self.effort = Some(e),
            None => self.effort = levels.default,
        }
    }

    /// Re-open the open session with the current model and effort: the daemon takes the new
    /// settings from the next request on.
    pub(super) fn reopen_with_settings(&mut self) -> Vec<Action> {
        match &self.session {
            Some(s) => vec![Action::OpenSession(OpenParams {
                session: Some(s.clone()),
                new: false,
                since: self.last_seq,
                takeover: false,
                model: self.model.clone(),
                effort: self.effort,
            })],
            None => Vec::new(),
        }
    }
}
