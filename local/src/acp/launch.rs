//! How `reasonix acp` reaches a workspace: locally through the host binary next to
//! `reasonix`, or on a host over SSH with the same bootstrap and reconnect code as
//! `reasonix ssh`. An editor cannot answer SSH prompts, so the prompter here refuses every
//! question and remembers which, and a failed open says what to do instead.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use reasonix_bootstrap::{
    Destination, HostKeyAnswer, HostKeyQuestion, KbdRound, NonInteractivePrompter, Prompter,
    SecretPrompt, SshOptions, Stage,
};
use reasonix_forward::sync::LockExt;
use zeroize::Zeroizing;

use super::session::SessionSpec;
use super::SessionFactory;
use crate::config::{Config, LoadOptions, Overrides};
use crate::connect::{locate_host_binary, Connector, LocalConnector, UpgradePolicy};

/// What `reasonix acp` was started with.
pub struct Launch {
    /// `--ssh DEST` and its OpenSSH options.
    pub ssh: Option<(String, SshOptions)>,
    /// `--model`.
    pub model: Option<String>,
    /// `--upgrade`.
    pub upgrade: bool,
    /// `--docker`, `--podman`, `--kube` or `--exec`: a container or pod instead of SSH.
    pub exec: Option<crate::exec_target::ExecTarget>,
}

/// The session factory of a launch; fails early on a bad destination or a missing host
/// binary, so the editor sees the reason before any session is asked for.
pub fn factory(launch: Launch) -> Result<SessionFactory, String> {
    let upgrade = if launch.upgrade {
        UpgradePolicy::Force
    } else {
        UpgradePolicy::Refuse
    };
    let model = launch.model;
    if let Some(target) = launch.exec {
        return Ok(Arc::new(move |cwd: &Path| {
            let mut config = load(cwd, model.clone(), true)?;
            let prompter = Arc::new(EditorPrompter::default());
            let connector: Arc<dyn Connector> = Arc::new(
                crate::ssh::SshConnector::exec(
                    target.clone(),
                    Arc::clone(&prompter) as Arc<dyn Prompter>,
                )
                .with_upgrade(upgrade),
            );
            config.apply_workspace(&connector.describe());
            let text = connector.describe();
            Ok(SessionSpec {
                config,
                connector,
                workspace: PathBuf::from(target.workspace.clone()),
                model: model.clone(),
                explain: Some(Arc::new(move |reason: &str| {
                    prompter.explain(&text, reason)
                })),
            })
        }));
    }
    match launch.ssh {
        None => {
            let binary = locate_host_binary()?;
            Ok(Arc::new(move |cwd: &Path| {
                if !cwd.is_absolute() || !cwd.is_dir() {
                    return Err(format!(
                        "the session's cwd {} is not an absolute path to a folder",
                        cwd.display()
                    ));
                }
                let mut config = load(cwd, model.clone(), false)?;
                let connector: Arc<dyn Connector> = Arc::new(LocalConnector {
                    upgrade,
                    ..LocalConnector::new(binary.clone(), cwd.to_path_buf())
                });
                // This workspace's rules apply, and "always allow" is stored under it, as in
                // the TUI and `run`.
                config.apply_workspace(&connector.describe());
                Ok(SessionSpec {
                    config,
                    connector,
                    workspace: cwd.to_path_buf(),
                    model: model.clone(),
                    explain: None,
                })
            }))
        }
        Some((dest_text, opts)) => {
            let dest = Destination::parse(&dest_text).map_err(|e| e.to_string())?;
            Ok(Arc::new(move |cwd: &Path| {
                // The editor's folder is on the laptop; the workspace is the destination's.
                let mut config = load(cwd, model.clone(), true)?;
                let prompter = Arc::new(EditorPrompter::default());
                let connector: Arc<dyn Connector> = Arc::new(
                    crate::ssh::SshConnector::new(
                        dest.clone(),
                        opts.clone(),
                        Arc::clone(&prompter) as Arc<dyn Prompter>,
                    )
                    .with_upgrade(upgrade),
                );
                config.apply_workspace(&connector.describe());
                let text = dest_text.clone();
                Ok(SessionSpec {
                    config,
                    connector,
                    workspace: PathBuf::from(dest.path.clone().unwrap_or_else(|| "~".into())),
                    model: model.clone(),
                    explain: Some(Arc::new(move |reason: &str| {
                        prompter.explain(&text, reason)
                    })),
                })
            }))
        }
    }
}

fn load(cwd: &Path, model: Option<String>, remote: bool) -> Result<Config, String> {
    let config = Config::load(&LoadOptions {
        project_dir: (!remote).then(|| cwd.to_path_buf()),
        ignore_project: remote,
        overrides: Overrides {
            model,
            ..Overrides::default()
        },
        ..LoadOptions::default()
    })
    .map_err(|e| e.to_string())?;
    crate::gateway::preflight_planner(&config)?;
    Ok(config)
}

/// What the editor-side prompter had to refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    HostKey,
    Secret,
    Keyboard,
}

/// Refuses every SSH question (the editor owns the screen and cannot answer), and records
/// which were asked so the failure can say what to do.
#[derive(Default)]
pub struct EditorPrompter {
    refused: Mutex<Vec<Refused>>,
}

impl EditorPrompter {
    fn note(&self, r: Refused) {
        let mut v = self.refused.lock_or_recover();
        if !v.contains(&r) {
            v.push(r);
        }
    }

    /// `reason` with what the user can do about each refused question.
    pub fn explain(&self, dest: &str, reason: &str) -> String {
        let refused = self.refused.lock_or_recover().clone();
        let mut out = reason.to_string();
        for r in refused {
            match r {
                Refused::HostKey => out.push_str(&format!(
                    " The editor cannot confirm an unknown host key: run `reasonix ssh {dest}` once in a terminal to check and trust it, then start the editor's agent again."
                )),
                Refused::Secret => out.push_str(
                    " The editor cannot ask for a password or key passphrase: load the key into ssh-agent (`ssh-add`) or use a key file without a passphrase (-i or IdentityFile).",
                ),
                Refused::Keyboard => out.push_str(
                    " The host asks for keyboard-interactive answers, which the editor cannot give: use key authentication through ssh-agent or a key file (-i or IdentityFile).",
                ),
            }
        }
        out
    }
}

#[async_trait]
impl Prompter for EditorPrompter {
    async fn host_key(&self, question: &HostKeyQuestion) -> HostKeyAnswer {
        self.note(Refused::HostKey);
        NonInteractivePrompter.host_key(question).await
    }

    async fn secret(&self, prompt: &SecretPrompt) -> Option<Zeroizing<String>> {
        self.note(Refused::Secret);
        NonInteractivePrompter.secret(prompt).await
    }

    async fn keyboard_interactive(&self, round: &KbdRound) -> Option<Vec<Zeroizing<String>>> {
        let answer = NonInteractivePrompter.keyboard_interactive(round).await;
        if answer.is_none() {
            self.note(Refused::Keyboard);
        }
        answer
    }

    fn banner(&self, text: &str) {
        NonInteractivePrompter.banner(text)
    }

    fn progress(&self, stage: Stage, detail: &str, amount: Option<(u64, u64)>) {
        NonInteractivePrompter.progress(stage, detail, amount)
    }
}
