//! Finding who signs a server's users in: the protected resource's metadata (RFC 9728), from
//! the `resource_metadata` of its 401 `WWW-Authenticate` or the well-known URL, then the
//! authorization server's metadata (RFC 8414, or OpenID discovery).

use reqwest::Url;
use serde_json::Value;

/// What the login needs of the authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthServer {
    /// Its issuer.
    pub issuer: String,
    /// `authorization_endpoint`.
    pub authorization_endpoint: String,
    /// `token_endpoint`.
    pub token_endpoint: String,
    /// `registration_endpoint` (dynamic client registration), if offered.
    pub registration_endpoint: Option<String>,
    /// The resource (RFC 8707 `resource` parameter) the token is for.
    pub resource: String,
    /// Scopes the resource says it supports (asked for as they are).
    pub scopes: Vec<String>,
}

/// `resource_metadata="…"` of a `WWW-Authenticate: Bearer …` header.
pub fn resource_metadata_of(www_authenticate: &str) -> Option<String> {
    let i = www_authenticate.find("resource_metadata=")?;
    let rest = &www_authenticate[i + "resource_metadata=".len()..];
    let value = if let Some(q) = rest.strip_prefix('"') {
        &q[..q.find('"')?]
    } else {
        rest.split([',', ' ']).next()?
    };
    Some(value.to_string())
}

/// `base`'s origin with `well_known` and then `base`'s path (`/.well-known/X/mcp`), and the
/// origin with `well_known` alone.
fn well_known(base: &Url, name: &str) -> Vec<String> {
    let origin = base.origin().ascii_serialization();
    let path = base.path().trim_end_matches('/');
    let mut out = Vec::new();
    if !path.is_empty() {
        out.push(format!("{origin}/.well-known/{name}{path}"));
    }
    out.push(format!("{origin}/.well-known/{name}"));
    out
}

async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let r = http
        .get(url)
        .header("Accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    if !r.status().is_success() {
        return Err(format!("GET {url}: HTTP {}", r.status()));
    }
    let bytes = r.bytes().await.map_err(|e| format!("GET {url}: {e}"))?;
    serde_json::from_slice::<Value>(&bytes).map_err(|e| format!("GET {url}: not JSON: {e}"))
}

fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Discovers the authorization server of the MCP server at `server_url`.
pub async fn discover(http: &reqwest::Client, server_url: &str) -> Result<AuthServer, String> {
    let base = Url::parse(server_url).map_err(|e| format!("{server_url}: {e}"))?;
    // An unauthenticated request: a protected server answers 401 naming its metadata.
    let probe = http
        .post(base.clone())
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"reasonix","version":"0"}}}"#)
        .send()
        .await
        .map_err(|e| format!("{server_url}: {e}"))?;
    let hinted = probe
        .headers()
        .get_all("www-authenticate")
        .iter()
        .filter_map(|h| h.to_str().ok())
        .find_map(resource_metadata_of);
    let mut candidates: Vec<String> = hinted.into_iter().collect();
    candidates.extend(well_known(&base, "oauth-protected-resource"));
    let mut prm = None;
    let mut tried = Vec::new();
    for c in &candidates {
        match get_json(http, c).await {
            Ok(v) => {
                prm = Some(v);
                break;
            }
            Err(e) => tried.push(e),
        }
    }
    let prm = prm.ok_or_else(|| {
        format!(
            "{server_url} publishes no OAuth protected-resource metadata ({}); it may not need \
             sign-in, or it needs a token set in `headers`",
            tried.join("; ")
        )
    })?;
    let issuer = prm
        .get("authorization_servers")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .ok_or_else(|| {
            format!("{server_url}: its resource metadata names no authorization server")
        })?
        .to_string();
    let resource = str_field(&prm, "resource").unwrap_or_else(|| server_url.to_string());
    let scopes = prm
        .get("scopes_supported")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let issuer_url = Url::parse(&issuer).map_err(|e| format!("issuer {issuer}: {e}"))?;
    let mut as_candidates = well_known(&issuer_url, "oauth-authorization-server");
    as_candidates.extend(well_known(&issuer_url, "openid-configuration"));
    let mut tried = Vec::new();
    for c in &as_candidates {
        match get_json(http, c).await {
            Ok(m) => {
                let need = |k: &str| {
                    str_field(&m, k).ok_or_else(|| format!("{c}: no `{k}` in the metadata"))
                };
                let methods = m
                    .get("code_challenge_methods_supported")
                    .and_then(Value::as_array);
                if methods.is_some_and(|a| !a.iter().any(|x| x == "S256")) {
                    return Err(format!(
                        "the authorization server {issuer} does not offer PKCE with S256; refused"
                    ));
                }
                return Ok(AuthServer {
                    issuer: issuer.clone(),
                    authorization_endpoint: need("authorization_endpoint")?,
                    token_endpoint: need("token_endpoint")?,
                    registration_endpoint: str_field(&m, "registration_endpoint"),
                    resource,
                    scopes,
                });
            }
            Err(e) => tried.push(e),
        }
    }
    Err(format!(
        "the authorization server {issuer} publishes no metadata ({})",
        tried.join("; ")
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn resource_metadata_is_read_from_the_challenge() {
        assert_eq!(
            resource_metadata_of(r#"Bearer error="invalid_token", resource_metadata="http://a/.well-known/oauth-protected-resource/mcp""#).as_deref(),
            Some("http://a/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            resource_metadata_of("Bearer resource_metadata=http://a/x, scope=y").as_deref(),
            Some("http://a/x")
        );
        assert_eq!(resource_metadata_of("Bearer realm=x"), None);
        let u = Url::parse("http://h:1/mcp/").unwrap();
        assert_eq!(
            well_known(&u, "oauth-protected-resource"),
            [
                "http://h:1/.well-known/oauth-protected-resource/mcp",
                "http://h:1/.well-known/oauth-protected-resource"
            ]
        );
    }
}
