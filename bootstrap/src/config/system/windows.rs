//! What the local Windows system says, as OpenSSH for Windows reads it: the user from
//! `%USERNAME%`, the home from the profile folder (`%USERPROFILE%`, through the `directories`
//! crate), the host name from `%COMPUTERNAME%`.

use std::path::PathBuf;

/// Windows has no services database OpenSSH reads; the one name a `Port` line uses in
/// practice is `ssh`.
pub(crate) fn service_port(name: &str) -> Option<u16> {
    (name == "ssh").then_some(22)
}

/// `~user` other than one's own: OpenSSH for Windows does not expand it either.
pub(crate) fn home_of(_user: &str) -> Option<PathBuf> {
    None
}

pub(crate) fn local_user() -> String {
    match std::env::var("USERNAME") {
        Ok(u) if !u.is_empty() => u,
        _ => "user".to_string(),
    }
}

/// `%i`: Windows has no numeric user id; OpenSSH for Windows expands it to 0 as well.
pub(crate) fn local_uid() -> u32 {
    0
}

pub(crate) fn default_home() -> PathBuf {
    crate::platform::home_dir().unwrap_or_else(|| PathBuf::from("C:\\"))
}

pub(crate) fn this_host() -> String {
    std::env::var("COMPUTERNAME").unwrap_or_default()
}

/// A numeric address in its canonical text form (IPv4 dotted quad, IPv6 compressed).
pub(crate) fn canonical_address(host: &str) -> Option<String> {
    host.parse::<std::net::IpAddr>().ok().map(|a| a.to_string())
}
