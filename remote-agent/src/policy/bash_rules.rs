//! How rules meet a bash command line: deny and ask rules on every piece and on what it
//! runs through wrappers, on what a piece *could* run where parts of it are only known when
//! it runs, the file tools' path rules on the paths it names, then allow rules and the mode.

use super::bash::{split_command, Piece};
use super::readonly::{self, is_read_only_command};
use super::rules::{Rule, Spec};
use super::{paths, Decision, Mode, Policy};

/// A bash decision, and whether an ask in it binds even under yolo: the command cannot be
/// read, so nothing proves it is not one a deny rule would refuse.
pub(super) struct BashDecision {
    pub(super) decision: Decision,
    pub(super) binding: bool,
}

impl From<Decision> for BashDecision {
    fn from(decision: Decision) -> Self {
        BashDecision {
            decision,
            binding: false,
        }
    }
}

impl Policy {
    /// The file tools' path rules also hold for the paths a command line names (arguments
    /// and redirection targets): `cat secrets/k` meets `Read(secrets/**)` as `read_file`
    /// would, and `cp x secrets/k` meets `Edit(secrets/**)` unless the command is proven
    /// read-only. Naming a path is enough (`echo secrets/k` too): the safe direction.
    fn decide_bash_paths(&self, pieces: &[Piece]) -> Option<Decision> {
        let applies = |r: &Rule, read_only: bool| {
            matches!(r.spec, Some(Spec::Path { .. }))
                && (r.names_tool("read_file") || (!read_only && r.names_tool("write_file")))
        };
        if !self
            .deny
            .iter()
            .chain(self.ask.iter())
            .any(|r| applies(r, false))
        {
            return None;
        }
        let mut ask = None;
        for p in pieces {
            let read_only = readonly::is_read_only_command(p);
            let named = p.command_words().iter().skip(1).chain(p.targets.iter());
            for word in named {
                // `--file=secrets/k` names a path after its `=`; other flags name none.
                let raw = match word.strip_prefix('-') {
                    Some(flag) => match flag.split_once('=') {
                        Some((_, v)) => v,
                        None => continue,
                    },
                    None => word.as_str(),
                };
                if raw.is_empty() {
                    continue;
                }
                let forms = paths::subject_forms(self.workspace.as_deref(), raw);
                let hit =
                    |r: &&Rule| applies(r, read_only) && forms.iter().any(|f| r.matches_path(f));
                if let Some(r) = self.deny.iter().find(hit) {
                    return Some(Decision::Deny {
                        reason: format!("denied by rule `{}` (`{}` names `{raw}`)", r.text, p.text),
                    });
                }
                if ask.is_none() {
                    if let Some(r) = self.ask.iter().find(hit) {
                        ask = Some(Decision::Ask {
                            reason: format!(
                                "rule `{}` asks before `{}` (it names `{raw}`)",
                                r.text, p.text
                            ),
                        });
                    }
                }
            }
        }
        // A deny anywhere in the line wins over an ask found earlier.
        ask
    }

    pub(super) fn decide_bash(&self, command: &str) -> BashDecision {
        let pieces = split_command(command);
        let whole = Piece::whole(command);
        // Text the reader finds no command in (a bare keyword such as `then`, a comment) is
        // not proof that nothing runs: it is treated like text it cannot see through.
        let nothing_seen = (pieces.is_empty() && !command.trim().is_empty())
            .then(|| Piece::opaque(command, "no command could be read from it".to_string()));
        let all: Vec<&Piece> = nothing_seen.iter().chain(pieces.iter()).collect();
        let bash_rules = |rules: &'_ [Rule]| -> Vec<Rule> {
            rules
                .iter()
                .filter(|r| r.names_tool("bash"))
                .cloned()
                .collect()
        };
        let deny = bash_rules(&self.deny);
        for r in &deny {
            if let Some(p) = all
                .iter()
                .copied()
                .chain(std::iter::once(&whole))
                .find(|p| r.matches_piece(p, false))
            {
                return Decision::Deny {
                    reason: format!("denied by rule `{}` (matched `{}`)", r.text, p.text),
                }
                .into();
            }
        }
        // What is only known when it runs is denied when some value of it is what a deny rule
        // names (`r=rm; $r -rf x` under `Bash(rm:*)`), in every mode.
        for r in &deny {
            if let Some(p) = all.iter().find(|p| r.could_name(p)) {
                return Decision::Deny {
                    reason: format!(
                        "denied by rule `{}`: `{}` could run what it names ({})",
                        r.text,
                        p.text,
                        unknown_part(p)
                    ),
                }
                .into();
            }
        }
        if let Some(d) = self.decide_bash_paths(&pieces) {
            return d.into();
        }
        let ask = bash_rules(&self.ask);
        for r in &ask {
            if let Some(p) = all
                .iter()
                .copied()
                .chain(std::iter::once(&whole))
                .find(|p| r.matches_piece(p, false) || r.could_name(p))
            {
                return Decision::Ask {
                    reason: format!("rule `{}` asks before running `{}`", r.text, p.text),
                }
                .into();
            }
        }
        let allow: Vec<Rule> = bash_rules(&self.allow)
            .into_iter()
            .chain(bash_rules(&self.session))
            .collect();
        let exact = |p: &Piece| {
            allow
                .iter()
                .any(|r| matches!(&r.spec, Some(Spec::Exact(c)) if *c == p.text))
        };
        if exact(&whole) {
            return Decision::Allow.into();
        }
        // What cannot be seen through is never allowed unasked, in any mode (yolo included):
        // only an exact approval of it lets it run.
        if let Some(p) = all.iter().find(|p| p.opaque.is_some() && !exact(p)) {
            let why = p.opaque.as_deref().unwrap_or("unknown");
            return BashDecision {
                decision: Decision::Ask {
                    reason: format!("bash: `{}` cannot be checked: {why}", p.text),
                },
                binding: true,
            };
        }
        let uncovered: Vec<&Piece> = pieces
            .iter()
            .filter(|p| {
                !(allow.iter().any(|r| r.matches_piece(p, true)) || is_read_only_command(p))
            })
            .collect();
        if uncovered.is_empty() {
            return Decision::Allow.into();
        }
        match self.mode {
            Mode::Ask => Decision::Ask {
                reason: format!(
                    "bash: no rule allows `{}`",
                    uncovered
                        .iter()
                        .map(|p| p.text.as_str())
                        .collect::<Vec<_>>()
                        .join("`, `")
                ),
            }
            .into(),
            Mode::Auto | Mode::Yolo => Decision::Allow.into(),
        }
    }
}

/// What about a piece is only known when it runs, for a denial's reason.
fn unknown_part(p: &Piece) -> String {
    match &p.opaque {
        Some(why) => why.clone(),
        None => {
            let dynamic: Vec<&str> = p
                .words
                .iter()
                .filter(|w| w.contains(['$', '`', '*', '?', '[', '{']))
                .map(String::as_str)
                .collect();
            if dynamic.is_empty() {
                "parts of it are only known when it runs".to_string()
            } else {
                format!("`{}` is only known when it runs", dynamic.join("`, `"))
            }
        }
    }
}
