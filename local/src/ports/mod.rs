//! Forwarded ports, laptop side (issue #36 §1).
//!
//! The host announces the TCP ports its workspace's processes listen on
//! ([`reasonix_forward::proto::Notification::Ports`]); [`Forwards`] listens on this laptop's
//! `127.0.0.1` at the same port number (or the next free one, said in the notice) and
//! carries every accepted connection over the link as a port channel to the host's
//! loopback ([`reasonix_forward::ports::splice`]). The channel primitive gives each
//! connection credit backpressure, half-close, and resume with replay when the link drops
//! and comes back; the listeners stay while the link is down, and a connection accepted
//! during a drop waits up to [`PortSettings::connect_wait`] for the link and is then closed.
//!
//! Safe by default: only ports the host found reachable on its loopback are forwarded on
//! their own; any other host address only by [`Forwards::add`] (the user's `/ports add`);
//! the listeners bind loopback only; a port the user stopped stays stopped for the life of
//! this process (a later announcement does not restart it).

mod config;
mod ui;

pub use config::PortsFile;
pub use ui::{command, open_browser};

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use reasonix_forward::channel::ChannelOpen;
use reasonix_forward::ports::{is_loopback_host, splice, HostPort, PortOpen, PORT_WINDOW};
use reasonix_forward::sync::LockExt;
use tokio::net::TcpListener;

use reasonix_forward::proto::{Event, EventKind, Request, Response};
use reasonix_forward::rpc::Rpc;
use tokio::sync::mpsc;

use crate::client::{Client, ClientEvent};

/// How many port numbers after a taken one are tried before asking the system for any.
const NEXT_FREE_TRIES: u16 = 20;

/// What the user configured (`[ports]`), with defaults.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PortSettings {
    /// Forward announced loopback ports on their own.
    pub auto: bool,
    /// Host ports never forwarded on their own.
    pub ignore: BTreeSet<u16>,
    /// Fixed laptop port for a host port.
    pub map: BTreeMap<u16, u16>,
    /// How long a connection accepted while the link is down waits for it.
    pub connect_wait: Duration,
}

impl Default for PortSettings {
    fn default() -> Self {
        PortSettings {
            auto: true,
            ignore: BTreeSet::new(),
            map: BTreeMap::new(),
            connect_wait: Duration::from_secs(10),
        }
    }
}

/// Why a forward exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The host announced the port.
    Auto,
    /// The user added it.
    User,
}

/// One forward as the user sees it (`/ports`, `reasonix ports`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardInfo {
    /// Where connections go on the host.
    pub target: PortOpen,
    /// The laptop port listened on (127.0.0.1).
    pub local: u16,
    /// Why it exists.
    pub source: Source,
    /// The host process, when announced.
    pub command: String,
}

impl ForwardInfo {
    /// The URL to open in the browser.
    pub fn url(&self) -> String {
        format!("http://localhost:{}", self.local)
    }
}

struct Forward {
    info: ForwardInfo,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

#[derive(Default)]
struct State {
    /// By host port (auto) or by "host:port" (user).
    live: BTreeMap<String, Forward>,
    /// Host ports the user stopped.
    stopped: BTreeSet<u16>,
    /// Announced ports that are not forwarded, already told about.
    noted: BTreeSet<u16>,
}

/// The laptop's forwards of one client. Cheap to share.
pub struct Forwards {
    settings: PortSettings,
    client: OnceLock<Client>,
    state: Mutex<State>,
}

fn key(t: &PortOpen) -> String {
    if t.is_loopback() {
        t.port.to_string()
    } else {
        format!("{}:{}", t.host, t.port)
    }
}

impl Forwards {
    /// No forwards yet.
    pub fn new(settings: PortSettings) -> Arc<Forwards> {
        Arc::new(Forwards {
            settings,
            client: OnceLock::new(),
            state: Mutex::new(State::default()),
        })
    }

    /// The client whose link carries the connections (set once, by [`Client::start`]).
    pub fn attach(&self, client: Client) {
        let _ = self.client.set(client);
    }

    /// The forwards now, by laptop port.
    pub fn list(&self) -> Vec<ForwardInfo> {
        let mut l: Vec<ForwardInfo> = self
            .state
            .lock_or_recover()
            .live
            .values()
            .map(|f| f.info.clone())
            .collect();
        l.sort_by_key(|f| f.local);
        l
    }

    /// The host announced `ports` (the whole list): start forwards for new loopback ports,
    /// end the automatic ones whose port is gone. Returns notices for the user.
    pub async fn update(self: &Arc<Self>, ports: Vec<HostPort>) -> Vec<String> {
        let mut notices = Vec::new();
        let announced: BTreeSet<u16> = ports.iter().map(|p| p.port).collect();
        // Gone on the host: the automatic forward ends (a user's forward stays).
        let gone: Vec<Forward> = {
            let mut st = self.state.lock_or_recover();
            st.noted.retain(|p| announced.contains(p));
            let keys: Vec<String> = st
                .live
                .iter()
                .filter(|(_, f)| {
                    f.info.source == Source::Auto && !announced.contains(&f.info.target.port)
                })
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| st.live.remove(k)).collect()
        };
        for f in gone {
            notices.push(format!(
                "port {} on the host closed; stopped forwarding localhost:{}",
                f.info.target.port, f.info.local
            ));
        }
        for p in ports {
            let (skip, noted) = {
                let st = self.state.lock_or_recover();
                (
                    st.live.contains_key(&p.port.to_string())
                        || st.stopped.contains(&p.port)
                        || self.settings.ignore.contains(&p.port)
                        || !self.settings.auto,
                    st.noted.contains(&p.port),
                )
            };
            if skip {
                continue;
            }
            if !p.loopback {
                if !noted {
                    self.state.lock_or_recover().noted.insert(p.port);
                    notices.push(format!(
                        "port {} on the host ({}) is not forwarded: {}",
                        p.port,
                        p.command,
                        p.note
                            .as_deref()
                            .unwrap_or("it is not on the host's loopback")
                    ));
                }
                continue;
            }
            let host = if p.addr.contains(':') {
                "::1"
            } else {
                "127.0.0.1"
            };
            let target = PortOpen {
                host: host.into(),
                port: p.port,
            };
            let want = self.settings.map.get(&p.port).copied().unwrap_or(p.port);
            match self
                .start(target, want, Source::Auto, p.command.clone())
                .await
            {
                Ok(info) => notices.push(started_notice(&info, want)),
                Err(e) => notices.push(e),
            }
        }
        notices
    }

    /// The user adds a forward: `spec` is `[HOST:]PORT[=LOCAL]` ([`parse_spec`]). Any host
    /// address is allowed here:
    /// this is the explicit action that forwarding beyond the host's loopback needs.
    pub async fn add(self: &Arc<Self>, spec: &str) -> Result<String, String> {
        let (target, local) = parse_spec(spec)?;
        self.state.lock_or_recover().stopped.remove(&target.port);
        if self
            .state
            .lock_or_recover()
            .live
            .contains_key(&key(&target))
        {
            return Err(format!("{} is forwarded already", key(&target)));
        }
        let want = local.unwrap_or(target.port);
        let info = self
            .start(target, want, Source::User, String::new())
            .await?;
        Ok(started_notice(&info, want))
    }

    /// The user stops the forward of host port (or laptop port) `port`; an announced port
    /// stays stopped until the user adds it again.
    pub fn stop(&self, port: u16) -> Result<String, String> {
        let mut st = self.state.lock_or_recover();
        let k = st
            .live
            .iter()
            .find(|(_, f)| f.info.target.port == port || f.info.local == port)
            .map(|(k, _)| k.clone())
            .ok_or_else(|| format!("no forward of port {port}"))?;
        let f = st.live.remove(&k).expect("found above");
        st.stopped.insert(f.info.target.port);
        Ok(format!(
            "stopped forwarding localhost:{} (host {}:{}); it stays stopped until /ports add {}",
            f.info.local, f.info.target.host, f.info.target.port, f.info.target.port
        ))
    }

    async fn start(
        self: &Arc<Self>,
        target: PortOpen,
        want: u16,
        source: Source,
        command: String,
    ) -> Result<ForwardInfo, String> {
        let listener = bind_near(want).await.map_err(|e| {
            format!(
                "could not forward port {} of the host: no free laptop port near {want}: {e}",
                target.port
            )
        })?;
        let local = listener.local_addr().map(|a| a.port()).unwrap_or(want);
        let info = ForwardInfo {
            target: target.clone(),
            local,
            source,
            command,
        };
        let me = Arc::downgrade(self);
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let Some(me) = me.upgrade() else { return };
                let target = target.clone();
                tokio::spawn(async move { me.carry(stream, target).await });
            }
        });
        self.state.lock_or_recover().live.insert(
            key(&info.target),
            Forward {
                info: info.clone(),
                accept,
            },
        );
        Ok(info)
    }

    /// One accepted connection: a port channel to `target`, carried at once (what the
    /// connection sends first crosses with the open when the host takes early data, so a
    /// request costs one round trip, not two); closed when the host refuses or when the
    /// host has not answered the open within [`PortSettings::connect_wait`] (the link is
    /// down).
    async fn carry(&self, stream: tokio::net::TcpStream, target: PortOpen) {
        let Some(client) = self.client.get() else {
            return;
        };
        let wait = self.settings.connect_wait;
        let open = client.open_channel_eager(ChannelOpen::Port(target.clone()), PORT_WINDOW);
        let (channel, acceptance) = match tokio::time::timeout(wait, open).await {
            Ok(Ok(opened)) => opened,
            Ok(Err(e)) => {
                tracing::info!(
                    "forwarded connection to {}:{} refused: {e}",
                    target.host,
                    target.port
                );
                return;
            }
            Err(_) => {
                tracing::info!(
                    "forwarded connection to {}:{} refused: the link stayed down for {} s",
                    target.host,
                    target.port,
                    wait.as_secs()
                );
                return;
            }
        };
        let handle = channel.tx.handle();
        let answered = async {
            match tokio::time::timeout(wait, acceptance.wait()).await {
                Ok(Ok(_)) => {}
                // The channel ends with the reason too; splice returns.
                Ok(Err(e)) => tracing::info!(
                    "forwarded connection to {}:{} refused: {e}",
                    target.host,
                    target.port
                ),
                Err(_) => {
                    let why = format!("the link stayed down for {} s", wait.as_secs());
                    tracing::info!(
                        "forwarded connection to {}:{} refused: {why}",
                        target.host,
                        target.port
                    );
                    handle.cancel(why);
                }
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            r = splice(stream, channel) => {
                if let Err(e) = r {
                    tracing::debug!(
                        "forwarded connection to {}:{} ended: {e}",
                        target.host,
                        target.port
                    );
                }
            }
            () = answered => {}
        }
    }
}

/// A notice for the front ends (shown like the host's notices).
pub fn notice(text: String) -> ClientEvent {
    ClientEvent::Event(Event {
        seq: 0,
        ts: String::new(),
        turn: 0,
        kind: EventKind::Notice { text },
    })
}

/// Watch the host's ports on a new link: ask for the list (the daemon then announces every
/// change on this link) and start its forwards. A daemon too old to know the request is
/// told about once.
pub async fn watch(rpc: Rpc, ports: Arc<Forwards>, events: mpsc::UnboundedSender<ClientEvent>) {
    match rpc.request(Request::WatchPorts).await {
        Ok(Response::Ports { ports: list }) => {
            for text in ports.update(list).await {
                let _ = events.send(notice(text));
            }
        }
        Ok(other) => tracing::warn!("unexpected answer to WatchPorts: {other:?}"),
        Err(e) => tracing::info!("the host does not announce its ports: {e}"),
    }
}

fn started_notice(info: &ForwardInfo, want: u16) -> String {
    let what = if info.command.is_empty() {
        String::new()
    } else {
        format!(" ({})", info.command)
    };
    let host = if is_loopback_host(&info.target.host) {
        format!("port {} on the host", info.target.port)
    } else {
        format!(
            "{}:{} on the host's network",
            info.target.host, info.target.port
        )
    };
    if info.local == want {
        format!("{host}{what} → {}", info.url())
    } else {
        format!(
            "{host}{what} → {} (laptop port {want} is taken, so {} is used)",
            info.url(),
            info.local
        )
    }
}

/// `[HOST:]PORT[=LOCAL]`.
pub fn parse_spec(spec: &str) -> Result<(PortOpen, Option<u16>), String> {
    let bad = || {
        format!("`{spec}` is not a port to forward: give PORT, HOST:PORT, or either with =LOCAL_PORT (e.g. 5173, 10.0.0.7:8080=18080)")
    };
    let spec = spec.trim();
    let (target, local) = match spec.split_once('=') {
        Some((t, l)) => (t, Some(l.trim().parse::<u16>().map_err(|_| bad())?)),
        None => (spec, None),
    };
    let (host, port) = match target.rsplit_once(':') {
        Some((h, p)) => (h.trim_start_matches('[').trim_end_matches(']'), p),
        None => ("127.0.0.1", target),
    };
    let port = port.trim().parse::<u16>().map_err(|_| bad())?;
    if port == 0 || host.is_empty() || local == Some(0) {
        return Err(bad());
    }
    Ok((
        PortOpen {
            host: host.to_string(),
            port,
        },
        local,
    ))
}

/// Listen on 127.0.0.1 at `want`, or the next free port after it, or any.
async fn bind_near(want: u16) -> std::io::Result<TcpListener> {
    let mut last = None;
    for p in (0..NEXT_FREE_TRIES).filter_map(|i| want.checked_add(i)) {
        match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, p))).await {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await {
        Ok(l) => Ok(l),
        Err(e) => Err(last.unwrap_or(e)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_say_what_to_give() {
        let (t, l) = parse_spec("5173").unwrap();
        assert_eq!((t.host.as_str(), t.port, l), ("127.0.0.1", 5173, None));
        let (t, l) = parse_spec("10.0.0.7:8080=18080").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, l),
            ("10.0.0.7", 8080, Some(18080))
        );
        let (t, _) = parse_spec("[::1]:9000").unwrap();
        assert_eq!(t.host, "::1");
        for bad in ["", "x", "0", "host:", "80=0", "80=x"] {
            let e = parse_spec(bad).unwrap_err();
            assert!(e.contains("HOST:PORT"), "{bad}: {e}");
        }
    }

    /// A taken laptop port makes the forward use the next free one and say so; a stopped
    /// port stays stopped when the host announces it again; a port gone on the host ends
    /// its forward.
    #[tokio::test]
    async fn next_free_port_stop_and_gone() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = taken.local_addr().unwrap().port();
        let f = Forwards::new(PortSettings::default());
        let announce = |port| HostPort {
            port,
            addr: "127.0.0.1".into(),
            pid: 1,
            command: "node".into(),
            loopback: true,
            note: None,
        };
        let n = f.update(vec![announce(port)]).await;
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].contains(&format!("laptop port {port} is taken")),
            "{n:?}"
        );
        let l = f.list();
        assert_eq!(l.len(), 1);
        assert_ne!(l[0].local, port);
        assert!(f.stop(port).unwrap().contains("stays stopped"));
        assert!(f.update(vec![announce(port)]).await.is_empty());
        assert!(f.list().is_empty(), "a stopped port was restarted");
        f.add(&port.to_string()).await.unwrap();
        assert_eq!(f.list().len(), 1, "adding it again starts it");
        assert!(f.update(vec![]).await.is_empty(), "a user's forward stays");
        let other = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let p2 = other.local_addr().unwrap().port();
        drop(other);
        f.update(vec![announce(p2)]).await;
        assert_eq!(f.list().len(), 2);
        let n = f.update(vec![]).await;
        assert!(n[0].contains("closed"), "{n:?}");
        assert_eq!(f.list().len(), 1);
        let far = HostPort {
            loopback: false,
            addr: "10.1.2.3".into(),
            note: Some("it listens on 10.1.2.3 only".into()),
            ..announce(p2)
        };
        let n = f.update(vec![far.clone()]).await;
        assert!(n[0].contains("not forwarded"), "{n:?}");
        assert!(f.update(vec![far]).await.is_empty(), "told once");
    }
}
