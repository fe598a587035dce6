//! OpenSSH `known_hosts` files: lookup (plain and hashed `|1|` entries, `[host]:port`,
//! wildcard/negated patterns, `@revoked`, `@cert-authority`) and appending accepted keys.
//!
//! The decision follows OpenSSH's `check_key_in_hostkeys` (hostfile.c): only lines whose host
//! field names the host count; among those, a plain entry equal to the presented key makes it
//! known, any other plain entry (of any key type) makes it *changed*, and a matching
//! `@revoked` line with the same key overrides both. Host names match case-insensitively
//! (the name is lowercased, plain patterns are compared lowercased, hashed entries are the
//! HMAC of the lowercased name, as `ssh` writes them).

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use russh::keys::{HashAlg, PublicKey};
use sha1::Sha1;

use russh::keys::Algorithm;

use crate::pattern::match_hostname;

/// Marker at the start of a known_hosts line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A plain entry.
    None,
    /// `@revoked`: this key must never be accepted.
    Revoked,
    /// `@cert-authority`: host certificates signed by this key are trusted.
    CertAuthority,
}

#[derive(Debug, Clone)]
enum HostPattern {
    /// Comma-separated patterns (may include `*`, `?`, `!` and `[host]:port`).
    Plain(String),
    /// `|1|salt|hash`.
    Hashed { salt: Vec<u8>, hash: Vec<u8> },
}

/// One parsed known_hosts line.
#[derive(Debug, Clone)]
pub struct Entry {
    /// File the line came from.
    pub file: PathBuf,
    /// 1-based line number.
    pub line: usize,
    /// Marker.
    pub marker: Marker,
    hosts: HostPattern,
    /// The key on that line.
    pub key: PublicKey,
}

/// Result of looking a key up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The key is on record for this host (file and line of the match).
    Known {
        /// File.
        file: PathBuf,
        /// 1-based line.
        line: usize,
    },
    /// No plain entry names this host.
    Unknown,
    /// Entries name this host but none holds the presented key (whatever their key type:
    /// OpenSSH treats "only another key type on record" as changed too).
    Changed {
        /// Fingerprint of the recorded key.
        old_fingerprint: String,
        /// Type of the recorded key.
        old_key_type: String,
        /// File of the recorded key.
        file: PathBuf,
        /// 1-based line.
        line: usize,
    },
    /// The key is marked `@revoked`.
    Revoked {
        /// File.
        file: PathBuf,
        /// 1-based line.
        line: usize,
    },
}

/// Errors writing known_hosts.
#[derive(Debug, thiserror::Error)]
pub enum KnownHostsError {
    /// The file or its directory could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The known_hosts file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The key could not be encoded.
    #[error("cannot encode host key: {0}")]
    Encode(String),
}

/// The name OpenSSH looks up: `host` on port 22, `[host]:port` otherwise.
pub fn host_port_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

/// `SHA256:...` fingerprint as OpenSSH prints it.
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// Algorithm name, e.g. `ssh-ed25519`.
pub fn key_type(key: &PublicKey) -> String {
    key.algorithm().as_str().to_string()
}

fn hmac_sha1(salt: &[u8], msg: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length, so `new_from_slice` cannot fail here.
    match <Hmac<Sha1> as Mac>::new_from_slice(salt) {
        Ok(mut mac) => {
            mac.update(msg);
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

impl HostPattern {
    fn matches(&self, name: &str) -> bool {
        match self {
            HostPattern::Plain(list) => match_hostname(name, list).is_match(),
            HostPattern::Hashed { salt, hash } => hmac_sha1(salt, name.as_bytes()) == *hash,
        }
    }
}

fn parse_line(file: &Path, line_no: usize, line: &str) -> Option<Entry> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let mut fields = line.split_whitespace();
    let mut first = fields.next()?;
    let marker = match first {
        "@revoked" => Marker::Revoked,
        "@cert-authority" => Marker::CertAuthority,
        m if m.starts_with('@') => return None,
        _ => Marker::None,
    };
    if marker != Marker::None {
        first = fields.next()?;
    }
    let key_type = fields.next()?;
    let key_b64 = fields.next()?;
    let key = PublicKey::from_openssh(&format!("{key_type} {key_b64}")).ok()?;
    let hosts = if let Some(rest) = first.strip_prefix("|1|") {
        let (salt, hash) = rest.split_once('|')?;
        let b64 = base64::engine::general_purpose::STANDARD;
        HostPattern::Hashed {
            salt: b64.decode(salt).ok()?,
            hash: b64.decode(hash).ok()?,
        }
    } else {
        HostPattern::Plain(first.to_string())
    };
    Some(Entry {
        file: file.to_path_buf(),
        line: line_no,
        marker,
        hosts,
        key,
    })
}

/// Every entry of a set of known_hosts files (missing files are skipped).
#[derive(Debug, Clone, Default)]
pub struct KnownHosts {
    entries: Vec<Entry>,
}

impl KnownHosts {
    /// Read and parse the files; unreadable files and unparsable lines are skipped, as OpenSSH
    /// does.
    pub fn load(files: &[PathBuf]) -> Self {
        let mut entries = Vec::new();
        for file in files {
            let Ok(text) = std::fs::read_to_string(file) else {
                continue;
            };
            for (i, line) in text.lines().enumerate() {
                if let Some(e) = parse_line(file, i + 1, line) {
                    entries.push(e);
                }
            }
        }
        Self { entries }
    }

    /// All parsed entries.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Entries whose host field names `name` exactly as given (`host` or `[host]:port`),
    /// in file order, whatever their marker: what `ssh-keygen -F name` lists.
    pub fn matching(&self, name: &str) -> impl Iterator<Item = &Entry> {
        let name = name.to_string();
        self.entries.iter().filter(move |e| e.hosts.matches(&name))
    }

    fn for_host(&self, host: &str, port: u16) -> Vec<&Entry> {
        // `ssh` lowercases the host name before it looks it up (and before it writes it).
        let name = host_port_name(&host.to_ascii_lowercase(), port);
        self.matching(&name).collect()
    }

    /// Look up `key` presented by `host:port`, as OpenSSH's `check_host_key` does.
    ///
    /// For the name `host` (port 22) or `[host]:port`: `@revoked` lines that name it and hold
    /// the key win over everything; then a plain entry with the same key (known); then any
    /// other plain entry (changed, whatever its key type). `@cert-authority` lines are not
    /// host keys.
    ///
    /// On another port than 22, when nothing at all is on record for `[host]:port`, the key is
    /// also looked for under the bare `host`, as `ssh` does ("checking without port
    /// identifier"): the same key on record there is accepted, another key there is not a
    /// change (the host is still unknown). A key `@revoked` for the bare name is refused:
    /// `ssh` reports it as revoked but then goes on as for an unknown host, so with
    /// `StrictHostKeyChecking accept-new` it would record a revoked key; we stop instead.
    /// Checked against `ssh` by `tests/host_key_live_oracle.rs` (the port class).
    pub fn lookup(&self, host: &str, port: u16, key: &PublicKey) -> Lookup {
        let lower = host.to_ascii_lowercase();
        let first = self.lookup_name(&host_port_name(&lower, port), key);
        if first == Lookup::Unknown && port != 22 {
            match self.lookup_name(&lower, key) {
                found @ (Lookup::Known { .. } | Lookup::Revoked { .. }) => return found,
                Lookup::Changed { .. } | Lookup::Unknown => {}
            }
        }
        first
    }

    fn lookup_name(&self, name: &str, key: &PublicKey) -> Lookup {
        let entries: Vec<&Entry> = self.matching(name).collect();
        if let Some(e) = entries
            .iter()
            .find(|e| e.marker == Marker::Revoked && e.key.key_data() == key.key_data())
        {
            return Lookup::Revoked {
                file: e.file.clone(),
                line: e.line,
            };
        }
        let plain: Vec<&&Entry> = entries
            .iter()
            .filter(|e| e.marker == Marker::None)
            .collect();
        if let Some(e) = plain.iter().find(|e| e.key.key_data() == key.key_data()) {
            return Lookup::Known {
                file: e.file.clone(),
                line: e.line,
            };
        }
        // Show the recorded key of the same type when there is one (the most useful one to
        // compare fingerprints with), else the last one OpenSSH would name.
        let shown = plain
            .iter()
            .find(|e| e.key.algorithm() == key.algorithm())
            .or_else(|| plain.last());
        match shown {
            Some(e) => Lookup::Changed {
                old_fingerprint: fingerprint(&e.key),
                old_key_type: key_type(&e.key),
                file: e.file.clone(),
                line: e.line,
            },
            None => Lookup::Unknown,
        }
    }

    fn trusted_ca_name(&self, name: &str, ca_key: &PublicKey) -> bool {
        let entries: Vec<&Entry> = self.matching(name).collect();
        let revoked = entries
            .iter()
            .any(|e| e.marker == Marker::Revoked && e.key.key_data() == ca_key.key_data());
        !revoked
            && entries
                .iter()
                .any(|e| e.marker == Marker::CertAuthority && e.key.key_data() == ca_key.key_data())
    }

    /// Whether a `@cert-authority` entry naming `host:port` (or, on another port than 22,
    /// the bare `host`, as OpenSSH retries) holds `ca_key`, and no `@revoked` entry naming
    /// the same name revokes that CA key.
    pub fn is_trusted_ca(&self, host: &str, port: u16, ca_key: &PublicKey) -> bool {
        let lower = host.to_ascii_lowercase();
        self.trusted_ca_name(&host_port_name(&lower, port), ca_key)
            || (port != 22 && self.trusted_ca_name(&lower, ca_key))
    }

    /// The `@revoked` line naming `host:port` that holds `key` (a certificate's CA), if any.
    /// On another port than 22, when `[host]:port` does not trust the key as a CA, the bare
    /// `host` is searched too: `ssh` looks the certificate up there next and reports the
    /// revocation it finds.
    pub fn revoked_entry(
        &self,
        host: &str,
        port: u16,
        key: &PublicKey,
    ) -> Option<(PathBuf, usize)> {
        let lower = host.to_ascii_lowercase();
        let find = |name: &str| {
            self.matching(name)
                .find(|e| e.marker == Marker::Revoked && e.key.key_data() == key.key_data())
                .map(|e| (e.file.clone(), e.line))
        };
        let name = host_port_name(&lower, port);
        find(&name).or_else(|| {
            (port != 22 && !self.trusted_ca_name(&name, key))
                .then(|| find(&lower))
                .flatten()
        })
    }

    /// Whether any `@cert-authority` entry names `host:port` (then certificate host-key
    /// algorithms are asked for first, as OpenSSH does).
    pub fn has_cert_authority(&self, host: &str, port: u16) -> bool {
        let ca = |entries: Vec<&Entry>| entries.iter().any(|e| e.marker == Marker::CertAuthority);
        ca(self.for_host(host, port)) || (port != 22 && ca(self.for_host(host, 22)))
    }

    /// Key algorithms of the plain entries naming `host:port`, first seen first. A key that
    /// is also `@revoked` for the host does not count (OpenSSH does not ask for it first).
    pub fn known_algorithms(&self, host: &str, port: u16) -> Vec<Algorithm> {
        let entries = self.for_host(host, port);
        let revoked = |k: &PublicKey| {
            entries
                .iter()
                .any(|e| e.marker == Marker::Revoked && e.key.key_data() == k.key_data())
        };
        let mut out: Vec<Algorithm> = Vec::new();
        for e in &entries {
            if e.marker == Marker::None && !revoked(&e.key) && !out.contains(&e.key.algorithm()) {
                out.push(e.key.algorithm());
            }
        }
        out
    }
}

/// Format one known_hosts line for `host:port` (hashed when asked).
pub fn format_line(
    host: &str,
    port: u16,
    key: &PublicKey,
    hashed: bool,
) -> Result<String, KnownHostsError> {
    // OpenSSH records (and looks up) lowercased names.
    let name = host_port_name(&host.to_ascii_lowercase(), port);
    let mut k = key.clone();
    k.set_comment("");
    let key_text = k
        .to_openssh()
        .map_err(|e| KnownHostsError::Encode(e.to_string()))?;
    let key_text = key_text.trim_end();
    let hosts = if hashed {
        let salt: [u8; 20] = rand::random();
        let hash = hmac_sha1(&salt, name.as_bytes());
        let b64 = base64::engine::general_purpose::STANDARD;
        format!("|1|{}|{}", b64.encode(salt), b64.encode(hash))
    } else {
        name
    };
    Ok(format!("{hosts} {key_text}\n"))
}

/// Append an accepted key to `file` in OpenSSH format, creating `~/.ssh`-like parent
/// directories with mode 0700 and the file with mode 0600.
pub fn append(
    file: &Path,
    host: &str,
    port: u16,
    key: &PublicKey,
    hashed: bool,
) -> Result<(), KnownHostsError> {
    let werr = |source| KnownHostsError::Write {
        path: file.to_path_buf(),
        source,
    };
    let line = format_line(host, port, key, hashed)?;
    if let Some(parent) = file.parent() {
        if !parent.as_os_str().is_empty() && !parent.exists() {
            let mut dirs = std::fs::DirBuilder::new();
            dirs.recursive(true);
            reasonix_sftpfs::mode::dirs_with_mode(&mut dirs, 0o700);
            dirs.create(parent).map_err(werr)?;
        }
    }
    // Start on a fresh line if the file does not end with a newline.
    let needs_newline = std::fs::read(file)
        .map(|b| !b.is_empty() && !b.ends_with(b"\n"))
        .unwrap_or(false);
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(true);
    reasonix_sftpfs::mode::create_with_mode(&mut opts, 0o600);
    let mut f = opts.open(file).map_err(werr)?;
    if needs_newline {
        f.write_all(b"\n").map_err(werr)?;
    }
    f.write_all(line.as_bytes()).map_err(werr)?;
    f.flush().map_err(werr)
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAID+Rs58fZ7kkVtCUGimyGO8kL13Za2MRngk30PyyIrYz";
    const K2: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAII1CJyDKhuO6OAE+iqj1Xng+fW2qnYwFIIVwtPZpZvgr";

    const K3: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBAnK2/ay4OSdNPudmkAGM39cM65F0mGSucspxrUeAcUXpguFbTM1y4UYoHk0UnM+RhyUqiUSh7JpxqZHumTme3Y=";

    fn key(s: &str) -> PublicKey {
        PublicKey::from_openssh(s).unwrap()
    }

    fn kh(text: &str) -> (tempfile::TempDir, PathBuf, KnownHosts) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("known_hosts");
        std::fs::write(&path, text).unwrap();
        let k = KnownHosts::load(&[path.clone(), dir.path().join("missing")]);
        (dir, path, k)
    }

    #[test]
    fn plain_port_and_patterns() {
        let (_d, path, k) = kh(&format!(
            "# c\n\nbox,10.0.0.1 {K1}\n[box]:2222 {K2}\n*.corp,!evil.corp {K1}\n"
        ));
        assert_eq!(
            k.lookup("box", 22, &key(K1)),
            Lookup::Known {
                file: path.clone(),
                line: 3
            }
        );
        assert_eq!(
            k.lookup("box", 2222, &key(K2)),
            Lookup::Known {
                file: path.clone(),
                line: 4
            }
        );
        assert!(matches!(
            k.lookup("a.corp", 22, &key(K1)),
            Lookup::Known { .. }
        ));
        assert_eq!(k.lookup("evil.corp", 22, &key(K1)), Lookup::Unknown);
        assert_eq!(k.lookup("other", 22, &key(K1)), Lookup::Unknown);
        match k.lookup("box", 2222, &key(K1)) {
            Lookup::Changed {
                old_fingerprint,
                old_key_type,
                file,
                line,
            } => {
                assert_eq!(old_fingerprint, fingerprint(&key(K2)));
                assert!(old_fingerprint.starts_with("SHA256:"));
                assert_eq!(old_key_type, "ssh-ed25519");
                assert_eq!(file, path);
                assert_eq!(line, 4);
            }
            other => panic!("expected changed, got {other:?}"),
        }
    }

    #[test]
    fn hashed_entries_written_and_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/known_hosts");
        append(&path, "127.0.0.1", 2022, &key(K1), true).unwrap();
        append(&path, "plain.example", 22, &key(K2), false).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("|1|"), "{text}");
        assert!(!lines[0].contains("127.0.0.1"));
        assert_eq!(lines[1], format!("plain.example {K2}"));
        let k = KnownHosts::load(std::slice::from_ref(&path));
        assert!(matches!(
            k.lookup("127.0.0.1", 2022, &key(K1)),
            Lookup::Known { line: 1, .. }
        ));
        assert_eq!(k.lookup("127.0.0.1", 22, &key(K1)), Lookup::Unknown);
        assert!(matches!(
            k.lookup("127.0.0.1", 2022, &key(K2)),
            Lookup::Changed { line: 1, .. }
        ));
        if cfg!(unix) {
            let mode =
                reasonix_sftpfs::mode::permission_bits(&std::fs::metadata(&path).unwrap()) & 0o777;
            assert_eq!(mode, 0o600);
        }
    }

    #[test]
    fn hashed_entry_made_by_openssh_format() {
        // A hashed line computed independently: HMAC-SHA1 keyed by the salt over the name.
        let salt = [7u8; 20];
        let hash = hmac_sha1(&salt, b"[h]:2200");
        let b64 = base64::engine::general_purpose::STANDARD;
        let line = format!("|1|{}|{} {K1}\n", b64.encode(salt), b64.encode(hash));
        let (_d, _p, k) = kh(&line);
        assert!(matches!(
            k.lookup("h", 2200, &key(K1)),
            Lookup::Known { .. }
        ));
        assert_eq!(k.lookup("h", 22, &key(K1)), Lookup::Unknown);
    }

    #[test]
    fn revoked_and_cert_authority() {
        let (_d, path, k) = kh(&format!(
            "box {K1}\n@revoked * {K1}\n@cert-authority *.corp {K2}\n"
        ));
        assert_eq!(
            k.lookup("box", 22, &key(K1)),
            Lookup::Revoked {
                file: path,
                line: 2
            }
        );
        assert!(k.is_trusted_ca("x.corp", 22, &key(K2)));
        assert!(
            k.is_trusted_ca("X.Corp", 22, &key(K2)),
            "names match case-insensitively"
        );
        assert!(!k.is_trusted_ca("x.org", 22, &key(K2)));
        assert!(k.has_cert_authority("x.corp", 22));
        assert!(k.has_cert_authority("x.corp", 2222), "bare-name fallback");
        assert!(!k.has_cert_authority("x.org", 2222));
        // A CA line is not a host key.
        assert_eq!(k.lookup("x.corp", 22, &key(K2)), Lookup::Unknown);
    }

    #[test]
    fn revoked_only_for_the_hosts_it_names_and_other_types_are_changed() {
        let (_d, path, k) = kh(&format!(
            "box,Other {K1}\n@revoked evil {K1}\n@revoked box {K2}\n"
        ));
        assert!(matches!(
            k.lookup("box", 22, &key(K1)),
            Lookup::Known { line: 1, .. }
        ));
        assert!(matches!(
            k.lookup("OTHER", 22, &key(K1)),
            Lookup::Known { line: 1, .. }
        ));
        assert_eq!(
            k.lookup("evil", 22, &key(K1)),
            Lookup::Revoked {
                file: path.clone(),
                line: 2
            }
        );
        assert!(matches!(
            k.lookup("box", 22, &key(K2)),
            Lookup::Revoked { line: 3, .. }
        ));
        // Only an ed25519 key is on record for `box`; an RSA-typed (here: any other) key is
        // a change, not a new host.
        let (_d2, _p2, k2) = kh(&format!("box {K1}\n"));
        let ecdsa = PublicKey::from_openssh(K3).unwrap();
        assert!(matches!(
            k2.lookup("box", 22, &ecdsa),
            Lookup::Changed { line: 1, .. }
        ));
        assert_eq!(k2.known_algorithms("BOX", 22), vec![key(K1).algorithm()]);
    }

    #[test]
    fn non_default_port_falls_back_to_the_bare_name_as_ssh_does() {
        // `box` on record: the same key on port 2222 is known through the bare name, another
        // key is not a change (nothing names `[box]:2222`), a key revoked for `box` is refused.
        let (_d, path, k) = kh(&format!("box {K1}\n@revoked box {K3}\n"));
        assert_eq!(
            k.lookup("box", 2222, &key(K1)),
            Lookup::Known {
                file: path.clone(),
                line: 1
            }
        );
        assert_eq!(k.lookup("box", 2222, &key(K2)), Lookup::Unknown);
        let ecdsa = key(K3);
        assert_eq!(
            k.lookup("box", 2222, &ecdsa),
            Lookup::Revoked {
                file: path.clone(),
                line: 2
            }
        );
        // Something on record for `[box]:2222` ends the lookup there: no fallback.
        let (_d2, _p2, k2) = kh(&format!("[box]:2222 {K2}\nbox {K1}\n"));
        assert!(matches!(
            k2.lookup("box", 2222, &key(K1)),
            Lookup::Changed { line: 1, .. }
        ));
        // A bare `*` names `[box]:2222` itself (as `ssh-keygen -F '[box]:2222'` shows), so a
        // different key under it is a change, not an unknown host.
        let (_d3, _p3, k3) = kh(&format!("* {K1}\n"));
        assert!(matches!(
            k3.lookup("box", 2222, &key(K1)),
            Lookup::Known { line: 1, .. }
        ));
        assert!(matches!(
            k3.lookup("box", 2222, &key(K2)),
            Lookup::Changed { line: 1, .. }
        ));
        // Port 22 has no fallback to try.
        let (_d4, _p4, k4) = kh(&format!("[box]:2222 {K1}\n"));
        assert_eq!(k4.lookup("box", 22, &key(K1)), Lookup::Unknown);
    }

    #[test]
    fn append_adds_newline_when_missing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kh");
        std::fs::write(&path, format!("other {K2}")).unwrap();
        append(&path, "box", 22, &key(K1), false).unwrap();
        let k = KnownHosts::load(&[path]);
        assert_eq!(k.entries().len(), 2);
    }
}
