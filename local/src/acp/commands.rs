//! The slash commands an editor can offer in its prompt box (`available_commands_update`),
//! and their parsing. Only built-in commands that mean something without the TUI are
//! advertised, each mapping onto one daemon request; the custom commands (command files,
//! `crate::commands`) follow them and expand into the prompt, as in the TUI.

use agent_client_protocol::v1::schema as acp;

use super::session::Scope;

/// A parsed slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/continue`: resume a turn that paused at its step limit.
    Continue,
    /// `/status`: the host daemon's status.
    Status,
    /// `/goal [objective|status|pause|resume|clear]` (see [`crate::goal::parse`]).
    Goal(String),
    /// `/rewind N [code|conversation|both]`: restore to just before turn N.
    Rewind {
        /// Turn number.
        to_turn: u64,
        /// What to restore.
        scope: Scope,
    },
}

/// The commands as advertised to the editor.
pub fn available() -> Vec<acp::AvailableCommand> {
    vec![
        acp::AvailableCommand::new("continue", "Continue a turn that paused at its step limit"),
        acp::AvailableCommand::new("status", "Show the host daemon's status"),
        acp::AvailableCommand::new(
            "goal",
            "Keep working toward an objective, turn after turn, also with no editor attached",
        )
        .input(acp::AvailableCommandInput::Unstructured(
            acp::UnstructuredCommandInput::new("objective, or status | pause | resume | clear"),
        )),
        acp::AvailableCommand::new(
            "rewind",
            "Restore files and/or conversation to just before turn N",
        )
        .input(acp::AvailableCommandInput::Unstructured(
            acp::UnstructuredCommandInput::new("turn number, then code | conversation | both"),
        )),
    ]
}

/// Ours, then the custom commands of `custom` (workspace and user files) with their
/// description and argument hint. Names are unique: the set already skipped files named
/// like a built-in command.
pub fn available_with(custom: &crate::commands::CommandSet) -> Vec<acp::AvailableCommand> {
    let mut out = available();
    for c in &custom.commands {
        if out.iter().any(|a| a.name == c.name) {
            continue;
        }
        let mut cmd = acp::AvailableCommand::new(c.name.clone(), c.description.clone());
        if !c.argument_hint.is_empty() {
            cmd = cmd.input(acp::AvailableCommandInput::Unstructured(
                acp::UnstructuredCommandInput::new(c.argument_hint.clone()),
            ));
        }
        out.push(cmd);
    }
    out
}

/// `None` when `text` is not one of our commands (it then goes to the model as typed, so a
/// prompt that merely starts with a slash, like a path, is not swallowed); `Some(Err)` when it
/// is one with bad arguments.
pub fn parse(text: &str) -> Option<Result<Command, String>> {
    let rest = text.trim().strip_prefix('/')?;
    let (name, arg) = match rest.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (rest, ""),
    };
    match name {
        "continue" => Some(Ok(Command::Continue)),
        "status" => Some(Ok(Command::Status)),
        "goal" => Some(Ok(Command::Goal(arg.to_string()))),
        "rewind" => {
            let mut words = arg.split_whitespace();
            let Some(n) = words.next() else {
                return Some(Err(
                    "/rewind needs a turn number: /rewind N [code|conversation|both]".into(),
                ));
            };
            let Ok(to_turn) = n.parse::<u64>() else {
                return Some(Err(format!("/rewind: `{n}` is not a turn number")));
            };
            let scope = match words.next() {
                None | Some("both") => Scope::Both,
                Some("code") => Scope::Code,
                Some("conversation") => Scope::Conversation,
                Some(other) => {
                    return Some(Err(format!(
                        "/rewind: `{other}` is not a scope; use code, conversation or both"
                    )))
                }
            };
            Some(Ok(Command::Rewind { to_turn, scope }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_other_slashes_go_to_the_model() {
        assert_eq!(parse("/continue"), Some(Ok(Command::Continue)));
        assert_eq!(parse(" /status "), Some(Ok(Command::Status)));
        assert_eq!(
            parse("/rewind 3 code"),
            Some(Ok(Command::Rewind {
                to_turn: 3,
                scope: Scope::Code
            }))
        );
        assert!(matches!(parse("/rewind x"), Some(Err(m)) if m.contains("`x`")));
        assert!(matches!(parse("/rewind 2 all"), Some(Err(m)) if m.contains("`all`")));
        assert_eq!(parse("/etc/hosts has a typo"), None);
        assert_eq!(parse("fix /status"), None);
        let names: Vec<String> = available().into_iter().map(|c| c.name).collect();
        for n in &names {
            assert!(
                parse(&format!("/{n} 1")).is_some(),
                "{n} is advertised and parsed"
            );
        }
    }
}
