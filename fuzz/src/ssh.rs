//! OpenSSH files read by `reasonix_bootstrap`: `ssh_config` (with destinations, `-o` options
//! and ProxyJump values) and `known_hosts`.

use std::path::{Path, PathBuf};

use reasonix_bootstrap::config::parse_jumps;
use reasonix_bootstrap::known_hosts::{host_port_name, KnownHosts};
use reasonix_bootstrap::{Destination, SshOptions};

use crate::text;

/// A fixed key to look up, so `Known`/`Changed` answers are reachable from the corpus.
const FIXED_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB8wPjY5sO8krVL7et0fc9NJTKhQIMvNbes9MupDfQr0";

/// A scratch home per process: the fuzzed files are rewritten for every input.
fn scratch() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        // Without a writable temp dir nothing file-based can be fuzzed at all.
        #[allow(clippy::expect_used)]
        let d = tempfile::tempdir().expect("a temp dir for the fuzz targets");
        #[allow(clippy::expect_used)]
        std::fs::create_dir_all(d.path().join(".ssh/conf.d")).expect("scratch .ssh");
        d
    })
    .path()
}

/// Keeps `Include` inside the scratch home: absolute paths and `..` could read any file
/// (`/dev/zero` never ends), and more than one `Include` per file lets a self-including
/// config fan out 16 levels deep (OpenSSH has the same depth limit and the same blow-up).
fn confine_includes(config: &str) -> String {
    let mut includes = 0;
    let mut out = String::with_capacity(config.len());
    for line in config.lines() {
        let t = line.trim_start();
        let is_include = t
            .get(..7)
            .is_some_and(|k| k.eq_ignore_ascii_case("include"));
        if is_include {
            includes += 1;
            let rest = &t[7..];
            let escapes = rest.contains("..")
                || rest
                    .split(|c: char| c.is_whitespace() || c == '=')
                    .map(|w| w.trim_matches(['"', '\'']))
                    .any(|w| w.starts_with('/'));
            if escapes || includes > 1 {
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `ssh_config` resolution. Line 1 is a destination (also tried as a `-o` option and a
/// ProxyJump value); the rest is `~/.ssh/config`, written to a scratch home and resolved
/// for that destination and two fixed ones. Errors are fine; panics and hangs are not.
pub fn ssh_config(data: &[u8]) {
    let input = text(data);
    let (first, config) = input.split_once('\n').unwrap_or((&input, ""));
    let home = scratch();
    let file = home.join(".ssh/config");
    if std::fs::write(&file, confine_includes(config)).is_err() {
        return;
    }
    // An included file with fuzzed content too (the corpus includes `conf.d/*`).
    let _ = std::fs::write(home.join(".ssh/conf.d/a.conf"), first);
    let mut opts = SshOptions {
        config_file: Some(file),
        home: Some(home.to_path_buf()),
        ..SshOptions::default()
    };
    let _ = parse_jumps(first);
    let _ = opts.push_option(first);
    let mut dests = vec!["fuzzhost".to_string(), "u@10.1.2.3".to_string()];
    dests.push(first.to_string());
    for d in dests {
        if let Ok(dest) = Destination::parse(&d) {
            let _ = dest.to_string();
            if let Ok(r) = opts.resolve(&dest) {
                for hop in &r.proxy_jump {
                    let jump = Destination {
                        user: hop.user.clone(),
                        host: hop.host.clone(),
                        port: hop.port,
                        path: None,
                    };
                    let _ = opts.for_jump_host().resolve(&jump);
                }
            }
        }
    }
}

/// `known_hosts` lookups: `data` is the file; the fixed key and every key the file holds are
/// looked up for a few names (plain, `[host]:port`, hashed patterns must all be safe).
pub fn known_hosts(data: &[u8]) {
    let home = scratch();
    let file = home.join("known_hosts");
    let fixed_file = home.join("known_hosts.fixed");
    if std::fs::write(&file, data).is_err()
        || std::fs::write(&fixed_file, format!("fixed {FIXED_KEY}\n")).is_err()
    {
        return;
    }
    let kh = KnownHosts::load(&[file.clone(), PathBuf::from("/nonexistent/known_hosts")]);
    let fixed = KnownHosts::load(&[fixed_file]);
    let mut keys: Vec<_> = fixed.entries().iter().map(|e| e.key.clone()).collect();
    keys.extend(kh.entries().iter().take(8).map(|e| e.key.clone()));
    let hosts = [
        ("fuzzhost", 22),
        ("fuzzhost", 2222),
        ("10.1.2.3", 22),
        ("", 0),
    ];
    for key in &keys {
        for (host, port) in hosts {
            let _ = kh.lookup(host, port, key);
            let _ = kh.is_trusted_ca(host, port, key);
        }
    }
    for e in kh.entries() {
        assert!(e.line >= 1, "entry line numbers start at 1");
        assert_eq!(e.file, file);
    }
    let _ = host_port_name("fuzzhost", 2222);
}
