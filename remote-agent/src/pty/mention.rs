//! `@term:N` in a prompt: the current screen of terminal N, attached to the user's turn.
//!
//! Only the user's own prompt text is scanned (the agent never reads a terminal by
//! itself); the screen comes from the daemon's `vt100` model, so what is attached is what
//! the user sees in that terminal now, not its raw byte history.

use reasonix_forward::proto::Attachment;
use reasonix_forward::sync::LockExt;

use super::Terminals;

/// Prefix of the attachment path that marks a terminal screen (`term:N`).
pub const TERM_PREFIX: &str = "term:";

/// Most terminals attached to one prompt.
const MAX_TERMINALS: usize = 4;

impl super::Terminal {
    /// The visible screen as text, without the blank rows at the bottom.
    pub fn screen_text(&self) -> String {
        let out = self.output.lock_or_recover();
        let text = out.screen.screen().contents();
        text.trim_end_matches(['\n', ' ']).to_string()
    }
}

/// Terminals mentioned as `@term:N` in `text` that exist in this workspace, with their
/// current screens. Mentions of unknown terminals are left as plain text.
pub fn resolve(terminals: &Terminals, text: &str) -> Vec<Attachment> {
    let mut out: Vec<Attachment> = Vec::new();
    for word in text.split_whitespace() {
        let Some(rest) = word
            .strip_prefix('@')
            .and_then(|w| w.strip_prefix(TERM_PREFIX))
        else {
            continue;
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Ok(id) = digits.parse::<u64>() else {
            continue;
        };
        let path = format!("{TERM_PREFIX}{id}");
        if out.iter().any(|a| a.path == path) {
            continue;
        }
        let Ok(t) = terminals.get(id) else {
            continue;
        };
        out.push(Attachment {
            path,
            content: t.screen_text(),
            truncated: false,
        });
        if out.len() == MAX_TERMINALS {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use reasonix_forward::proto::PtySize;
    use std::time::Duration;

    #[tokio::test]
    async fn mentions_attach_the_current_screen_of_known_terminals_only() {
        let ws = tempfile::tempdir().expect("tempdir");
        // A fresh HOME: the machine user's login profile must not hold the prompt back.
        let home = tempfile::tempdir().expect("home");
        std::env::set_var("HOME", home.path());
        let terms = Terminals::new(ws.path().to_path_buf());
        let t = terms
            .open(PtySize { cols: 60, rows: 10 }, "")
            .expect("open");
        t.write(b"echo MARK-$((6*7))\n".to_vec());
        let mut watch = t.watch();
        tokio::time::timeout(Duration::from_secs(30), async {
            while !t.screen_text().lines().any(|l| l == "MARK-42") {
                let _ = watch.changed().await;
            }
        })
        .await
        .expect("the echo shows");
        let id = t.id;
        let text = format!("why @term:{id}? and @term:{id}, not @term:99 or term:{id}");
        let got = resolve(&terms, &text);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].path, format!("term:{id}"));
        assert!(got[0].content.lines().any(|l| l == "MARK-42"), "{got:?}");
        assert!(!got[0].content.ends_with('\n'), "blank rows trimmed");
        terms.close_all();
    }
}
