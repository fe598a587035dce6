//! [`TuiPrompter`]: the bootstrap [`Prompter`] of the TUI. Questions become modals; the SSH
//! code awaits the user's answer through a oneshot channel, so it never touches the terminal.

use async_trait::async_trait;
use reasonix_bootstrap::{
    HostKeyAnswer, HostKeyQuestion, KbdRound, Prompter, SecretPrompt, Stage, UpgradeAnswer,
    UpgradeQuestion,
};
use tokio::sync::{mpsc, oneshot};
use zeroize::Zeroizing;

use super::app::{AppEvent, PromptRequest};

/// Forwards bootstrap questions and progress to a running TUI. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TuiPrompter {
    tx: mpsc::UnboundedSender<AppEvent>,
}

/// The receiving end of a [`TuiPrompter`]; hand it to [`super::run_tui`] through
/// [`super::TuiOptions::prompts`].
#[derive(Debug)]
pub struct TuiPrompts {
    pub(crate) rx: mpsc::UnboundedReceiver<AppEvent>,
}

/// A connected prompter/receiver pair. Create it before the SSH connector, give the prompter
/// to the connector and the receiver to the TUI.
pub fn prompter_channel() -> (TuiPrompter, TuiPrompts) {
    let (tx, rx) = mpsc::unbounded_channel();
    (TuiPrompter { tx }, TuiPrompts { rx })
}

impl TuiPrompts {
    /// The next question or progress event (for a UI loop other than [`super::run_tui`]).
    pub async fn recv(&mut self) -> Option<AppEvent> {
        self.rx.recv().await
    }
}

impl TuiPrompter {
    /// Show a host key that the connection refused (changed or revoked). The modal explains
    /// and offers no way to accept.
    pub fn show_host_key_refusal(&self, question: HostKeyQuestion) {
        let _ = self.tx.send(AppEvent::HostKeyRefused(question));
    }
}

#[async_trait]
impl Prompter for TuiPrompter {
    async fn host_key(&self, question: &HostKeyQuestion) -> HostKeyAnswer {
        let (reply, rx) = oneshot::channel();
        let req = PromptRequest::HostKey {
            question: question.clone(),
            reply,
        };
        if self.tx.send(AppEvent::Prompt(req)).is_err() {
            return HostKeyAnswer::Reject;
        }
        // A closed UI (or a dropped modal) is a refusal, never an acceptance.
        rx.await.unwrap_or(HostKeyAnswer::Reject)
    }

    async fn secret(&self, prompt: &SecretPrompt) -> Option<Zeroizing<String>> {
        let (reply, rx) = oneshot::channel();
        let req = PromptRequest::Secret {
            prompt: prompt.clone(),
            reply,
        };
        self.tx.send(AppEvent::Prompt(req)).ok()?;
        rx.await.ok().flatten()
    }

    async fn keyboard_interactive(&self, round: &KbdRound) -> Option<Vec<Zeroizing<String>>> {
        if round.prompts.is_empty() {
            // Nothing to ask (PAM sends empty rounds); don't flash a modal.
            return Some(Vec::new());
        }
        let (reply, rx) = oneshot::channel();
        let req = PromptRequest::Keyboard {
            round: round.clone(),
            reply,
        };
        self.tx.send(AppEvent::Prompt(req)).ok()?;
        rx.await.ok().flatten()
    }

    async fn upgrade(&self, question: &UpgradeQuestion) -> UpgradeAnswer {
        let (reply, rx) = oneshot::channel();
        let req = PromptRequest::Upgrade {
            question: question.clone(),
            reply,
        };
        if self.tx.send(AppEvent::Prompt(req)).is_err() {
            return UpgradeAnswer::Refuse;
        }
        // A closed UI never upgrades on its own.
        rx.await.unwrap_or(UpgradeAnswer::Refuse)
    }

    fn banner(&self, text: &str) {
        let _ = self.tx.send(AppEvent::Banner(text.to_string()));
    }

    fn progress(&self, stage: Stage, detail: &str, amount: Option<(u64, u64)>) {
        let _ = self.tx.send(AppEvent::Progress {
            stage,
            detail: detail.to_string(),
            amount,
        });
    }
}
