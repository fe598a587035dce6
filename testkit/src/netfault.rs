//! Network fault injection for reconnect tests: a private network namespace per test,
//! iptables faults inside it, and a delaying TCP proxy.
//!
//! Everything a fault test runs (sshd, the `reasonix` client, the mock provider, the proxy)
//! lives inside one namespace created by the test, so the iptables rules touch nothing else on
//! the machine. The namespace has only its own loopback (`127.0.0.1`).
//!
//! ```ignore
//! let ns = NetNs::create()?;
//! // Put this thread (and every thread and process it starts from now on) into the
//! // namespace; build the test's tokio runtime afterwards so its workers are inside too.
//! ns.enter_current_thread()?;
//! let sshd = Sshd::start(SshdConfig { netns: Some(ns.name().into()), ..Default::default() })?;
//! let fault = ns.fault(Fault::Blackhole, sshd.port())?;   // packets vanish, no RST
//! // ...
//! fault.lift()?;                                           // network restored
//! ```
//!
//! Why the caller's thread enters the namespace (`setns(2)`) instead of wrapping every
//! process in `ip netns exec`: the mock provider and the proxy are in-process tokio servers,
//! and a socket belongs to the namespace of the thread that created it. Threads and child
//! processes inherit the namespace of the thread that spawned them, so a runtime built after
//! [`NetNs::enter_current_thread`] keeps all its sockets inside. Child processes may still be
//! started with [`NetNs::command`] (`ip netns exec NAME …`), which works from any thread.
//!
//! Faults (verified on the CI kernel; `tc netem` is not available there, hence the proxy):
//! - [`Fault::Blackhole`]: `iptables -I INPUT -p tcp --dport P -j DROP` plus `--sport P`.
//! - [`Fault::Reset`]: the same match with `-j REJECT --reject-with tcp-reset`.
//! - [`Fault::Loss`]: `-m statistic --mode random --probability p -j DROP`, both directions.
//! - Latency: [`DelayProxy`], placed between the client and sshd.
//!
//! Needs root, `ip` (iproute2) and `iptables`.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// Run a command to completion; an error carries its output.
fn run(cmd: &mut Command) -> io::Result<String> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A network namespace `rxf_<random>` with its loopback up. Deleted on drop, after every
/// process still inside it (sshd session processes, a killed client's leftovers) is killed.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Create the namespace and bring its loopback up.
    pub fn create() -> io::Result<NetNs> {
        let name = format!("rxf_{:08x}", rand::random::<u32>());
        run(Command::new("ip").args(["netns", "add", &name]))?;
        let ns = NetNs { name };
        // On failure `ns` is dropped, which deletes the half-made namespace.
        ns.exec(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace name (for `SshdConfig::netns`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip netns exec NAME program`: a command that runs inside the namespace. `ip` execs
    /// into `program`, so the child's pid is the program's pid (a `kill -9` reaches it).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).arg(program);
        cmd
    }

    /// Run `argv` inside the namespace and wait for it; an error carries its output.
    pub fn exec(&self, argv: &[&str]) -> io::Result<String> {
        let (program, rest) = argv
            .split_first()
            .ok_or_else(|| io::Error::other("empty command"))?;
        run(self.command(program).args(rest))
    }

    /// Move the calling thread into the namespace (`setns(2)` on `/run/netns/NAME`).
    /// Threads and processes it starts afterwards are inside too; other threads are not
    /// affected. There is no way back for this thread: use a thread dedicated to the test.
    pub fn enter_current_thread(&self) -> io::Result<()> {
        let file = std::fs::File::open(format!("/run/netns/{}", self.name))?;
        // SAFETY: setns on a valid fd owned by `file` (alive for the call); it only changes
        // the network namespace of the calling thread.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Insert the iptables rules of `fault` for TCP port `port` (both directions). The
    /// returned guard removes exactly those rules when lifted or dropped.
    pub fn fault(&self, fault: Fault, port: u16) -> io::Result<FaultGuard<'_>> {
        let mut guard = FaultGuard {
            ns: self,
            rules: Vec::new(),
            since: Instant::now(),
        };
        for dir in ["--dport", "--sport"] {
            let mut rule: Vec<String> = ["INPUT", "-p", "tcp", dir, &port.to_string()]
                .iter()
                .map(|s| s.to_string())
                .collect();
            rule.extend(fault.target().iter().map(|s| s.to_string()));
            let mut argv = vec!["iptables", "-w", "-I"];
            argv.extend(rule.iter().map(String::as_str));
            self.exec(&argv)?;
            guard.rules.push(rule);
        }
        guard.since = Instant::now();
        Ok(guard)
    }

    /// Process ids inside the namespace (`ip netns pids`).
    pub fn pids(&self) -> Vec<i32> {
        run(Command::new("ip").args(["netns", "pids", &self.name]))
            .map(|s| {
                s.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Every process in this namespace was started by the test that owns it (sshd, its
        // session children, clients, host daemons); end them by pid so nothing outlives the
        // test, then remove the namespace.
        let me = std::process::id() as i32;
        for _ in 0..3 {
            let pids: Vec<i32> = self.pids().into_iter().filter(|p| *p != me).collect();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                // SAFETY: plain kill(2) of a pid listed in our own namespace.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A network fault on one TCP port, applied with iptables inside the namespace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Packets vanish (no RST, no ICMP): Wi-Fi gone, laptop asleep, NAT entry dropped.
    Blackhole,
    /// Every packet is answered with a TCP reset: the connection dies at once and new
    /// connections are refused.
    Reset,
    /// Each packet is dropped with this probability (0.0–1.0), in both directions.
    Loss(f64),
}

impl Fault {
    fn target(&self) -> Vec<String> {
        match self {
            Fault::Blackhole => vec!["-j".into(), "DROP".into()],
            // RSTs themselves pass: on loopback the reset sent to one side would otherwise
            // match the rule for the other direction and vanish, turning a reset into a
            // blackhole.
            Fault::Reset => vec![
                "!".into(),
                "--tcp-flags".into(),
                "RST".into(),
                "RST".into(),
                "-j".into(),
                "REJECT".into(),
                "--reject-with".into(),
                "tcp-reset".into(),
            ],
            Fault::Loss(p) => vec![
                "-m".into(),
                "statistic".into(),
                "--mode".into(),
                "random".into(),
                "--probability".into(),
                format!("{p}"),
                "-j".into(),
                "DROP".into(),
            ],
        }
    }
}

/// Active fault rules; removed by [`FaultGuard::lift`] or on drop.
#[derive(Debug)]
pub struct FaultGuard<'a> {
    ns: &'a NetNs,
    rules: Vec<Vec<String>>,
    since: Instant,
}

impl FaultGuard<'_> {
    /// When the rules were in place.
    pub fn since(&self) -> Instant {
        self.since
    }

    /// Remove the rules now (the network is restored when this returns).
    pub fn lift(mut self) -> io::Result<()> {
        self.remove()
    }

    fn remove(&mut self) -> io::Result<()> {
        let mut first_err = None;
        for rule in std::mem::take(&mut self.rules) {
            let mut argv = vec!["iptables", "-w", "-D"];
            argv.extend(rule.iter().map(String::as_str));
            if let Err(e) = self.ns.exec(&argv) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for FaultGuard<'_> {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// A TCP proxy on `127.0.0.1:<port>` that forwards to a target and delivers every chunk of
/// bytes `delay` after it arrived, in both directions (constant added latency; order and
/// throughput are kept). Stands in for `tc netem delay`, which this kernel lacks.
///
/// Each direction of a connection is a reader thread that stamps chunks and a writer thread
/// that releases them on time with `std::thread::sleep` (the kernel's high-resolution timer,
/// within tens of microseconds): tokio's timer rounds every wait up to its next millisecond
/// tick, which added about a millisecond each way to the configured latency.
///
/// Sockets belong to the namespace of the thread that creates them: start the proxy from a
/// runtime whose threads are inside the namespace (see [`NetNs::enter_current_thread`]).
pub struct DelayProxy {
    port: u16,
    delay_us: Arc<AtomicU64>,
    accept: AbortHandle,
    /// The sockets of every connection still being proxied, shut down on drop (which ends
    /// the threads serving them); a connection leaves the table when both its directions end.
    sockets: Kept,
}

/// Live proxied connections by id: the client and upstream sockets of each.
type Kept = Arc<Mutex<HashMap<u64, [std::net::TcpStream; 2]>>>;

impl DelayProxy {
    /// Listen on a free loopback port and forward every connection to `target`.
    pub async fn start(target: SocketAddr, delay: Duration) -> io::Result<DelayProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let sockets: Kept = Arc::default();
        let delay_us = Arc::new(AtomicU64::new(delay.as_micros() as u64));
        let kept = Arc::clone(&sockets);
        let d = Arc::clone(&delay_us);
        let accept = tokio::spawn(async move {
            let mut next_id = 0u64;
            while let Ok((client, _)) = listener.accept().await {
                let Ok(upstream) = TcpStream::connect(target).await else {
                    continue;
                };
                next_id += 1;
                if let Err(e) = proxy_connection(next_id, client, upstream, &d, &kept) {
                    eprintln!("delay proxy: a connection could not be set up: {e}");
                }
            }
        });
        Ok(DelayProxy {
            port,
            delay_us,
            accept: accept.abort_handle(),
            sockets,
        })
    }

    /// Change the added latency; applies to bytes read from now on (e.g. connect and
    /// install quickly, then slow the link down for the part under test).
    pub fn set_delay(&self, delay: Duration) {
        self.delay_us
            .store(delay.as_micros() as u64, Ordering::Relaxed);
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.accept.abort();
        for s in self
            .sockets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .flat_map(|(_, pair)| pair)
        {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Serve one proxied connection: both sockets become blocking std sockets, and each
/// direction gets its reader and writer threads ([`pipe`]). The connection is in `kept`
/// until both directions have ended.
fn proxy_connection(
    id: u64,
    client: TcpStream,
    upstream: TcpStream,
    delay_us: &Arc<AtomicU64>,
    kept: &Kept,
) -> io::Result<()> {
    let blocking = |s: TcpStream| -> io::Result<std::net::TcpStream> {
        let s = s.into_std()?;
        s.set_nonblocking(false)?;
        s.set_nodelay(true)?;
        Ok(s)
    };
    let (client, upstream) = (blocking(client)?, blocking(upstream)?);
    let halves = [
        (client.try_clone()?, upstream.try_clone()?),
        (upstream.try_clone()?, client.try_clone()?),
    ];
    kept.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, [client, upstream]);
    let live = Arc::new(AtomicU64::new(halves.len() as u64));
    for (from, to) in halves {
        let d = Arc::clone(delay_us);
        let (live, kept) = (Arc::clone(&live), Arc::clone(kept));
        std::thread::Builder::new()
            .name("delay-proxy".into())
            .spawn(move || {
                pipe(from, to, d);
                if live.fetch_sub(1, Ordering::AcqRel) == 1 {
                    kept.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                }
            })?;
    }
    Ok(())
}

/// Copy `from` to `to`, each chunk released `delay` after it was read. The reader stamps
/// chunks and a writer thread sleeps until each is due, so the delay does not slow
/// throughput; chunks go out in order, so a changed delay never reorders bytes.
fn pipe(mut from: std::net::TcpStream, mut to: std::net::TcpStream, delay_us: Arc<AtomicU64>) {
    use std::io::{Read, Write};
    let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = std::thread::Builder::new()
        .name("delay-proxy-out".into())
        .spawn(move || {
            while let Ok((due, bytes)) = rx.recv() {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                // An empty chunk marks EOF: shut this side down once it is due.
                if bytes.is_empty() {
                    let _ = to.shutdown(std::net::Shutdown::Write);
                    return;
                }
                if to.write_all(&bytes).is_err() {
                    return;
                }
            }
        });
    let Ok(writer) = writer else { return };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // A read error ends the direction like EOF does.
        let n = from.read(&mut buf).unwrap_or_default();
        let due = Instant::now() + Duration::from_micros(delay_us.load(Ordering::Relaxed));
        if tx.send((due, buf[..n].to_vec())).is_err() || n == 0 {
            break;
        }
    }
    let _ = writer.join();
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A TCP echo server on a free loopback port (in the namespace of the calling thread).
    async fn echo_server() -> SocketAddr {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 1024];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 || s.write_all(&b[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    #[test]
    fn netns_faults_and_delay_proxy() {
        let ns = NetNs::create().unwrap();
        let name = ns.name().to_string();
        ns.enter_current_thread().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            // An echo server inside the namespace.
            let echo_addr = echo_server().await;
            // The delay proxy adds about 2 x 150 ms per round trip.
            let proxy = DelayProxy::start(echo_addr, Duration::from_millis(150))
                .await
                .unwrap();
            let mut c = TcpStream::connect(("127.0.0.1", proxy.port()))
                .await
                .unwrap();
            let t0 = Instant::now();
            c.write_all(b"ping").await.unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"ping");
            assert!(
                t0.elapsed() >= Duration::from_millis(300),
                "{:?}",
                t0.elapsed()
            );

            // Reset: an established connection dies, with an error, not a hang.
            let mut direct = TcpStream::connect(echo_addr).await.unwrap();
            let fault = ns.fault(Fault::Reset, echo_addr.port()).unwrap();
            let _ = direct.write_all(b"x").await;
            let r = tokio::time::timeout(Duration::from_secs(5), direct.read(&mut b)).await;
            assert!(matches!(r, Ok(Err(_)) | Ok(Ok(0))), "{r:?}");
            fault.lift().unwrap();

            // Blackhole: no answer at all while it holds, the same connection works after.
            let mut c2 = TcpStream::connect(echo_addr).await.unwrap();
            let fault = ns.fault(Fault::Blackhole, echo_addr.port()).unwrap();
            c2.write_all(b"hole").await.unwrap();
            let r = tokio::time::timeout(Duration::from_millis(800), c2.read(&mut b)).await;
            assert!(r.is_err(), "a blackholed connection answered: {r:?}");
            let rules = ns.exec(&["iptables", "-S", "INPUT"]).unwrap();
            assert_eq!(rules.matches("-j DROP").count(), 2, "{rules}");
            fault.lift().unwrap();
            tokio::time::timeout(Duration::from_secs(10), c2.read_exact(&mut b))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(&b, b"hole");
            let rules = ns.exec(&["iptables", "-S", "INPUT"]).unwrap();
            assert!(!rules.contains("DROP"), "{rules}");
        });
        drop(rt);
        drop(ns);
        let list = run(Command::new("ip").args(["netns", "list"])).unwrap();
        assert!(!list.contains(&name), "{list}");
    }

    /// A connection both sides have closed leaves the proxy's table, so its sockets are
    /// closed at once and a long benchmark does not accumulate descriptors.
    #[test]
    fn a_closed_connection_releases_its_sockets() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let echo_addr = echo_server().await;
            let proxy = DelayProxy::start(echo_addr, Duration::from_millis(5))
                .await
                .unwrap();
            let live = || proxy.sockets.lock().unwrap().len();
            let mut conns = Vec::new();
            for _ in 0..3 {
                let mut c = TcpStream::connect(("127.0.0.1", proxy.port()))
                    .await
                    .unwrap();
                c.write_all(b"hi").await.unwrap();
                let mut b = [0u8; 2];
                c.read_exact(&mut b).await.unwrap();
                conns.push(c);
            }
            assert_eq!(live(), 3);
            drop(conns.pop());
            let t0 = Instant::now();
            while live() != 2 {
                assert!(t0.elapsed() < Duration::from_secs(10), "{} live", live());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // The others still work.
            for c in &mut conns {
                c.write_all(b"ok").await.unwrap();
                let mut b = [0u8; 2];
                c.read_exact(&mut b).await.unwrap();
                assert_eq!(&b, b"ok");
            }
            drop(conns);
            while live() != 0 {
                assert!(t0.elapsed() < Duration::from_secs(10), "{} live", live());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
    }
}
