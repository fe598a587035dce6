//! The full-screen terminal UI (ratatui + crossterm) for local and remote sessions.
//!
//! - [`App`] is the pure state machine (transcript, composer, modals, status bar data),
//!   driven by [`App::handle_event`] / [`App::handle`] / [`App::handle_key`], which return
//!   [`Action`]s for the runner to execute;
//! - [`render()`] draws an [`App`] into a frame (tested with ratatui's `TestBackend`);
//! - [`run_tui`] owns the terminal and the event loop;
//! - [`TuiPrompter`] lets the SSH/bootstrap code ask the user through modals.
//!
//! Only the 16 ANSI colours are used and nothing needs emoji, so it reads the same over SSH,
//! inside tmux and on light terminals.

mod app;
mod composer;
mod diff;
mod elicit;
mod fullout;
mod hooks;
pub(crate) mod keybytes;
mod markdown;
mod mcp;
pub mod osc52;
mod prompter;
mod render;
mod runner;
mod term_link;
mod theme;
mod transcript;
mod workbench;
mod wrap;

pub use app::{Action, App, AppEvent, AppSettings, OpenParams, PromptRequest, PtyAction, PtyEvent};
pub use fullout::OutputRequest;
pub use hooks::hooks_table;
pub use keybytes::{key_bytes, paste_bytes};
pub use mcp::mcp_table;

/// Built-in slash command names and aliases (custom command files cannot take these).
pub fn builtin_command_names() -> Vec<&'static str> {
    app::SlashCommand::reserved_names()
}
pub use prompter::{prompter_channel, TuiPrompter, TuiPrompts};
pub use render::render;
pub use runner::{app_settings, run_tui, TuiOptions};
