//! Dialling: TCP (or a ProxyJump tunnel), key exchange, host-key check before any credential,
//! authentication, and the resulting [`SshConnection`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::client::{self, Handle};
use std::borrow::Cow;
use std::path::PathBuf;

use russh::keys::{Algorithm, HashAlg, PublicKey, PublicKeyOrCertificate};
use russh::Preferred;

use crate::config::{ResolvedHost, SshOptions, StrictHostKeyChecking};
use crate::dest::Destination;
use crate::error::{BootstrapError, HostKeyRefusal};
use crate::known_hosts::{self, KnownHosts, Lookup};
use crate::prompter::{
    CredentialCache, HostKeyAnswer, HostKeyQuestion, HostKeyStatus, Prompter, Stage,
};

/// Default limit for the TCP connect when `ConnectTimeout` is not set.
const DEFAULT_TCP_TIMEOUT: Duration = Duration::from_secs(30);
/// Hang guard for the SSH handshake when no prompt is shown.
const DEFAULT_KEX_TIMEOUT: Duration = Duration::from_secs(60);

/// State shared between the russh handler and the dialling code.
#[derive(Default)]
struct HandlerShared {
    /// Why the host key was refused, when it was.
    refusal: Mutex<Option<BootstrapError>>,
    /// Set while (or once) the user has been asked something: the user's time does not count
    /// against the handshake timeout.
    prompted: AtomicBool,
    /// Whether the host key check ran and passed.
    host_key_ok: AtomicBool,
}

/// The russh client handler: host-key verification and banners.
pub(crate) struct ClientHandler {
    host: String,
    port: u16,
    known_hosts_files: Vec<std::path::PathBuf>,
    append_file: Option<std::path::PathBuf>,
    strict: StrictHostKeyChecking,
    hash_known_hosts: bool,
    batch_mode: bool,
    prompter: Arc<dyn Prompter>,
    shared: Arc<HandlerShared>,
}

impl ClientHandler {
    fn refuse(&self, question: HostKeyQuestion, refusal: HostKeyRefusal) -> bool {
        if let Ok(mut slot) = self.shared.refusal.lock() {
            *slot = Some(BootstrapError::HostKey {
                question: Box::new(question),
                refusal,
            });
        }
        false
    }

    fn accept_certificate(&self, known: &KnownHosts, cert: &russh::keys::Certificate) -> bool {
        let ca = PublicKey::new(cert.signature_key().clone(), "");
        if !known.is_trusted_ca(&self.host, self.port, &ca) {
            return false;
        }
        let fp = ca.fingerprint(HashAlg::Sha256);
        let principal_ok = cert.valid_principals().is_empty()
            || cert.valid_principals().iter().any(|p| p == &self.host);
        cert.cert_type() == russh::keys::ssh_key::certificate::CertType::Host
            && principal_ok
            && cert.validate([&fp]).is_ok()
    }

    async fn check_key(&mut self, key: &PublicKey) -> bool {
        let known = KnownHosts::load(&self.known_hosts_files);
        let mut question = HostKeyQuestion {
            host: self.host.clone(),
            port: self.port,
            key_type: known_hosts::key_type(key),
            fingerprint_sha256: known_hosts::fingerprint(key),
            status: HostKeyStatus::Unknown,
        };
        match known.lookup(&self.host, self.port, key) {
            Lookup::Known { file, line } => {
                tracing::debug!(host = %self.host, file = %file.display(), line, "host key known");
                true
            }
            Lookup::Revoked { file, line } => {
                question.status = HostKeyStatus::Revoked {
                    known_hosts_file: file,
                    line,
                };
                self.refuse(question, HostKeyRefusal::Revoked)
            }
            Lookup::Changed {
                old_fingerprint,
                old_key_type,
                file,
                line,
            } => {
                question.status = HostKeyStatus::Changed {
                    old_fingerprint,
                    old_key_type,
                    known_hosts_file: file,
                    line,
                };
                self.refuse(question, HostKeyRefusal::Changed)
            }
            Lookup::Unknown => {
                let answer = match self.strict {
                    StrictHostKeyChecking::Yes => {
                        return self.refuse(question, HostKeyRefusal::StrictRefusedUnknown)
                    }
                    StrictHostKeyChecking::AcceptNew | StrictHostKeyChecking::No => {
                        HostKeyAnswer::AcceptAndSave
                    }
                    StrictHostKeyChecking::Ask if self.batch_mode => HostKeyAnswer::Reject,
                    StrictHostKeyChecking::Ask => {
                        self.shared.prompted.store(true, Ordering::SeqCst);
                        self.prompter.host_key(&question).await
                    }
                };
                match answer {
                    HostKeyAnswer::Reject => self.refuse(question, HostKeyRefusal::RejectedByUser),
                    HostKeyAnswer::AcceptOnce => true,
                    HostKeyAnswer::AcceptAndSave => {
                        if let Some(file) = &self.append_file {
                            if let Err(e) = known_hosts::append(
                                file,
                                &self.host,
                                self.port,
                                key,
                                self.hash_known_hosts,
                            ) {
                                // Not fatal: the user accepted the key; we just could not
                                // remember it.
                                tracing::warn!(error = %e, "could not record host key");
                            }
                        }
                        true
                    }
                }
            }
        }
    }
}

impl client::Handler for ClientHandler {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        server_public_key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let ok = match server_public_key {
            PublicKeyOrCertificate::PublicKey { key, .. } => self.check_key(key).await,
            PublicKeyOrCertificate::Certificate(cert) => {
                let known = KnownHosts::load(&self.known_hosts_files);
                let plain = PublicKey::new(cert.public_key().clone(), "");
                let revoked = matches!(
                    known.lookup(&self.host, self.port, &plain),
                    Lookup::Revoked { .. }
                );
                let ca = PublicKey::new(cert.signature_key().clone(), "");
                if revoked {
                    // A revoked host key stays revoked inside a certificate (OpenSSH checks
                    // the certified key against @revoked lines too).
                    self.check_key(&plain).await
                } else if let Some((file, line)) = known.revoked_entry(&self.host, self.port, &ca) {
                    // A certificate signed by a revoked CA is revoked, not merely unknown.
                    let question = HostKeyQuestion {
                        host: self.host.clone(),
                        port: self.port,
                        key_type: known_hosts::key_type(&plain),
                        fingerprint_sha256: known_hosts::fingerprint(&plain),
                        status: HostKeyStatus::Revoked {
                            known_hosts_file: file,
                            line,
                        },
                    };
                    self.refuse(question, HostKeyRefusal::Revoked)
                } else if self.accept_certificate(&known, cert) {
                    true
                } else {
                    let key = PublicKey::new(cert.public_key().clone(), "");
                    self.check_key(&key).await
                }
            }
        };
        self.shared.host_key_ok.store(ok, Ordering::SeqCst);
        Ok(ok)
    }

    async fn auth_banner(
        &mut self,
        banner: &str,
        _session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        self.prompter.banner(banner);
        Ok(())
    }
}

/// An authenticated SSH connection (possibly through ProxyJump hops).
pub struct SshConnection {
    pub(crate) handle: Handle<ClientHandler>,
    /// Jump hosts, kept alive for as long as the tunnel is needed (outermost first).
    _hops: Vec<Handle<ClientHandler>>,
    /// `ProxyCommand` processes carrying the first hop's stream (killed on drop).
    _proxies: Vec<ProxyChild>,
    pub(crate) resolved: ResolvedHost,
    pub(crate) prompter: Arc<dyn Prompter>,
}

impl std::fmt::Debug for SshConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshConnection")
            .field("host", &self.resolved.hostname)
            .field("port", &self.resolved.port)
            .field("user", &self.resolved.user)
            .finish()
    }
}

impl SshConnection {
    /// Host name dialled (after `HostName`).
    pub fn host(&self) -> &str {
        &self.resolved.hostname
    }

    /// Port dialled.
    pub fn port(&self) -> u16 {
        self.resolved.port
    }

    /// Remote user.
    pub fn user(&self) -> &str {
        &self.resolved.user
    }

    /// Every resolved setting of this connection.
    pub fn resolved(&self) -> &ResolvedHost {
        &self.resolved
    }

    /// The prompter this connection reports to.
    pub fn prompter(&self) -> &Arc<dyn Prompter> {
        &self.prompter
    }

    /// True once the transport is gone (remote closed, network dead, keepalive expired).
    pub fn is_closed(&self) -> bool {
        self.handle.is_closed()
    }

    /// Close the connection politely.
    pub async fn disconnect(&self) {
        let _ = self
            .handle
            .disconnect(russh::Disconnect::ByApplication, "bye", "en")
            .await;
    }
}

/// The same key type for host-key negotiation purposes: any RSA signature hash, an ECDSA
/// key of the same curve, otherwise the same algorithm.
fn same_key_type(a: &Algorithm, b: &Algorithm) -> bool {
    match (a, b) {
        (Algorithm::Rsa { .. }, Algorithm::Rsa { .. }) => true,
        _ => a == b,
    }
}

/// Host-key algorithms to ask for, ordered like OpenSSH's `order_hostkeyalgs`: when the
/// first default algorithm's key type is on record the default order stays; otherwise the
/// algorithms whose key type is on record for this host come first (in default order), so
/// a server holding several keys shows the one we can check. With a `@cert-authority` entry
/// for the host, certificate algorithms are asked for ahead of plain keys.
pub(crate) fn preferred_algorithms(known: &KnownHosts, host: &str, port: u16) -> Preferred {
    let defaults: &[Algorithm] = &Preferred::DEFAULT.key;
    let on_record = known.known_algorithms(host, port);
    let is_known = |a: &Algorithm| on_record.iter().any(|k| same_key_type(k, a));
    let key: Vec<Algorithm> = match defaults.first() {
        Some(best) if is_known(best) => defaults.to_vec(),
        _ => {
            let (first, last): (Vec<&Algorithm>, Vec<&Algorithm>) =
                defaults.iter().partition(|a| is_known(a));
            first.into_iter().chain(last).cloned().collect()
        }
    };
    let host_key_certificates: Vec<Algorithm> = if known.has_cert_authority(host, port) {
        key.clone()
    } else {
        Vec::new()
    };
    Preferred {
        key: Cow::Owned(key),
        host_key_certificates: Cow::Owned(host_key_certificates),
        ..Preferred::DEFAULT
    }
}

fn client_config(r: &ResolvedHost, known_hosts_files: &[PathBuf]) -> Arc<client::Config> {
    let known = KnownHosts::load(known_hosts_files);
    Arc::new(client::Config {
        keepalive_interval: r.server_alive_interval,
        keepalive_max: r.server_alive_count_max as usize,
        nodelay: true,
        preferred: {
            let (host, port) = known_hosts_name(r);
            preferred_algorithms(&known, &host, port)
        },
        ..Default::default()
    })
}

/// The name and port a host's keys are recorded under: `HostKeyAlias` when set (as OpenSSH,
/// without a port), else the host name and port dialled.
fn known_hosts_name(r: &ResolvedHost) -> (String, u16) {
    match &r.host_key_alias {
        Some(alias) => (alias.clone(), 22),
        None => (r.hostname.clone(), r.port),
    }
}

fn handler_for(
    r: &ResolvedHost,
    prompter: &Arc<dyn Prompter>,
) -> (ClientHandler, Arc<HandlerShared>) {
    let shared = Arc::new(HandlerShared::default());
    let mut files = r.user_known_hosts_files.clone();
    files.extend(r.global_known_hosts_files.iter().cloned());
    let handler = ClientHandler {
        host: known_hosts_name(r).0,
        port: known_hosts_name(r).1,
        known_hosts_files: files,
        append_file: r.user_known_hosts_files.first().cloned(),
        strict: r.strict_host_key_checking,
        hash_known_hosts: r.hash_known_hosts,
        batch_mode: r.batch_mode,
        prompter: prompter.clone(),
        shared: shared.clone(),
    };
    (handler, shared)
}

/// The byte stream one hop runs over.
enum Transport {
    Tcp,
    Tunnel(russh::Channel<client::Msg>),
    Proxy(tokio::io::Join<tokio::process::ChildStdout, tokio::process::ChildStdin>),
}

async fn dial_hop(
    r: &ResolvedHost,
    transport: Transport,
    prompter: &Arc<dyn Prompter>,
    cache: &CredentialCache,
) -> Result<Handle<ClientHandler>, BootstrapError> {
    let (handler, shared) = handler_for(r, prompter);
    let config = client_config(r, &handler.known_hosts_files);
    let host = r.hostname.clone();
    prompter.progress(
        Stage::Connect,
        &format!(
            "connecting to {}",
            known_hosts::host_port_name(&host, r.port)
        ),
        None,
    );
    let kex_limit = r.connect_timeout.unwrap_or(DEFAULT_KEX_TIMEOUT);
    let fut: std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Handle<ClientHandler>, russh::Error>> + Send>,
    > = match transport {
        Transport::Tcp => {
            let tcp_limit = r.connect_timeout.unwrap_or(DEFAULT_TCP_TIMEOUT);
            let addr = (host.as_str(), r.port);
            let stream =
                match tokio::time::timeout(tcp_limit, tokio::net::TcpStream::connect(addr)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        return Err(BootstrapError::Connect {
                            host: host.clone(),
                            port: r.port,
                            reason: e.to_string(),
                        })
                    }
                    Err(_) => {
                        return Err(BootstrapError::Timeout {
                            stage: Stage::Connect,
                            host: host.clone(),
                            secs: tcp_limit.as_secs(),
                        })
                    }
                };
            let _ = stream.set_nodelay(true);
            Box::pin(client::connect_stream(config, stream, handler))
        }
        Transport::Tunnel(ch) => {
            Box::pin(client::connect_stream(config, ch.into_stream(), handler))
        }
        Transport::Proxy(stream) => Box::pin(client::connect_stream(config, stream, handler)),
    };
    prompter.progress(Stage::Kex, "key exchange", None);
    let mut fut = fut;
    let result = loop {
        match tokio::time::timeout(kex_limit, &mut fut).await {
            Ok(r) => break r,
            Err(_) if shared.prompted.load(Ordering::SeqCst) => continue,
            Err(_) => {
                return Err(BootstrapError::Timeout {
                    stage: Stage::Kex,
                    host: host.clone(),
                    secs: kex_limit.as_secs(),
                })
            }
        }
    };
    let mut handle = match result {
        Ok(h) => h,
        Err(e) => {
            let refusal = shared.refusal.lock().ok().and_then(|mut s| s.take());
            if let Some(err) = refusal {
                return Err(err);
            }
            return Err(BootstrapError::Kex {
                host: host.clone(),
                reason: e.to_string(),
            });
        }
    };
    if !shared.host_key_ok.load(Ordering::SeqCst) {
        // russh only completes the handshake after check_server_key said yes; this guards the
        // invariant that no credential is ever sent before the host key was accepted.
        return Err(BootstrapError::Kex {
            host,
            reason: "handshake finished without a host key check".into(),
        });
    }
    prompter.progress(Stage::Auth, &format!("authenticating as {}", r.user), None);
    crate::auth::authenticate(&mut handle, r, prompter.as_ref(), cache).await?;
    Ok(handle)
}

/// Connect to `dest` with OpenSSH-style `opts`, asking the user through `prompter`; secrets
/// that worked are remembered in the process-wide [`CredentialCache::global`].
pub async fn connect(
    dest: &Destination,
    opts: &SshOptions,
    prompter: Arc<dyn Prompter>,
) -> Result<SshConnection, BootstrapError> {
    connect_with_cache(dest, opts, prompter, CredentialCache::global()).await
}

/// [`connect`] with an explicit credential cache.
pub async fn connect_with_cache(
    dest: &Destination,
    opts: &SshOptions,
    prompter: Arc<dyn Prompter>,
    cache: &CredentialCache,
) -> Result<SshConnection, BootstrapError> {
    let resolved = opts.resolve(dest)?;
    let mut proxies: Vec<ProxyChild> = Vec::new();
    let hop_opts = opts.for_jump_host();
    let mut hops: Vec<Handle<ClientHandler>> = Vec::new();
    for jump in &resolved.proxy_jump {
        let jd = Destination {
            user: jump
                .user
                .as_deref()
                .map(|u| expand_proxy_tokens(&resolved, "ProxyJump", u))
                .transpose()?,
            host: expand_proxy_tokens(&resolved, "ProxyJump", &jump.host)?,
            port: jump.port,
            path: None,
        };
        let mut jr = hop_opts.resolve(&jd)?;
        // A hop's own ProxyJump would recurse; the destination's list already orders hops.
        jr.proxy_jump.clear();
        let transport = match (hops.last(), jr.proxy_command.clone()) {
            // Only the first hop is reached by its own ProxyCommand (OpenSSH reaches later
            // hops with `-J`, which overrides theirs).
            (None, Some(cmd)) => {
                let (child, t) = spawn_proxy(&jr, &cmd)?;
                proxies.push(child);
                t
            }
            (None, None) => Transport::Tcp,
            (Some(prev), _) => Transport::Tunnel(open_tunnel(prev, &jr.hostname, jr.port).await?),
        };
        let h = dial_hop(&jr, transport, &prompter, cache).await?;
        hops.push(h);
    }
    let transport = match (hops.last(), resolved.proxy_command.clone()) {
        (None, Some(cmd)) => {
            let (child, t) = spawn_proxy(&resolved, &cmd)?;
            proxies.push(child);
            t
        }
        (None, None) => Transport::Tcp,
        (Some(prev), _) => {
            Transport::Tunnel(open_tunnel(prev, &resolved.hostname, resolved.port).await?)
        }
    };
    let handle = dial_hop(&resolved, transport, &prompter, cache).await?;
    Ok(SshConnection {
        handle,
        _hops: hops,
        _proxies: proxies,
        resolved,
        prompter,
    })
}

/// A running `ProxyCommand`; held only so that it is killed when the connection is dropped.
struct ProxyChild {
    _child: tokio::process::Child,
}

/// `%h %k %n %p %r %%` of the destination `r`, as OpenSSH expands them in `ProxyCommand` and
/// (because it turns ProxyJump into a proxy command) in `ProxyJump` hops.
fn expand_proxy_tokens(r: &ResolvedHost, key: &str, value: &str) -> Result<String, BootstrapError> {
    let port = r.port.to_string();
    let key_alias = r.host_key_alias.clone().unwrap_or_else(|| r.alias.clone());
    let tokens = [
        ('h', r.hostname.as_str()),
        ('k', key_alias.as_str()),
        ('n', r.alias.as_str()),
        ('p', port.as_str()),
        ('r', r.user.as_str()),
    ];
    crate::config::expand(value, &tokens, false).map_err(|reason| {
        BootstrapError::Config(crate::config::ConfigError::Expand {
            key: key.into(),
            value: value.to_string(),
            reason,
        })
    })
}

/// Start `ProxyCommand` for `r` as OpenSSH does: `exec CMD` with `%h %k %n %p %r %%` expanded,
/// run by `$SHELL -c` (else `/bin/sh`; `cmd.exe /c` on Windows, see `platform::shell`); its
/// stdin/stdout carry the SSH stream. Its stderr is
/// logged, never written to the terminal (the TUI owns it).
fn spawn_proxy(r: &ResolvedHost, cmd: &str) -> Result<(ProxyChild, Transport), BootstrapError> {
    let line = crate::platform::shell::proxy_command_line(crate::platform::Os::THIS, cmd);
    let command = expand_proxy_tokens(r, "ProxyCommand", &line)?;
    let (shell, mut proxy) = crate::platform::shell::shell_command(&command);
    let mut child = proxy
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| BootstrapError::Connect {
            host: r.hostname.clone(),
            port: r.port,
            reason: format!("cannot start ProxyCommand '{command}' with {shell}: {e}"),
        })?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(BootstrapError::Connect {
            host: r.hostname.clone(),
            port: r.port,
            reason: "ProxyCommand started without pipes".into(),
        });
    };
    if let Some(stderr) = child.stderr.take() {
        let host = r.hostname.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt as _;
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::warn!(host = %host, "ProxyCommand: {line}");
            }
        });
    }
    Ok((
        ProxyChild { _child: child },
        Transport::Proxy(tokio::io::join(stdout, stdin)),
    ))
}

async fn open_tunnel(
    prev: &Handle<ClientHandler>,
    host: &str,
    port: u16,
) -> Result<russh::Channel<client::Msg>, BootstrapError> {
    prev.channel_open_direct_tcpip(host, u32::from(port), "127.0.0.1", 0)
        .await
        .map_err(|e| BootstrapError::Connect {
            host: host.to_string(),
            port,
            reason: format!(
                "the jump host refused to open a tunnel ({e}); ProxyJump needs AllowTcpForwarding on the jump host"
            ),
        })
}
