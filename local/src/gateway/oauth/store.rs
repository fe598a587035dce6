//! Where MCP OAuth tokens live: one JSON file on the laptop, `<config home>/mcp-oauth.json`,
//! mode 0600 (written whole to a temp file of mode 0600, then renamed). Keyed by the MCP
//! server's URL; never sent to the host as a file, only one access token per connection.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The sign-in of one server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The server name it was signed in as (`reasonix mcp login NAME`).
    pub name: String,
    /// The authorization server's token endpoint (for refresh).
    pub token_endpoint: String,
    /// The dynamically registered client.
    pub client_id: String,
    /// Its secret, when the server issued one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The RFC 8707 resource the token is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The access token.
    pub access_token: String,
    /// The refresh token, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds after which the access token is expired (`None`: unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

/// The token file.
#[derive(Debug, Clone)]
pub struct TokenStore {
    path: PathBuf,
}

impl TokenStore {
    /// The store under `config_home`.
    pub fn in_home(config_home: &Path) -> Self {
        Self {
            path: config_home.join("mcp-oauth.json"),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every grant, by server URL.
    pub fn load(&self) -> Result<BTreeMap<String, Grant>, String> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                format!(
                    "{}: not a token file ({e}); delete it and sign in again",
                    self.path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(format!("{}: {e}", self.path.display())),
        }
    }

    /// The grant of `url`.
    pub fn get(&self, url: &str) -> Result<Option<Grant>, String> {
        Ok(self.load()?.remove(url))
    }

    /// Stores (or replaces) the grant of `url`.
    pub fn put(&self, url: &str, grant: Grant) -> Result<(), String> {
        let mut all = self.load()?;
        all.insert(url.to_string(), grant);
        self.save(&all)
    }

    /// Removes the grants named `name` or of URL `name`; how many were removed.
    pub fn remove(&self, name: &str) -> Result<usize, String> {
        let mut all = self.load()?;
        let before = all.len();
        all.retain(|url, g| g.name != name && url != name);
        let removed = before - all.len();
        if removed > 0 {
            self.save(&all)?;
        }
        Ok(removed)
    }

    fn save(&self, all: &BTreeMap<String, Grant>) -> Result<(), String> {
        let err = |e: std::io::Error| format!("{}: {e}", self.path.display());
        if let Some(dir) = self.path.parent() {
            reasonix_forward::private_fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = self
            .path
            .with_extension(format!("tmp{}", std::process::id()));
        let text = serde_json::to_string_pretty(all).map_err(|e| e.to_string())?;
        let mut f = reasonix_forward::private_fs::open_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(err)?;
        f.write_all(text.as_bytes()).map_err(err)?;
        f.sync_all().map_err(err)?;
        drop(f);
        std::fs::rename(&tmp, &self.path).map_err(err)
    }
}
