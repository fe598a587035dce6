//! `web_fetch` on the laptop: the host sends [`WebFetchRequest`] over the link (the host may
//! have no route out), the gateway fetches with the user's network and proxy settings
//! (`HTTPS_PROXY`, `NO_PROXY`: reqwest's environment proxies) and answers with text.
//!
//! Every hop (the first URL and each redirect) is checked before it is requested:
//! - a `WebFetch` deny rule naming the host refuses it;
//! - the host is resolved here, and when any of its addresses is loopback, link-local,
//!   private or otherwise not public ([`is_public`]), it is refused unless an allow rule names
//!   that host (`WebFetch(domain:HOST)`); the request then connects to exactly the addresses
//!   that were checked (no second lookup a rebinding DNS could answer differently);
//! - a redirect to another host is followed only when an allow rule covers that host;
//!   otherwise it is reported to the model, which can fetch it with a new call (that the
//!   policy decides), so an open redirect on an allowed site cannot carry data elsewhere;
//! - at most [`MAX_REDIRECTS`] redirects, [`FETCH_TIMEOUT`] in all, at most `max_bytes` of
//!   body ([`LAPTOP_MAX_BYTES`] at most).
//!
//! HTML becomes Markdown-like text (`html2text`), other text types pass through, binary
//! types are refused with their type and size.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use reasonix_forward::policy::Rules;
use reasonix_forward::proto::{ErrorCode, RpcError, WebFetchReply, WebFetchRequest};
use reasonix_forward::web::{host_verdict, HostVerdict};

use super::Gateway;

/// Redirects followed before the fetch fails.
pub const MAX_REDIRECTS: usize = 5;
/// The whole fetch, redirects included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// Connect timeout of one hop.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most body bytes the laptop reads, whatever the host asks.
pub const LAPTOP_MAX_BYTES: u64 = 8 * 1024 * 1024;
/// Line width of converted HTML.
const TEXT_WIDTH: usize = 100;

impl Gateway {
    /// Fetch `request` under the user's `WebFetch` rules (from the laptop's configuration:
    /// the laptop checks every hop itself, whatever the host decided).
    pub async fn web_fetch(&self, request: WebFetchRequest) -> Result<WebFetchReply, RpcError> {
        let rules = self.inner.config.session_policy().rules;
        fetch(&rules, request).await
    }
}

fn denied(msg: String) -> RpcError {
    RpcError::new(ErrorCode::Denied, msg)
}

fn failed(msg: String) -> RpcError {
    RpcError::new(ErrorCode::Io, msg)
}

/// The fetch itself (see the module doc).
pub async fn fetch(rules: &Rules, request: WebFetchRequest) -> Result<WebFetchReply, RpcError> {
    let deadline = Instant::now() + FETCH_TIMEOUT;
    let max_bytes = request.max_bytes.clamp(1, LAPTOP_MAX_BYTES);
    let mut url = reqwest::Url::parse(request.url.trim())
        .map_err(|e| RpcError::new(ErrorCode::Invalid, format!("not a valid URL: {e}")))?;
    let mut redirects: Vec<String> = Vec::new();
    loop {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(RpcError::new(
                ErrorCode::Invalid,
                format!(
                    "only http and https URLs are fetched (not {})",
                    url.scheme()
                ),
            ));
        }
        let host = url
            .host_str()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string())
            .ok_or_else(|| RpcError::new(ErrorCode::Invalid, "the URL has no host"))?;
        let verdict = host_verdict(rules, &host);
        if let HostVerdict::Denied(rule) = &verdict {
            return Err(denied(format!(
                "refused: {host} is denied by rule `{rule}`"
            )));
        }
        let named = matches!(
            verdict,
            HostVerdict::Allowed {
                by_domain: true,
                ..
            }
        );
        let port = url.port_or_known_default().unwrap_or(80);
        let addrs = resolve(&host, port, deadline, named).await?;
        if !named {
            if let Some(bad) = addrs.iter().find(|a| !is_public(a.ip())) {
                let ip = bad.ip();
                return Err(denied(format!(
                    "refused: {host} is {} ({ip}), an address on the laptop's own network or \
                     otherwise not public; web_fetch reaches such addresses only for a host a \
                     rule allows by name (`WebFetch(domain:{host})` in [permissions] allow)",
                    describe(ip)
                )));
            }
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT.min(remaining))
            .timeout(remaining)
            .user_agent(concat!(
                "reasonix/",
                env!("CARGO_PKG_VERSION"),
                " (web_fetch)"
            ));
        if !addrs.is_empty() && host.parse::<IpAddr>().is_err() {
            builder = builder.resolve_to_addrs(&host, &addrs);
        }
        let client = builder
            .build()
            .map_err(|e| failed(format!("cannot initialise the HTTP client: {e}")))?;
        let resp = client
            .get(url.clone())
            .header(
                reqwest::header::ACCEPT,
                "text/html, text/markdown, text/plain;q=0.9, application/json;q=0.8, */*;q=0.1",
            )
            .send()
            .await
            .map_err(|e| failed(format!("fetching {url} failed: {}", error_chain(&e))))?;
        let status = resp.status();
        if status.is_redirection() {
            let Some(location) = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
            else {
                return Err(failed(format!(
                    "{url} answered {status} without a Location"
                )));
            };
            let next = url.join(location).map_err(|e| {
                failed(format!(
                    "{url} redirected to an invalid URL `{location}`: {e}"
                ))
            })?;
            redirects.push(format!("{} {next}", status.as_u16()));
            if redirects.len() > MAX_REDIRECTS {
                return Err(failed(format!(
                    "more than {MAX_REDIRECTS} redirects (last to {next})"
                )));
            }
            let next_host = next.host_str().unwrap_or("").to_string();
            let same_host = next_host.eq_ignore_ascii_case(&host);
            let allowed = matches!(
                host_verdict(
                    rules,
                    next_host.trim_start_matches('[').trim_end_matches(']')
                ),
                HostVerdict::Allowed { .. }
            );
            if !same_host && !allowed {
                // Checked like any hop first: a redirect to a private address is refused,
                // not reported as a URL to try.
                let target_host = next_host.trim_start_matches('[').trim_end_matches(']');
                let port = next.port_or_known_default().unwrap_or(80);
                if let Ok(addrs) = resolve(target_host, port, deadline, false).await {
                    if let Some(bad) = addrs.iter().find(|a| !is_public(a.ip())) {
                        return Err(denied(format!(
                            "refused: {url} redirected to {next}, and {target_host} is {} ({}), \
                             an address on the laptop's own network",
                            describe(bad.ip()),
                            bad.ip()
                        )));
                    }
                }
                redirects.pop();
                return Ok(WebFetchReply {
                    final_url: url.to_string(),
                    status: status.as_u16(),
                    content_type: String::new(),
                    text: String::new(),
                    truncated: false,
                    redirects,
                    unfollowed_redirect: Some(next.to_string()),
                });
            }
            url = next;
            continue;
        }
        return read_body(resp, url, status.as_u16(), redirects, max_bytes).await;
    }
}

/// The addresses of `host` (an IP literal is its own address). A name that does not resolve
/// here may still be reachable through a proxy; that is allowed only for a host an allow
/// rule names (`named`).
async fn resolve(
    host: &str,
    port: u16,
    deadline: Instant,
    named: bool,
) -> Result<Vec<SocketAddr>, RpcError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let remaining = deadline.saturating_duration_since(Instant::now());
    let looked = tokio::time::timeout(remaining, tokio::net::lookup_host((host, port))).await;
    match looked {
        Ok(Ok(addrs)) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            if addrs.is_empty() {
                Err(failed(format!("{host} has no address")))
            } else {
                Ok(addrs)
            }
        }
        Ok(Err(_)) if named && proxy_configured() => Ok(Vec::new()),
        Ok(Err(e)) => Err(failed(format!("cannot resolve {host} on the laptop: {e}"))),
        Err(_) => Err(failed(format!("resolving {host} timed out"))),
    }
}

fn proxy_configured() -> bool {
    [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

/// What kind of body a content type is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Binary,
}

fn kind_of(content_type: &str) -> Kind {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime == "text/html" || mime == "application/xhtml+xml" {
        return Kind::Html;
    }
    let text = mime.starts_with("text/")
        || mime.ends_with("+json")
        || mime.ends_with("+xml")
        || matches!(
            mime.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/ecmascript"
                | "application/x-javascript"
                | "application/toml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/x-sh"
                | "application/sql"
                | "application/graphql"
                | "image/svg+xml"
        );
    if text {
        Kind::Text
    } else {
        Kind::Binary
    }
}

async fn read_body(
    mut resp: reqwest::Response,
    url: reqwest::Url,
    status: u16,
    redirects: Vec<String>,
    max_bytes: u64,
) -> Result<WebFetchReply, RpcError> {
    let content_type = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let length = resp.content_length();
    let declared = if content_type.is_empty() {
        None
    } else {
        Some(kind_of(&content_type))
    };
    if declared == Some(Kind::Binary) {
        return Err(RpcError::new(
            ErrorCode::Invalid,
            format!(
                "refused: {url} is {content_type} ({}); web_fetch returns text only",
                length.map_or("size not given".to_string(), |n| format!("{n} bytes"))
            ),
        ));
    }
    let mut body: Vec<u8> = Vec::new();
    let mut truncated = false;
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                let room = (max_bytes as usize).saturating_sub(body.len());
                if chunk.len() > room {
                    body.extend_from_slice(&chunk[..room]);
                    truncated = true;
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => {
                return Err(failed(format!(
                    "reading {url} failed after {} bytes: {}",
                    body.len(),
                    error_chain(&e)
                )))
            }
        }
    }
    let kind = match declared {
        Some(k) => k,
        // No type given: text unless it looks binary.
        None if body[..body.len().min(8192)].contains(&0) => {
            return Err(RpcError::new(
                ErrorCode::Invalid,
                format!(
                    "refused: {url} has no content type and looks binary (a NUL byte in its first {} bytes); web_fetch returns text only",
                    body.len().min(8192)
                ),
            ))
        }
        None => Kind::Text,
    };
    let text = match kind {
        Kind::Html => html2text::from_read(&body[..], TEXT_WIDTH)
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned()),
        Kind::Text | Kind::Binary => String::from_utf8_lossy(&body).into_owned(),
    };
    // Control characters other than newline and tab would only cost escapes on the link.
    let text: String = text
        .chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect();
    Ok(WebFetchReply {
        final_url: url.to_string(),
        status,
        content_type,
        text,
        truncated,
        redirects,
        unfollowed_redirect: None,
    })
}

/// The error and its causes in one line (reqwest hides the interesting part in sources).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(&format!(": {c}"));
        cur = c.source();
    }
    s
}

/// True for an address on the public internet: not loopback, private, link-local,
/// carrier-grade NAT, multicast, documentation, benchmarking, reserved or unspecified. IPv6
/// addresses that carry an IPv4 address (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`,
/// NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by that address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 192 && b == 168)
        || (a == 198 && (18..20).contains(&b))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = embedded_v4(ip) {
        return is_public_v4(v4);
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
        || (s[0] & 0xff00) == 0xff00 // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x2001 && s[1] == 0) // Teredo: the client address is not checkable
        || (s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0)) // discard-only 100::/64
}

/// The IPv4 address an IPv6 address stands for, when it is one of the forms that carry one.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    // IPv4-compatible ::a.b.c.d (not :: and ::1, which are their own cases).
    if s[..6].iter().all(|&x| x == 0) && !ip.is_unspecified() && !ip.is_loopback() {
        return Some(tail);
    }
    // NAT64 64:ff9b::/96.
    if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6].iter().all(|&x| x == 0) {
        return Some(tail);
    }
    // 6to4 2002:AABB:CCDD::/48.
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

/// A few words for a non-public address, for the refusal.
fn describe(ip: IpAddr) -> &'static str {
    let v4 = match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => embedded_v4(v6),
    };
    match (ip, v4) {
        (_, Some(v4)) if v4.is_loopback() => "a loopback address",
        (_, Some(v4)) if v4.is_private() => "a private address",
        (_, Some(v4)) if v4.is_link_local() => "a link-local address",
        (IpAddr::V6(v6), None) if v6.is_loopback() => "a loopback address",
        (IpAddr::V6(v6), None) if (v6.segments()[0] & 0xffc0) == 0xfe80 => "a link-local address",
        (IpAddr::V6(v6), None) if (v6.segments()[0] & 0xfe00) == 0xfc00 => "a private address",
        _ => "a non-public address",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn public(s: &str) -> bool {
        is_public(s.parse().unwrap())
    }

    #[test]
    fn ipv4_classes() {
        for ip in [
            "0.0.0.0",
            "10.1.2.3",
            "127.0.0.1",
            "127.9.9.9",
            "100.64.0.1",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(!public(ip), "{ip} must not be public");
        }
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.0.1",
            "100.128.0.1",
            "192.169.0.1",
            "198.20.0.1",
        ] {
            assert!(public(ip), "{ip} is public");
        }
    }

    #[test]
    fn ipv6_classes_and_embedded_ipv4() {
        for ip in [
            "::",
            "::1",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:c0a8:0101::1",
            "2001:0:4136:e378::1",
            "100::1",
        ] {
            assert!(!public(ip), "{ip} must not be public");
        }
        for ip in [
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:0808:0808::1",
        ] {
            assert!(public(ip), "{ip} is public");
        }
        assert_eq!(
            describe("::ffff:127.0.0.1".parse().unwrap()),
            "a loopback address"
        );
        assert_eq!(describe("fd00::1".parse().unwrap()), "a private address");
        assert_eq!(
            describe("169.254.1.1".parse().unwrap()),
            "a link-local address"
        );
    }

    #[test]
    fn content_types() {
        assert_eq!(kind_of("text/html; charset=utf-8"), Kind::Html);
        assert_eq!(kind_of("application/xhtml+xml"), Kind::Html);
        assert_eq!(kind_of("text/plain"), Kind::Text);
        assert_eq!(kind_of("application/vnd.api+json"), Kind::Text);
        assert_eq!(kind_of("image/png"), Kind::Binary);
        assert_eq!(kind_of("application/octet-stream"), Kind::Binary);
    }
}
