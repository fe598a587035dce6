//! API keys: the environment first, then `<home>/.env`. Nothing else in Reasonix reads keys.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// An API key. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wrap a key read from a trusted source.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Remove every occurrence of the key from `text` (defence in depth for error messages).
    pub fn redact(&self, text: &str) -> String {
        if self.0.len() < 4 {
            return text.to_string();
        }
        text.replace(&self.0, "[redacted]")
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// Where a key was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// The process environment.
    Environment,
    /// `<home>/.env`.
    DotEnv,
}

/// Why no key could be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Neither the environment nor `.env` has the variable.
    #[error("no API key: set {env} in the environment, or add a line `{env}=...` to {}", dotenv.display())]
    Missing {
        /// Variable name.
        env: String,
        /// Path of `.env`.
        dotenv: std::path::PathBuf,
    },
    /// `.env` exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// Path of `.env`.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Parse `.env` text: `KEY=VALUE` lines, `#` comments and blank lines ignored, an optional
/// `export ` prefix, values optionally in single or double quotes (quotes removed; an
/// unquoted value loses a trailing ` # comment`). Malformed lines are skipped.
pub fn parse_dotenv(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let k = k.trim();
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let v = v.trim();
        let value = if let Some(inner) = quoted(v, '"').or_else(|| quoted(v, '\'')) {
            inner.to_string()
        } else {
            match v.find(" #") {
                Some(i) => v[..i].trim_end().to_string(),
                None => v.to_string(),
            }
        };
        out.insert(k.to_string(), value);
    }
    out
}

fn quoted(v: &str, q: char) -> Option<&str> {
    let rest = v.strip_prefix(q)?;
    let end = rest.find(q)?;
    Some(&rest[..end])
}

/// Look up the key named `env`: the process environment wins, then `dotenv_path`. Empty
/// values count as absent.
pub fn lookup_api_key(env: &str, dotenv_path: &Path) -> Result<(ApiKey, KeySource), KeyError> {
    if let Some(v) = std::env::var_os(env) {
        if let Some(v) = v.to_str().map(str::trim).filter(|v| !v.is_empty()) {
            return Ok((ApiKey::new(v), KeySource::Environment));
        }
    }
    match std::fs::read_to_string(dotenv_path) {
        Ok(text) => {
            if let Some(v) = parse_dotenv(&text)
                .remove(env)
                .filter(|v| !v.trim().is_empty())
            {
                return Ok((ApiKey::new(v.trim()), KeySource::DotEnv));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(KeyError::Read {
                path: dotenv_path.to_path_buf(),
                source,
            })
        }
    }
    Err(KeyError::Missing {
        env: env.to_string(),
        dotenv: dotenv_path.to_path_buf(),
    })
}
