//! OAuth for HTTP MCP servers, done on the laptop (where the browser and the tokens are):
//! discovery ([`discovery`]), dynamic client registration (RFC 7591), the authorization code
//! flow with PKCE (S256) through a loopback redirect on `127.0.0.1:<random port>`, refresh
//! before expiry, and the token file ([`store`], 0600). `reasonix mcp login|logout NAME`
//! drive it; [`access_token`] hands one current access token out per connection.

pub mod discovery;
pub mod store;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use reqwest::Url;
use serde_json::Value;
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub use store::{Grant, TokenStore};

/// How long the user has to finish signing in in the browser.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);
/// A token this close to its expiry is refreshed before use.
const EXPIRY_MARGIN_SECS: u64 = 30;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A PKCE verifier and its S256 challenge (RFC 7636).
pub fn pkce() -> (String, String) {
    let verifier = b64(&rand::random::<[u8; 32]>());
    let challenge = b64(&sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

fn http() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())
}

/// Signs in to the MCP server `name` at `server_url`: discovery, registration, the browser
/// step (`show_url` gets the authorization URL: print it, open the browser), the code
/// exchange; the grant is stored. Returns the stored grant.
pub async fn login(
    store: &TokenStore,
    name: &str,
    server_url: &str,
    show_url: impl FnOnce(&str),
) -> Result<Grant, String> {
    let http = http()?;
    let auth = discovery::discover(&http, server_url).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("could not listen on 127.0.0.1 for the sign-in redirect: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let registration = auth.registration_endpoint.as_deref().ok_or_else(|| {
        format!(
            "the authorization server {} offers no dynamic client registration; this build \
             cannot sign in to it",
            auth.issuer
        )
    })?;
    let reg = http
        .post(registration)
        .header("Content-Type", "application/json")
        .body(
            serde_json::json!({
                "client_name": "Reasonix",
                "redirect_uris": [redirect],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            })
            .to_string(),
        )
        .send()
        .await
        .map_err(|e| format!("client registration at {registration}: {e}"))?;
    let status = reg.status();
    let reg: Value = reg
        .bytes()
        .await
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        .map_err(|e| format!("client registration at {registration} (HTTP {status}): {e}"))?;
    let client_id = reg
        .get("client_id")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            format!("client registration at {registration} failed (HTTP {status}): {reg}")
        })?
        .to_string();
    let client_secret = reg
        .get("client_secret")
        .and_then(Value::as_str)
        .map(str::to_string);
    let (verifier, challenge) = pkce();
    let state = b64(&rand::random::<[u8; 16]>());
    let mut url = Url::parse(&auth.authorization_endpoint)
        .map_err(|e| format!("authorization endpoint: {e}"))?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client_id)
            .append_pair("redirect_uri", &redirect)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", &auth.resource);
        if !auth.scopes.is_empty() {
            q.append_pair("scope", &auth.scopes.join(" "));
        }
    }
    show_url(url.as_str());
    let code = tokio::time::timeout(LOGIN_TIMEOUT, receive_code(&listener, &state))
        .await
        .map_err(|_| "nobody finished signing in within 5 minutes".to_string())??;
    let mut form = vec![
        ("grant_type", "authorization_code".to_string()),
        ("code", code),
        ("redirect_uri", redirect),
        ("client_id", client_id.clone()),
        ("code_verifier", verifier),
        ("resource", auth.resource.clone()),
    ];
    if let Some(s) = &client_secret {
        form.push(("client_secret", s.clone()));
    }
    let tokens = token_request(&http, &auth.token_endpoint, &form).await?;
    let grant = Grant {
        name: name.to_string(),
        token_endpoint: auth.token_endpoint.clone(),
        client_id,
        client_secret,
        resource: Some(auth.resource.clone()),
        access_token: tokens.access_token,
        refresh_token: tokens.refresh_token,
        expires_at: tokens.expires_in.map(|s| now() + s),
    };
    store.put(server_url, grant.clone())?;
    Ok(grant)
}

struct Tokens {
    access_token: String,
    refresh_token: Option<String>,
    expires_in: Option<u64>,
}

async fn token_request(
    http: &reqwest::Client,
    endpoint: &str,
    form: &[(&str, String)],
) -> Result<Tokens, String> {
    let body: String = form
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&");
    let r = http
        .post(endpoint)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Accept", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("token request to {endpoint}: {e}"))?;
    let status = r.status();
    let v: Value = r
        .bytes()
        .await
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        .map_err(|e| format!("token request to {endpoint}: HTTP {status}: {e}"))?;
    let access_token = v
        .get("access_token")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            let error = v
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no access_token");
            format!("token request to {endpoint} failed (HTTP {status}): {error}")
        })?
        .to_string();
    Ok(Tokens {
        access_token,
        refresh_token: v
            .get("refresh_token")
            .and_then(Value::as_str)
            .map(str::to_string),
        expires_in: v.get("expires_in").and_then(Value::as_u64),
    })
}

fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Waits for the browser's redirect to `/callback?code=…&state=…`; a wrong `state` or an
/// `error=` is refused (and the browser told so).
async fn receive_code(listener: &tokio::net::TcpListener, state: &str) -> Result<String, String> {
    loop {
        let (mut sock, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 8192];
        let mut n = 0;
        while n < buf.len() {
            let got = sock.read(&mut buf[n..]).await.map_err(|e| e.to_string())?;
            if got == 0 {
                break;
            }
            n += got;
            if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        let head = String::from_utf8_lossy(&buf[..n]).to_string();
        let target = head
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("/")
            .to_string();
        let Ok(url) = Url::parse(&format!("http://127.0.0.1{target}")) else {
            continue;
        };
        if url.path() != "/callback" {
            let _ = reply(&mut sock, 404, "Not the sign-in callback.").await;
            continue;
        }
        let q: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
        if q.get("state").map(String::as_str) != Some(state) {
            let _ = reply(
                &mut sock,
                400,
                "The sign-in answer does not match this sign-in (state); ignored.",
            )
            .await;
            continue;
        }
        if let Some(e) = q.get("error") {
            let _ = reply(&mut sock, 400, "Sign-in failed; see the terminal.").await;
            return Err(format!(
                "the authorization server refused: {e} {}",
                q.get("error_description").cloned().unwrap_or_default()
            ));
        }
        if let Some(code) = q.get("code") {
            let _ = reply(
                &mut sock,
                200,
                "Signed in to the MCP server. You can close this tab and return to Reasonix.",
            )
            .await;
            return Ok(code.clone());
        }
        let _ = reply(&mut sock, 400, "No authorization code in the answer.").await;
    }
}

async fn reply(sock: &mut tokio::net::TcpStream, status: u16, text: &str) -> std::io::Result<()> {
    let body = format!("<!doctype html><title>Reasonix</title><p>{text}</p>");
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(body.as_bytes()).await?;
    sock.shutdown().await
}

/// The host's `Request::McpToken`: the access token of `url` from the token file of the
/// config home `home` (none without a home or a sign-in). Logged without the token.
pub async fn token_for_host(
    home: Option<&std::path::Path>,
    server: &str,
    url: &str,
) -> Result<Option<String>, String> {
    let Some(home) = home else {
        return Ok(None);
    };
    let token = access_token(&TokenStore::in_home(home), url).await;
    tracing::info!(
        server,
        url,
        signed_in = matches!(token, Ok(Some(_))),
        "sign-in token asked by the host"
    );
    token
}

/// A current access token for the server at `url`, refreshed first when it expired (or is
/// about to); `Ok(None)` when nobody signed in to it.
pub async fn access_token(store: &TokenStore, url: &str) -> Result<Option<String>, String> {
    let Some(mut grant) = store.get(url)? else {
        return Ok(None);
    };
    let fresh = grant
        .expires_at
        .is_none_or(|t| t > now() + EXPIRY_MARGIN_SECS);
    if fresh {
        return Ok(Some(grant.access_token));
    }
    let Some(refresh) = grant.refresh_token.clone() else {
        return Err(format!(
            "the sign-in to `{}` expired and cannot be refreshed; run `reasonix mcp login {}`",
            grant.name, grant.name
        ));
    };
    let mut form = vec![
        ("grant_type", "refresh_token".to_string()),
        ("refresh_token", refresh),
        ("client_id", grant.client_id.clone()),
    ];
    if let Some(r) = &grant.resource {
        form.push(("resource", r.clone()));
    }
    if let Some(s) = &grant.client_secret {
        form.push(("client_secret", s.clone()));
    }
    let tokens = token_request(&http()?, &grant.token_endpoint, &form)
        .await
        .map_err(|e| {
            format!(
                "refreshing the sign-in to `{}` failed ({e}); run `reasonix mcp login {}`",
                grant.name, grant.name
            )
        })?;
    grant.access_token = tokens.access_token;
    if tokens.refresh_token.is_some() {
        grant.refresh_token = tokens.refresh_token;
    }
    grant.expires_at = tokens.expires_in.map(|s| now() + s);
    store.put(url, grant.clone())?;
    Ok(Some(grant.access_token))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pkce_challenge_is_the_s256_of_the_verifier() {
        let (v, c) = pkce();
        assert_eq!(v.len(), 43);
        assert_eq!(c, b64(&sha2::Sha256::digest(v.as_bytes())));
        // RFC 7636 appendix B.
        assert_eq!(
            b64(&sha2::Sha256::digest(
                b"dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
            )),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }
}
