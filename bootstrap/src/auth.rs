//! User authentication in OpenSSH's order: `none` (to learn the allowed methods), publickey
//! (ssh-agent keys, then identity files — an encrypted file's passphrase is asked only after
//! the server said it would accept that key), keyboard-interactive (any number of rounds),
//! password. Partial success continues with the methods the server still allows.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use russh::client::{AuthResult, Handle, KeyboardInteractiveAuthResponse};
use russh::keys::agent::AgentIdentity;
use russh::keys::{HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey};
use russh::{MethodKind, MethodSet};
use zeroize::Zeroizing;

use crate::config::ResolvedHost;
use crate::error::BootstrapError;
use crate::prompter::{CredentialCache, KbdRound, Prompter, SecretPrompt, SecretPurpose, Stage};
use crate::transport::ssh::ClientHandler;

/// What one attempt produced.
enum Step {
    Done,
    /// The server accepted this factor but wants more; these methods remain.
    Partial(MethodSet),
    /// This method did not get us in.
    Failed,
}

fn step_of(r: AuthResult) -> Step {
    match r {
        AuthResult::Success => Step::Done,
        AuthResult::Failure {
            partial_success: true,
            remaining_methods,
        } => Step::Partial(remaining_methods),
        AuthResult::Failure { .. } => Step::Failed,
    }
}

fn method_name(m: &MethodKind) -> &'static str {
    m.into()
}

fn allowed_names(set: &MethodSet) -> String {
    let names: Vec<&str> = set.iter().map(method_name).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(",")
    }
}

struct Ctx<'a> {
    handle: &'a mut Handle<ClientHandler>,
    r: &'a ResolvedHost,
    prompter: &'a dyn Prompter,
    cache: &'a CredentialCache,
    tried: Vec<&'static str>,
    /// Secrets that worked for one factor; cached only once the whole login succeeded.
    pending_cache: Vec<(String, Zeroizing<String>)>,
    /// Cached keyboard-interactive answers are used for the first kbd factor only: a server
    /// asking again within the same login wants a fresh answer.
    kbd_factor_done: bool,
}

impl Ctx<'_> {
    fn ssh_err(&self, what: &str, e: impl std::fmt::Display) -> BootstrapError {
        BootstrapError::ssh(Stage::Auth, &self.r.hostname, what, e)
    }

    fn cancelled(&self) -> BootstrapError {
        BootstrapError::Cancelled {
            stage: Stage::Auth,
            host: self.r.hostname.clone(),
        }
    }

    async fn ask_secret(&self, prompt: SecretPrompt) -> Option<Zeroizing<String>> {
        if self.r.batch_mode {
            return None;
        }
        self.prompter.secret(&prompt).await
    }

    fn note(&mut self, m: &'static str) {
        if !self.tried.contains(&m) {
            self.tried.push(m);
        }
    }
}

/// Authenticate `handle` as `r.user`.
pub(crate) async fn authenticate(
    handle: &mut Handle<ClientHandler>,
    r: &ResolvedHost,
    prompter: &dyn Prompter,
    cache: &CredentialCache,
) -> Result<(), BootstrapError> {
    let mut ctx = Ctx {
        handle,
        r,
        prompter,
        cache,
        tried: Vec::new(),
        pending_cache: Vec::new(),
        kbd_factor_done: false,
    };
    let mut done_methods: Vec<&'static str> = Vec::new();
    // When a public key is what we would try first, try it before asking the server which
    // methods it takes (`none`): one round trip less on every connection to a host that
    // takes the key (the common case). Only a refusal costs the `none` request after all.
    let first = r
        .preferred_authentications
        .iter()
        .find_map(|p| match p.as_str() {
            "publickey" => r.pubkey_authentication.then_some(MethodKind::PublicKey),
            "keyboard-interactive" => r
                .kbd_interactive_authentication
                .then_some(MethodKind::KeyboardInteractive),
            "password" => r.password_authentication.then_some(MethodKind::Password),
            _ => None,
        });
    let mut known = None;
    if first == Some(MethodKind::PublicKey) {
        ctx.note(method_name(&MethodKind::PublicKey));
        match try_publickey(&mut ctx).await? {
            Step::Done => {
                for (k, v) in ctx.pending_cache.drain(..) {
                    ctx.cache.put(k, v);
                }
                return Ok(());
            }
            Step::Partial(rest) => {
                tracing::debug!(method = "publickey", remaining = %allowed_names(&rest), "partial success");
                known = Some(rest);
            }
            Step::Failed => done_methods.push(method_name(&MethodKind::PublicKey)),
        }
    }
    let mut allowed = match known {
        Some(rest) => rest,
        None => match ctx.handle.authenticate_none(&r.user).await {
            Ok(AuthResult::Success) => return Ok(()),
            Ok(AuthResult::Failure {
                remaining_methods, ..
            }) => remaining_methods,
            Err(e) => return Err(ctx.ssh_err("auth request", e)),
        },
    };
    'outer: loop {
        for pref in &r.preferred_authentications {
            let (kind, enabled) = match pref.as_str() {
                "publickey" => (MethodKind::PublicKey, r.pubkey_authentication),
                "keyboard-interactive" => (
                    MethodKind::KeyboardInteractive,
                    r.kbd_interactive_authentication,
                ),
                "password" => (MethodKind::Password, r.password_authentication),
                _ => continue,
            };
            let name = method_name(&kind);
            if !enabled || !allowed.contains(&kind) || done_methods.contains(&name) {
                continue;
            }
            done_methods.push(name);
            ctx.note(name);
            let step = match kind {
                MethodKind::PublicKey => try_publickey(&mut ctx).await?,
                MethodKind::KeyboardInteractive => try_kbd(&mut ctx).await?,
                MethodKind::Password => try_password(&mut ctx).await?,
                MethodKind::None | MethodKind::HostBased | MethodKind::GssapiWithMic => {
                    Step::Failed
                }
            };
            match step {
                Step::Done => {
                    for (k, v) in ctx.pending_cache.drain(..) {
                        ctx.cache.put(k, v);
                    }
                    return Ok(());
                }
                Step::Partial(rest) => {
                    tracing::debug!(method = name, remaining = %allowed_names(&rest), "partial success");
                    allowed = rest;
                    // A later factor may use a method already used (e.g. two
                    // keyboard-interactive factors), so start the preference list again.
                    done_methods.clear();
                    continue 'outer;
                }
                Step::Failed => {}
            }
        }
        break;
    }
    let hint = if ctx.tried.is_empty() {
        "No method we support is enabled on both sides; check PreferredAuthentications and the server's AuthenticationMethods.".to_string()
    } else {
        "Check the user name, that your public key is in the host's ~/.ssh/authorized_keys (or ssh-add it), or the password.".to_string()
    };
    Err(BootstrapError::Auth {
        user: r.user.clone(),
        host: r.hostname.clone(),
        tried: ctx.tried.join(","),
        allowed: allowed_names(&allowed),
        hint,
    })
}

/// Signer used to ask the server whether it would accept a key without signing anything:
/// being asked to sign means "yes"; we then refuse, which abandons that attempt.
struct ProbeSigner {
    accepted: bool,
}

#[derive(Debug)]
enum ProbeError {
    Accepted,
    Send,
}

impl From<russh::SendError> for ProbeError {
    fn from(_: russh::SendError) -> Self {
        ProbeError::Send
    }
}

impl russh::Signer for ProbeSigner {
    type Error = ProbeError;

    fn auth_sign(
        &mut self,
        _key: &AgentIdentity,
        _hash_alg: Option<HashAlg>,
        _to_sign: Vec<u8>,
    ) -> impl std::future::Future<Output = Result<Vec<u8>, Self::Error>> + Send {
        self.accepted = true;
        async { Err(ProbeError::Accepted) }
    }
}

async fn rsa_hash(ctx: &Ctx<'_>, key: &PublicKey) -> Option<HashAlg> {
    if !key.algorithm().is_rsa() {
        return None;
    }
    match ctx.handle.best_supported_rsa_hash().await {
        Ok(Some(h)) => h,
        _ => Some(HashAlg::Sha256),
    }
}

async fn public_of(path: &Path, text: &str) -> Option<PublicKey> {
    if let Ok(k) = russh::keys::ssh_key::PrivateKey::from_openssh(text) {
        return Some(k.public_key().clone());
    }
    let mut pubpath = path.as_os_str().to_owned();
    pubpath.push(".pub");
    russh::keys::load_public_key(PathBuf::from(pubpath)).ok()
}

async fn try_publickey(ctx: &mut Ctx<'_>) -> Result<Step, BootstrapError> {
    let user = ctx.r.user.clone();
    // File public keys, so IdentitiesOnly can restrict agent keys to them.
    let mut file_keys: Vec<(PathBuf, String)> = Vec::new();
    for path in &ctx.r.identity_files {
        match std::fs::read_to_string(path) {
            Ok(text) => file_keys.push((path.clone(), text)),
            Err(e) => {
                if ctx.r.identity_files_explicit {
                    tracing::warn!(path = %path.display(), error = %e, "identity file not readable");
                }
            }
        }
    }
    let mut file_publics: Vec<Option<PublicKey>> = Vec::new();
    for (path, text) in &file_keys {
        file_publics.push(public_of(path, text).await);
    }

    // 1. ssh-agent.
    if let Some(sock) = ctx.r.identity_agent.clone() {
        match crate::platform::agent::connect(&sock).await {
            Ok(mut agent) => {
                let ids = agent.request_identities().await.unwrap_or_default();
                for id in ids {
                    let key = id.public_key().into_owned();
                    if ctx.r.identities_only
                        && !file_publics
                            .iter()
                            .flatten()
                            .any(|k| k.key_data() == key.key_data())
                    {
                        continue;
                    }
                    let hash = rsa_hash(ctx, &key).await;
                    match ctx
                        .handle
                        .authenticate_publickey_with(&user, key, hash, &mut agent)
                        .await
                    {
                        Ok(r) => match step_of(r) {
                            Step::Failed => {}
                            other => return Ok(other),
                        },
                        Err(e) => tracing::debug!(error = %e, "agent could not sign"),
                    }
                }
            }
            Err(e) => {
                tracing::debug!(socket = %sock.display(), error = %e, "ssh-agent not reachable")
            }
        }
    }

    // 2. Identity files.
    for ((path, text), public) in file_keys.iter().zip(file_publics) {
        let plain = russh::keys::decode_secret_key(text, None);
        let key = match plain {
            Ok(k) => k,
            Err(russh::keys::Error::KeyIsEncrypted) => {
                // Ask the server first; the passphrase is only worth asking for a key it
                // would accept.
                if let Some(public) = &public {
                    let hash = rsa_hash(ctx, public).await;
                    let mut probe = ProbeSigner { accepted: false };
                    let res = ctx
                        .handle
                        .authenticate_publickey_with(&user, public.clone(), hash, &mut probe)
                        .await;
                    match res {
                        Ok(r) => match step_of(r) {
                            Step::Failed => continue,
                            other => return Ok(other),
                        },
                        Err(ProbeError::Accepted) => {}
                        Err(ProbeError::Send) => {
                            return Err(ctx.ssh_err("publickey probe", "connection lost"))
                        }
                    }
                    if !probe.accepted {
                        continue;
                    }
                }
                match decrypt_identity(ctx, path, text).await? {
                    Some(k) => k,
                    None => continue,
                }
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "identity file not usable");
                continue;
            }
        };
        let public = key.public_key().clone();
        let hash = rsa_hash(ctx, &public).await;
        let res = ctx
            .handle
            .authenticate_publickey(&user, PrivateKeyWithHashAlg::new(Arc::new(key), hash))
            .await
            .map_err(|e| ctx.ssh_err("publickey", e))?;
        match step_of(res) {
            Step::Failed => {}
            other => return Ok(other),
        }
    }
    Ok(Step::Failed)
}

/// Decrypt an identity with a cached or asked passphrase (3 tries). `None` = skip this key.
async fn decrypt_identity(
    ctx: &Ctx<'_>,
    path: &Path,
    text: &str,
) -> Result<Option<PrivateKey>, BootstrapError> {
    let cache_key = CredentialCache::passphrase_key(path);
    if let Some(pass) = ctx.cache.get(&cache_key) {
        if let Ok(k) = russh::keys::decode_secret_key(text, Some(pass.as_str())) {
            return Ok(Some(k));
        }
        ctx.cache.forget(&cache_key);
    }
    for attempt in 0..ctx.r.number_of_password_prompts.max(1) {
        let prompt = SecretPrompt {
            prompt: if attempt == 0 {
                format!("Enter passphrase for key '{}': ", path.display())
            } else {
                format!("Bad passphrase, try again for '{}': ", path.display())
            },
            echo: false,
            purpose: SecretPurpose::Passphrase {
                path: path.to_path_buf(),
            },
        };
        let Some(pass) = ctx.ask_secret(prompt).await else {
            // Cancelled or batch mode: skip this key, as OpenSSH does on an empty answer.
            return Ok(None);
        };
        if pass.is_empty() {
            return Ok(None);
        }
        match russh::keys::decode_secret_key(text, Some(pass.as_str())) {
            Ok(k) => {
                ctx.cache.put(cache_key, pass);
                return Ok(Some(k));
            }
            Err(e) => tracing::debug!(error = %e, "wrong passphrase"),
        }
    }
    Ok(None)
}

async fn try_password(ctx: &mut Ctx<'_>) -> Result<Step, BootstrapError> {
    let r = ctx.r;
    let key = CredentialCache::password_key(&r.user, &r.hostname, r.port);
    let mut cached = ctx.cache.get(&key);
    let mut asked = 0;
    loop {
        let (pw, from_cache) = match cached.take() {
            Some(pw) => (pw, true),
            None => {
                if asked >= r.number_of_password_prompts {
                    return Ok(Step::Failed);
                }
                asked += 1;
                let prompt = SecretPrompt {
                    prompt: format!("{}@{}'s password: ", r.user, r.hostname),
                    echo: false,
                    purpose: SecretPurpose::Password {
                        user: r.user.clone(),
                        host: r.hostname.clone(),
                    },
                };
                match ctx.ask_secret(prompt).await {
                    Some(pw) => (pw, false),
                    None if r.batch_mode => return Ok(Step::Failed),
                    None => return Err(ctx.cancelled()),
                }
            }
        };
        let res = ctx
            .handle
            .authenticate_password(&r.user, pw.as_str())
            .await
            .map_err(|e| ctx.ssh_err("password", e))?;
        match step_of(res) {
            Step::Failed => {
                if from_cache {
                    ctx.cache.forget(&key);
                }
            }
            other => {
                ctx.pending_cache.push((key, pw));
                return Ok(other);
            }
        }
    }
}

/// Whether a keyboard-interactive prompt asks for the account password (and so may be
/// answered from / stored in the cache). One-time codes must never be replayed.
fn is_password_prompt(prompt: &str, echo: bool) -> bool {
    !echo && prompt.to_ascii_lowercase().contains("password")
}

async fn try_kbd(ctx: &mut Ctx<'_>) -> Result<Step, BootstrapError> {
    let r = ctx.r;
    let mut failures = 0;
    // Cached answers are tried at most once, and only for the first kbd factor.
    let mut use_cache = !ctx.kbd_factor_done;
    ctx.kbd_factor_done = true;
    loop {
        let mut reply = ctx
            .handle
            .authenticate_keyboard_interactive_start(&r.user, None)
            .await
            .map_err(|e| ctx.ssh_err("keyboard-interactive", e))?;
        let mut used_cache_keys: Vec<String> = Vec::new();
        let mut fresh: Vec<(String, Zeroizing<String>)> = Vec::new();
        let outcome = loop {
            match reply {
                KeyboardInteractiveAuthResponse::Success => break Step::Done,
                KeyboardInteractiveAuthResponse::Failure {
                    partial_success: true,
                    remaining_methods,
                } => break Step::Partial(remaining_methods),
                KeyboardInteractiveAuthResponse::Failure { .. } => break Step::Failed,
                KeyboardInteractiveAuthResponse::InfoRequest {
                    name,
                    instructions,
                    prompts,
                } => {
                    let mut answers: Vec<Option<Zeroizing<String>>> = Vec::new();
                    for p in &prompts {
                        let cached = if use_cache && is_password_prompt(&p.prompt, p.echo) {
                            let k =
                                CredentialCache::kbd_key(&r.user, &r.hostname, r.port, &p.prompt);
                            let v = ctx.cache.get(&k);
                            if v.is_some() {
                                used_cache_keys.push(k);
                            }
                            v
                        } else {
                            None
                        };
                        answers.push(cached);
                    }
                    let missing: Vec<usize> = answers
                        .iter()
                        .enumerate()
                        .filter(|(_, a)| a.is_none())
                        .map(|(i, _)| i)
                        .collect();
                    if !missing.is_empty() {
                        let round = KbdRound {
                            user: r.user.clone(),
                            host: r.hostname.clone(),
                            name: name.clone(),
                            instructions: instructions.clone(),
                            prompts: missing
                                .iter()
                                .map(|&i| (prompts[i].prompt.clone(), prompts[i].echo))
                                .collect(),
                        };
                        let got = if r.batch_mode {
                            None
                        } else {
                            ctx.prompter.keyboard_interactive(&round).await
                        };
                        let Some(got) = got else {
                            if r.batch_mode {
                                return Ok(Step::Failed);
                            }
                            return Err(ctx.cancelled());
                        };
                        if got.len() != missing.len() {
                            return Err(ctx.ssh_err(
                                "keyboard-interactive",
                                "the prompter returned a different number of answers than prompts",
                            ));
                        }
                        for (&i, a) in missing.iter().zip(got) {
                            if is_password_prompt(&prompts[i].prompt, prompts[i].echo) {
                                fresh.push((
                                    CredentialCache::kbd_key(
                                        &r.user,
                                        &r.hostname,
                                        r.port,
                                        &prompts[i].prompt,
                                    ),
                                    Zeroizing::new(a.as_str().to_owned()),
                                ));
                            }
                            answers[i] = Some(a);
                        }
                    }
                    let responses: Vec<String> = answers
                        .into_iter()
                        .map(|a| a.map(|z| z.as_str().to_owned()).unwrap_or_default())
                        .collect();
                    reply = ctx
                        .handle
                        .authenticate_keyboard_interactive_respond(responses)
                        .await
                        .map_err(|e| ctx.ssh_err("keyboard-interactive", e))?;
                }
            }
        };
        match outcome {
            Step::Failed => {
                for k in used_cache_keys {
                    ctx.cache.forget(&k);
                }
                use_cache = false;
                failures += 1;
                if failures >= r.number_of_password_prompts.max(1) {
                    return Ok(Step::Failed);
                }
            }
            other => {
                ctx.pending_cache.extend(fresh);
                return Ok(other);
            }
        }
    }
}
