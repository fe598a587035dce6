//! A real OpenSSH sshd on a loopback port with throwaway keys, plus throwaway host users.
//!
//! Needs root (the tests run as root on the CI box) and `/usr/sbin/sshd`, `ssh-keygen`,
//! `useradd`, `usermod`, `chpasswd`, `userdel`.
//!
//! ```ignore
//! let sshd = Sshd::start(SshdConfig::default())?;
//! let user = TestUser::create(&UserOptions::default())?;
//! let key = ClientKey::generate(laptop_dir.path(), None)?;
//! user.authorize(&key.public)?;
//! // connect to 127.0.0.1:sshd.port() as user.name with key.private,
//! // known_hosts line: sshd.known_hosts_line()
//! ```
//!
//! The sshd runs with `-D` (foreground) and `-E <log>`; it is ready when its log says
//! "Server listening". Port collisions (another test grabbed the port) are retried with a new
//! port. With [`SshdConfig::netns`] the sshd runs inside a network namespace
//! (`ip netns exec NAME`), for fault-injection tests.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How the sshd is configured.
#[derive(Debug, Clone)]
pub struct SshdConfig {
    /// `PasswordAuthentication`.
    pub password_auth: bool,
    /// `KbdInteractiveAuthentication`.
    pub kbd_interactive: bool,
    /// `UsePAM` (needed for keyboard-interactive with real passwords).
    pub use_pam: bool,
    /// `PubkeyAuthentication`.
    pub pubkey_auth: bool,
    /// `AllowTcpForwarding` (ProxyJump through this sshd needs it).
    pub allow_tcp_forwarding: bool,
    /// `AllowStreamLocalForwarding`.
    pub allow_stream_local_forwarding: bool,
    /// `AuthenticationMethods`, e.g. `keyboard-interactive,keyboard-interactive`.
    pub authentication_methods: Option<String>,
    /// Pre-authentication banner text (`Banner` file).
    pub banner: Option<String>,
    /// Extra raw `sshd_config` lines.
    pub extra: Vec<String>,
    /// Run inside this network namespace (must exist; loopback must be up).
    pub netns: Option<String>,
    /// Fixed port; `None` picks a free one (retrying on collisions).
    pub port: Option<u16>,
}

impl Default for SshdConfig {
    fn default() -> Self {
        Self {
            password_auth: false,
            kbd_interactive: false,
            use_pam: false,
            pubkey_auth: true,
            allow_tcp_forwarding: true,
            allow_stream_local_forwarding: true,
            authentication_methods: None,
            banner: None,
            extra: Vec::new(),
            netns: None,
            port: None,
        }
    }
}

/// A running sshd. Killed (and its temp dir removed) on drop.
#[derive(Debug)]
pub struct Sshd {
    dir: tempfile::TempDir,
    child: Child,
    port: u16,
    host_public: String,
    config: SshdConfig,
}

fn run(cmd: &mut Command) -> io::Result<String> {
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{:?} failed: {}{}",
            cmd,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn free_port() -> io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Generate an ed25519 key pair at `path` / `path.pub` (no passphrase unless given).
pub fn keygen(path: &Path, passphrase: Option<&str>) -> io::Result<String> {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(path.with_extension("pub"));
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-C", "reasonix-test", "-N"])
        .arg(passphrase.unwrap_or(""))
        .arg("-f")
        .arg(path))?;
    let mut pubpath = path.as_os_str().to_owned();
    pubpath.push(".pub");
    Ok(std::fs::read_to_string(PathBuf::from(pubpath))?
        .trim()
        .to_string())
}

impl Sshd {
    /// Start an sshd with `config`; waits until it listens.
    pub fn start(config: SshdConfig) -> io::Result<Sshd> {
        std::fs::create_dir_all("/run/sshd")?;
        let dir = tempfile::Builder::new().prefix("rx-sshd-").tempdir()?;
        // sshd refuses host keys in group/world-readable dirs only for the key itself, but
        // keep the dir private anyway.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let host_key = dir.path().join("ssh_host_ed25519_key");
        let host_public = keygen(&host_key, None)?;
        let mut last_err = None;
        for _attempt in 0..6 {
            let port = match (config.port, &config.netns) {
                (Some(p), _) => p,
                (None, None) => free_port()?,
                (None, Some(_)) => 20000 + rand::random::<u16>() % 40000,
            };
            match Self::spawn(&dir, &host_key, port, &config) {
                Ok(child) => {
                    return Ok(Sshd {
                        dir,
                        child,
                        port,
                        host_public,
                        config,
                    })
                }
                Err(e) => {
                    last_err = Some(e);
                    if config.port.is_some() {
                        break;
                    }
                }
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("sshd did not start")))
    }

    fn spawn(
        dir: &tempfile::TempDir,
        host_key: &Path,
        port: u16,
        c: &SshdConfig,
    ) -> io::Result<Child> {
        let yn = |b: bool| if b { "yes" } else { "no" };
        let d = dir.path();
        let mut cfg = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nPidFile {}\n\
             AuthorizedKeysFile .ssh/authorized_keys\nPubkeyAuthentication {}\n\
             PasswordAuthentication {}\nKbdInteractiveAuthentication {}\nUsePAM {}\n\
             AllowTcpForwarding {}\nAllowStreamLocalForwarding {}\nPermitRootLogin no\n\
             StrictModes yes\nPrintMotd no\nPrintLastLog no\nLogLevel DEBUG\n\
             MaxStartups 100\nMaxSessions 50\nSubsystem sftp internal-sftp\n",
            host_key.display(),
            d.join("sshd.pid").display(),
            yn(c.pubkey_auth),
            yn(c.password_auth),
            yn(c.kbd_interactive),
            yn(c.use_pam),
            yn(c.allow_tcp_forwarding),
            yn(c.allow_stream_local_forwarding),
        );
        if let Some(m) = &c.authentication_methods {
            cfg.push_str(&format!("AuthenticationMethods {m}\n"));
        }
        if let Some(b) = &c.banner {
            let p = d.join("banner");
            std::fs::write(&p, b)?;
            cfg.push_str(&format!("Banner {}\n", p.display()));
        }
        for line in &c.extra {
            cfg.push_str(line);
            cfg.push('\n');
        }
        let cfg_path = d.join("sshd_config");
        std::fs::write(&cfg_path, cfg)?;
        let log = d.join("sshd.log");
        let _ = std::fs::remove_file(&log);
        let mut cmd = match &c.netns {
            Some(ns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", ns, "/usr/sbin/sshd"]);
                cmd
            }
            None => Command::new("/usr/sbin/sshd"),
        };
        cmd.arg("-D")
            .arg("-f")
            .arg(&cfg_path)
            .arg("-E")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn()?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("Server listening on") {
                return Ok(child);
            }
            if let Some(status) = child.try_wait()? {
                return Err(io::Error::other(format!(
                    "sshd exited ({status}) on port {port}: {text}"
                )));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other(format!(
                    "sshd not listening after 20 s: {text}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The listening port (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The host public key, OpenSSH one-line format (`ssh-ed25519 AAAA... comment`).
    pub fn host_public_key(&self) -> &str {
        &self.host_public
    }

    /// A known_hosts line for this server as reached at `127.0.0.1:port`.
    pub fn known_hosts_line(&self) -> String {
        let mut parts = self.host_public.split_whitespace();
        let kt = parts.next().unwrap_or_default();
        let kb = parts.next().unwrap_or_default();
        format!("[127.0.0.1]:{} {kt} {kb}\n", self.port)
    }

    /// The sshd log so far (LogLevel DEBUG).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// The sshd's private directory (config, host key, log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &SshdConfig {
        &self.config
    }

    /// Process id of the listening sshd (or of `ip netns exec`, which execs into it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // Only the listener we started; per-connection children exit when their
        // connections close.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A key pair for the "laptop" side.
#[derive(Debug, Clone)]
pub struct ClientKey {
    /// Private key file.
    pub private: PathBuf,
    /// Public key line.
    pub public: String,
}

impl ClientKey {
    /// Generate `dir/name` (ed25519), encrypted with `passphrase` when given.
    pub fn generate(dir: &Path, name: &str, passphrase: Option<&str>) -> io::Result<ClientKey> {
        let private = dir.join(name);
        let public = keygen(&private, passphrase)?;
        Ok(ClientKey { private, public })
    }
}

/// Options for a throwaway host user.
#[derive(Debug, Clone, Default)]
pub struct UserOptions {
    /// Login shell (default `/bin/bash`), e.g. `/usr/bin/tcsh`.
    pub shell: Option<String>,
    /// Password to set (for password / keyboard-interactive tests).
    pub password: Option<String>,
    /// Keep the user (and home) after drop, for debugging.
    pub keep: bool,
}

/// A throwaway user (`rxt_<random>`) with a home directory; removed on drop together with
/// any process still running as that user.
#[derive(Debug)]
pub struct TestUser {
    /// User name.
    pub name: String,
    /// Home directory.
    pub home: PathBuf,
    /// Numeric uid.
    pub uid: u32,
    /// Numeric gid.
    pub gid: u32,
    keep: bool,
}

impl TestUser {
    /// Create the user (`useradd -m`), unlock it for key auth, optionally set a password.
    pub fn create(opts: &UserOptions) -> io::Result<TestUser> {
        let name = format!("rxt_{:08x}", rand::random::<u32>());
        let shell = opts.shell.clone().unwrap_or_else(|| "/bin/bash".into());
        run(Command::new("useradd")
            .args(["-m", "-s", &shell])
            .arg(&name))?;
        let cleanup = |e: io::Error| {
            let _ = Command::new("userdel").args(["-r", "-f", &name]).output();
            e
        };
        // '*' is "no password" but not locked, so sshd allows key auth without PAM.
        run(Command::new("usermod").args(["-p", "*", &name])).map_err(cleanup)?;
        if let Some(pw) = &opts.password {
            let mut child = Command::new("chpasswd")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(cleanup)?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin
                    .write_all(format!("{name}:{pw}\n").as_bytes())
                    .map_err(cleanup)?;
            }
            let st = child.wait().map_err(cleanup)?;
            if !st.success() {
                return Err(cleanup(io::Error::other("chpasswd failed")));
            }
        }
        let id = |flag: &str| -> io::Result<u32> {
            run(Command::new("id").arg(flag).arg(&name))?
                .trim()
                .parse::<u32>()
                .map_err(io::Error::other)
        };
        let uid = id("-u").map_err(cleanup)?;
        let gid = id("-g").map_err(cleanup)?;
        let passwd = run(Command::new("getent").args(["passwd", &name])).map_err(cleanup)?;
        let home = passwd
            .trim()
            .split(':')
            .nth(5)
            .map(PathBuf::from)
            .ok_or_else(|| cleanup(io::Error::other("no home in passwd entry")))?;
        Ok(TestUser {
            name,
            home,
            uid,
            gid,
            keep: opts.keep,
        })
    }

    /// Write a file in the user's home (parents created), owned by the user.
    pub fn write_file(&self, rel: &str, contents: &str, mode: u32) -> io::Result<PathBuf> {
        let path = self.home.join(rel);
        let mut dir = path.parent().map(Path::to_path_buf);
        let mut created = Vec::new();
        while let Some(d) = dir {
            if d.exists() || !d.starts_with(&self.home) {
                break;
            }
            created.push(d.clone());
            dir = d.parent().map(Path::to_path_buf);
        }
        for d in created.iter().rev() {
            std::fs::create_dir(d)?;
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
            std::os::unix::fs::chown(d, Some(self.uid), Some(self.gid))?;
        }
        std::fs::write(&path, contents)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        std::os::unix::fs::chown(&path, Some(self.uid), Some(self.gid))?;
        Ok(path)
    }

    /// Append a public key line to `~/.ssh/authorized_keys` (mode 0600, dir 0700).
    pub fn authorize(&self, public_key_line: &str) -> io::Result<()> {
        let existing =
            std::fs::read_to_string(self.home.join(".ssh/authorized_keys")).unwrap_or_default();
        self.write_file(
            ".ssh/authorized_keys",
            &format!("{existing}{}\n", public_key_line.trim()),
            0o600,
        )?;
        Ok(())
    }

    /// Process ids currently running as this user (read from /proc).
    pub fn pids(&self) -> Vec<i32> {
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir("/proc") else {
            return out;
        };
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
                continue;
            };
            let uid = status
                .lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|u| u.parse::<u32>().ok());
            if uid == Some(self.uid) {
                out.push(pid);
            }
        }
        out
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        // Every process of this throwaway user was started by the test through sshd; end
        // them by pid so userdel can remove the account.
        for pid in self.pids() {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).output();
        }
        let _ = Command::new("userdel")
            .args(["-r", "-f", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sshd_starts_listens_and_user_is_created() {
        let sshd = Sshd::start(SshdConfig::default()).unwrap();
        let s = std::net::TcpStream::connect(("127.0.0.1", sshd.port())).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 7];
        use std::io::Read;
        (&s).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"SSH-2.0");
        assert!(sshd
            .known_hosts_line()
            .starts_with(&format!("[127.0.0.1]:{} ssh-ed25519 ", sshd.port())));
        let user = TestUser::create(&UserOptions::default()).unwrap();
        assert!(user.home.is_dir());
        user.authorize("ssh-ed25519 AAAA test").unwrap();
        let meta = std::fs::metadata(user.home.join(".ssh/authorized_keys")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(meta.uid(), user.uid);
        let name = user.name.clone();
        drop(user);
        let out = Command::new("id").arg(&name).output().unwrap();
        assert!(!out.status.success(), "user {name} should be gone");
    }
}
