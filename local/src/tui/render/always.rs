//! The approval dialog's answers and what "always allow" stores where (#15): the rule, the
//! table and the file, for this workspace (3) and, as a separate choice, everywhere (5).

use super::*;
use crate::always_scope::AlwaysScope;
use crate::tui::app::PendingApproval;

/// The answer rows, in the order of the keys 1–5.
pub(super) const ANSWERS: [(&str, &str); 5] = [
    ("1 y", "allow once"),
    ("2 s", "allow for this session"),
    ("3 a", "always allow in this workspace"),
    ("4 n", "deny"),
    ("5 g", "always allow in every workspace"),
];

/// Lines under the answers saying exactly what 3 and 5 store, and where.
pub(super) fn scope_lines(app: &App, a: &PendingApproval, iw: usize) -> Vec<Line<'static>> {
    let file = &app.settings.config_file;
    let text = match &a.always_rule {
        None => "3/5: this call is too broad to store as a rule; \"always\" allows it for this session only".to_string(),
        Some(rule) => {
            let here = match &app.settings.workspace_key {
                Some(k) => AlwaysScope::Workspace(k.clone()),
                None => AlwaysScope::Global,
            };
            format!(
                "3 stores `{rule}` in {} · 5 stores it in {} (every workspace, every host) · file {file}",
                here.table(),
                AlwaysScope::Global.table()
            )
        }
    };
    wrap_text(&text, iw, theme::dim(), &[])
}
