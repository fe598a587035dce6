//! Shared helpers for the bootstrap integration tests (real sshd, real users).
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use reasonix_bootstrap::{
    HostKeyAnswer, HostKeyQuestion, KbdRound, Prompter, SecretPrompt, SshOptions, Stage,
};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use zeroize::Zeroizing;

/// One progress report: stage, detail, (done, total).
pub type ProgressEvent = (Stage, String, Option<(u64, u64)>);

/// Everything the scripted prompter saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub host_keys: Vec<HostKeyQuestion>,
    pub secrets: Vec<SecretPrompt>,
    pub rounds: Vec<KbdRound>,
    pub banners: Vec<String>,
    pub progress: Vec<ProgressEvent>,
}

/// A prompter that answers from scripts and records every event.
pub struct ScriptedPrompter {
    pub host_key_answer: HostKeyAnswer,
    pub secrets: Mutex<Vec<String>>,
    pub rounds: Mutex<Vec<Vec<String>>>,
    pub seen: Mutex<Seen>,
}

impl ScriptedPrompter {
    pub fn new(host_key_answer: HostKeyAnswer) -> Arc<Self> {
        Arc::new(Self {
            host_key_answer,
            secrets: Mutex::new(Vec::new()),
            rounds: Mutex::new(Vec::new()),
            seen: Mutex::new(Seen::default()),
        })
    }
    pub fn with_secrets(self: Arc<Self>, s: &[&str]) -> Arc<Self> {
        *self.secrets.lock().unwrap() = s.iter().rev().map(|x| x.to_string()).collect();
        self
    }
    pub fn with_rounds(self: Arc<Self>, r: &[&[&str]]) -> Arc<Self> {
        *self.rounds.lock().unwrap() = r
            .iter()
            .rev()
            .map(|round| round.iter().map(|x| x.to_string()).collect())
            .collect();
        self
    }
}

#[async_trait]
impl Prompter for ScriptedPrompter {
    async fn host_key(&self, q: &HostKeyQuestion) -> HostKeyAnswer {
        self.seen.lock().unwrap().host_keys.push(q.clone());
        self.host_key_answer
    }
    async fn secret(&self, p: &SecretPrompt) -> Option<Zeroizing<String>> {
        self.seen.lock().unwrap().secrets.push(p.clone());
        self.secrets.lock().unwrap().pop().map(Zeroizing::new)
    }
    async fn keyboard_interactive(&self, round: &KbdRound) -> Option<Vec<Zeroizing<String>>> {
        self.seen.lock().unwrap().rounds.push(round.clone());
        if round.prompts.is_empty() {
            return Some(Vec::new());
        }
        self.rounds
            .lock()
            .unwrap()
            .pop()
            .map(|r| r.into_iter().map(Zeroizing::new).collect())
    }
    fn banner(&self, text: &str) {
        self.seen.lock().unwrap().banners.push(text.to_string());
    }
    fn progress(&self, stage: Stage, detail: &str, amount: Option<(u64, u64)>) {
        self.seen
            .lock()
            .unwrap()
            .progress
            .push((stage, detail.to_string(), amount));
    }
}

/// A laptop-side home directory with its own ~/.ssh.
pub struct Laptop {
    pub home: tempfile::TempDir,
}

impl Laptop {
    pub fn new() -> Self {
        let home = tempfile::Builder::new()
            .prefix("rx-laptop-")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        Self { home }
    }
    pub fn ssh_dir(&self) -> PathBuf {
        self.home.path().join(".ssh")
    }
    pub fn known_hosts(&self) -> PathBuf {
        self.ssh_dir().join("known_hosts")
    }
    pub fn trust(&self, sshd: &Sshd) {
        let mut existing = std::fs::read_to_string(self.known_hosts()).unwrap_or_default();
        existing.push_str(&sshd.known_hosts_line());
        std::fs::write(self.known_hosts(), existing).unwrap();
    }
    pub fn key(&self, name: &str, passphrase: Option<&str>) -> ClientKey {
        ClientKey::generate(&self.ssh_dir(), name, passphrase).unwrap()
    }
    /// Options for `sshd`: no config files, no agent, this home.
    pub fn opts(&self, sshd: &Sshd) -> SshOptions {
        let mut o = SshOptions {
            port: Some(sshd.port()),
            config_file: Some(PathBuf::from("none")),
            home: Some(self.home.path().to_path_buf()),
            ..Default::default()
        };
        o.push_option("IdentityAgent=none").unwrap();
        o.push_option("ConnectTimeout=20").unwrap();
        o
    }
}

/// An sshd + a user authorised for a fresh client key + a laptop that trusts the sshd.
pub struct KeySetup {
    pub sshd: Sshd,
    pub user: TestUser,
    pub laptop: Laptop,
    pub key: ClientKey,
}

pub fn key_setup(cfg: SshdConfig, user: UserOptions) -> KeySetup {
    let sshd = Sshd::start(cfg).unwrap();
    let user = TestUser::create(&user).unwrap();
    let laptop = Laptop::new();
    let key = laptop.key("id_test", None);
    user.authorize(&key.public).unwrap();
    laptop.trust(&sshd);
    KeySetup {
        sshd,
        user,
        laptop,
        key,
    }
}

impl KeySetup {
    pub fn opts(&self) -> SshOptions {
        let mut o = self.laptop.opts(&self.sshd);
        o.identity_files.push(self.key.private.clone());
        o
    }
    pub fn dest(&self, path: &str) -> reasonix_bootstrap::Destination {
        reasonix_bootstrap::Destination::parse(&format!("{}@127.0.0.1:{path}", self.user.name))
            .unwrap()
    }
}

/// Hang guard for one test step.
pub async fn guard<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(120), f)
        .await
        .expect("step hung for 120 s")
}
