//! Which TCP ports a set of processes listens on, from `/proc` (Linux): the pure parsers
//! ([`parse_net_tcp`], [`parse_stat`], [`socket_inode`], [`descendants`]) and the one
//! function that reads the files ([`scan`]).
//!
//! A socket is found from the process, not from its output: `/proc/<pid>/fd/*` links name
//! socket inodes (`socket:[123]`), and `/proc/<pid>/net/tcp{,6}` (the tables of that
//! process's network namespace) list the sockets in `LISTEN` state with their inode.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use reasonix_forward::ports::HostPort;

/// One listening socket from a `/proc/net/tcp{,6}` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    /// Local address.
    pub addr: IpAddr,
    /// Local port.
    pub port: u16,
    /// Socket inode.
    pub inode: u64,
}

/// The `LISTEN` (state `0A`) sockets of a `/proc/net/tcp` (`v6` false) or `tcp6` table.
/// Lines that do not parse are skipped (the header, a truncated last line).
pub fn parse_net_tcp(text: &str, v6: bool) -> Vec<Listen> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 || f[3] != "0A" {
                return None;
            }
            let (addr, port) = f[1].split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let addr = if v6 { hex_v6(addr)? } else { hex_v4(addr)? };
            let inode = f[9].parse().ok()?;
            Some(Listen { addr, port, inode })
        })
        .collect()
}

/// `0100007F` -> 127.0.0.1 on a little-endian machine: the kernel prints the address's
/// bytes read as one number in host byte order.
fn hex_v4(s: &str) -> Option<IpAddr> {
    let n = u32::from_str_radix(s, 16).ok()?;
    Some(IpAddr::V4(Ipv4Addr::from(n.to_ne_bytes())))
}

/// Four 32-bit words, each in host byte order.
fn hex_v6(s: &str) -> Option<IpAddr> {
    if s.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for w in 0..4 {
        let n = u32::from_str_radix(&s[w * 8..w * 8 + 8], 16).ok()?;
        bytes[w * 4..w * 4 + 4].copy_from_slice(&n.to_ne_bytes());
    }
    Some(IpAddr::V6(Ipv6Addr::from(bytes)))
}

/// `(ppid, comm)` from the text of `/proc/<pid>/stat` (`pid (comm) S ppid ...`; the command
/// may hold spaces and parentheses, so it ends at the last `)`).
pub fn parse_stat(text: &str) -> Option<(u32, String)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let mut rest = text.get(close + 1..)?.split_whitespace();
    let _state = rest.next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((ppid, comm))
}

/// The inode of a `/proc/<pid>/fd/N` link target `socket:[123]`.
pub fn socket_inode(target: &str) -> Option<u64> {
    target
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Every process below `root` (not `root` itself), from `(pid, ppid)` pairs.
pub fn descendants(parents: &HashMap<u32, u32>, root: u32) -> HashSet<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, &ppid) in parents {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = HashSet::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if c != root && out.insert(c) {
                stack.push(c);
            }
        }
    }
    out
}

/// Whether the daemon reaches a listener on `addr` through its own loopback.
pub fn reachable_on_loopback(addr: IpAddr) -> bool {
    addr.is_loopback() || addr.is_unspecified()
}

/// The TCP ports that processes below `root` listen on, read from `proc` (normally
/// `/proc`), by port (one entry per port: an IPv4 listener before an IPv6 one). `own_netns`
/// is the daemon's network namespace (`/proc/self/ns/net` link); a listener in another
/// namespace (the sandbox's `--unshare-net`) is announced but marked unreachable.
pub fn scan(proc: &Path, root: u32, own_netns: Option<&str>) -> Vec<HostPort> {
    let mut parents = HashMap::new();
    let mut comms = HashMap::new();
    let Ok(dir) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some((ppid, comm)) = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .as_deref()
            .and_then(parse_stat)
        {
            parents.insert(pid, ppid);
            comms.insert(pid, comm);
        }
    }
    let mine = descendants(&parents, root);
    // Socket inode -> pid, and one pid per network namespace to read its tables through.
    let mut owner: HashMap<u64, u32> = HashMap::new();
    let mut netns: BTreeMap<String, u32> = BTreeMap::new();
    for &pid in &mine {
        let base = proc.join(pid.to_string());
        let Ok(fds) = std::fs::read_dir(base.join("fd")) else {
            continue;
        };
        let mut any = false;
        for fd in fds.flatten() {
            if let Some(inode) = std::fs::read_link(fd.path())
                .ok()
                .and_then(|t| socket_inode(&t.to_string_lossy()))
            {
                owner.entry(inode).or_insert(pid);
                any = true;
            }
        }
        if any {
            if let Ok(ns) = std::fs::read_link(base.join("ns/net")) {
                netns
                    .entry(ns.to_string_lossy().into_owned())
                    .or_insert(pid);
            }
        }
    }
    let mut found: BTreeMap<(u16, bool), HostPort> = BTreeMap::new();
    for (ns, reader) in &netns {
        let shared = own_netns.is_none_or(|own| own == ns);
        for (file, v6) in [("tcp", false), ("tcp6", true)] {
            let path = proc.join(reader.to_string()).join("net").join(file);
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            for l in parse_net_tcp(&text, v6) {
                let Some(&pid) = owner.get(&l.inode) else {
                    continue;
                };
                let note = if !shared {
                    Some("it listens inside the sandbox's own network namespace ([sandbox] network = false), which the daemon cannot reach".to_string())
                } else if !reachable_on_loopback(l.addr) {
                    Some(format!(
                        "it listens on {} only, not on the loopback; add it by hand to forward it",
                        l.addr
                    ))
                } else {
                    None
                };
                found.entry((l.port, v6)).or_insert(HostPort {
                    port: l.port,
                    addr: l.addr.to_string(),
                    pid,
                    command: comms.get(&pid).cloned().unwrap_or_default(),
                    loopback: note.is_none(),
                    note,
                });
            }
        }
    }
    // One entry per port: the first reachable one, else the first.
    let mut by_port: BTreeMap<u16, HostPort> = BTreeMap::new();
    for ((port, _), p) in found {
        match by_port.get(&port) {
            Some(prev) if prev.loopback || !p.loopback => {}
            _ => {
                by_port.insert(port, p);
            }
        }
    }
    by_port.into_values().collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n   1: 0100007F:1F91 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000  1000        0 4243 1 0000000000000000 20 4 30 10 -1\n   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99 1 0000000000000000 100 0 0 10 0\n   3: 0500000A:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1 0000000000000000 100 0 0 10 0\n";

    #[test]
    fn listen_lines_of_tcp_are_parsed_and_others_skipped() {
        let l = parse_net_tcp(TCP, false);
        assert_eq!(
            l,
            vec![
                Listen {
                    addr: "127.0.0.1".parse().unwrap(),
                    port: 8080,
                    inode: 4242
                },
                Listen {
                    addr: "0.0.0.0".parse().unwrap(),
                    port: 22,
                    inode: 99
                },
                Listen {
                    addr: "10.0.0.5".parse().unwrap(),
                    port: 80,
                    inode: 77
                },
            ]
        );
    }

    #[test]
    fn tcp6_addresses_are_parsed() {
        let text = "header\n   0: 00000000000000000000000001000000:1435 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 555 1 0 100 0 0 10 0\n   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 556 1 0 100 0 0 10 0\n";
        let l = parse_net_tcp(text, true);
        assert_eq!(l[0].addr, "::1".parse::<IpAddr>().unwrap());
        assert_eq!(l[0].port, 5173);
        assert_eq!(l[1].addr, "::".parse::<IpAddr>().unwrap());
        assert!(reachable_on_loopback(l[0].addr) && reachable_on_loopback(l[1].addr));
        assert!(!reachable_on_loopback("10.0.0.5".parse().unwrap()));
    }

    #[test]
    fn stat_with_a_command_holding_parens_and_spaces() {
        let (ppid, comm) = parse_stat("123 (my (odd) cmd) S 77 123 123 0 -1").unwrap();
        assert_eq!((ppid, comm.as_str()), (77, "my (odd) cmd"));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(socket_inode("socket:[991]"), Some(991));
        assert_eq!(socket_inode("pipe:[991]"), None);
        assert_eq!(socket_inode("/dev/null"), None);
    }

    #[test]
    fn descendants_follow_the_tree_and_leave_out_the_root_and_strangers() {
        let parents: HashMap<u32, u32> = [(10, 1), (11, 10), (12, 11), (13, 10), (20, 1), (21, 20)]
            .into_iter()
            .collect();
        let d = descendants(&parents, 10);
        assert_eq!(d, [11, 12, 13].into_iter().collect());
    }

    /// Real processes: a child of this test that listens on the loopback is found with its
    /// port, address and command; a process that is not our descendant (the listener's
    /// parent is pid 1's tree as far as a scan rooted at the child is concerned) is not.
    #[test]
    fn a_real_child_listener_is_found_from_proc() {
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import socket,sys,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\ntime.sleep(60)",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let port: u16 = line.trim().parse().unwrap();
        let own = std::fs::read_link("/proc/self/ns/net")
            .ok()
            .map(|p| p.to_string_lossy().into_owned());
        let found = scan(Path::new("/proc"), std::process::id(), own.as_deref());
        let p = found.iter().find(|p| p.port == port);
        let scan_of_child = scan(Path::new("/proc"), child.id(), own.as_deref());
        let _ = child.kill();
        let _ = child.wait();
        let p = p.unwrap_or_else(|| panic!("port {port} not in {found:?}"));
        assert_eq!(p.pid, child.id());
        assert_eq!(p.addr, "127.0.0.1");
        assert!(p.loopback && p.note.is_none(), "{p:?}");
        assert!(p.command.starts_with("python"), "{p:?}");
        assert!(
            !scan_of_child.iter().any(|p| p.port == port),
            "the listener is not a descendant of itself: {scan_of_child:?}"
        );
    }
}
