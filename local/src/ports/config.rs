//! `[ports]` in `config.toml`: forwarding of the host's ports (#36 §1).
//!
//! ```toml
//! [ports]
//! auto = true              # forward what the workspace's processes listen on (default)
//! ignore = [5432]          # never forward these host ports on their own
//! connect_wait_seconds = 10
//! [ports.map]
//! "3000" = 13000           # host port 3000 -> laptop port 13000
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;

use super::PortSettings;

/// The `[ports]` table of one config file.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PortsFile {
    auto: Option<bool>,
    ignore: Option<Vec<u16>>,
    #[serde(default, deserialize_with = "port_map")]
    map: Option<BTreeMap<u16, u16>>,
    connect_wait_seconds: Option<u64>,
}

/// `[ports.map]`: TOML keys are strings; each must be a port number.
fn port_map<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<u16, u16>>, D::Error> {
    let raw = BTreeMap::<String, u16>::deserialize(d)?;
    raw.into_iter()
        .map(|(k, v)| match k.trim().parse::<u16>() {
            Ok(p) if p != 0 && v != 0 => Ok((p, v)),
            _ => Err(serde::de::Error::custom(format!(
                "[ports.map] \"{k}\" = {v}: both must be TCP port numbers 1-65535 (host port = laptop port, e.g. \"3000\" = 13000)"
            ))),
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

impl PortsFile {
    /// True when the file sets something only the user's own config may set.
    pub fn loosens(&self) -> bool {
        self.auto == Some(true) || self.map.is_some() || self.connect_wait_seconds.is_some()
    }
}

impl PortSettings {
    /// Apply the user's `[ports]`.
    pub fn apply_user(&mut self, f: PortsFile) {
        if let Some(a) = f.auto {
            self.auto = a;
        }
        self.ignore.extend(f.ignore.unwrap_or_default());
        self.map.extend(f.map.unwrap_or_default());
        if let Some(s) = f.connect_wait_seconds {
            self.connect_wait = Duration::from_secs(s);
        }
    }

    /// Apply a project's `[ports]`: it may only forward less (`auto = false`, `ignore`);
    /// the rest is the user's to set.
    pub fn apply_project(&mut self, f: &PortsFile) {
        if f.auto == Some(false) {
            self.auto = false;
        }
        let ignore: BTreeSet<u16> = f.ignore.clone().unwrap_or_default().into_iter().collect();
        self.ignore.extend(ignore);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    #[test]
    fn user_sets_all_project_only_forwards_less() {
        let f: PortsFile = toml::from_str(
            "auto = false\nignore = [5432]\nconnect_wait_seconds = 3\n[map]\n3000 = 13000\n",
        )
        .unwrap();
        let mut s = PortSettings::default();
        s.apply_user(f);
        assert!(!s.auto);
        assert!(s.ignore.contains(&5432));
        assert_eq!(s.map.get(&3000), Some(&13000));
        assert_eq!(s.connect_wait, Duration::from_secs(3));
        let p: PortsFile = toml::from_str("auto = true\nignore = [22]\n[map]\n1 = 2\n").unwrap();
        assert!(p.loosens());
        let mut s = PortSettings::default();
        s.apply_project(&p);
        assert!(s.ignore.contains(&22) && s.map.is_empty());
        let bad = toml::from_str::<PortsFile>("forward_all = true\n").unwrap_err();
        assert!(bad.to_string().contains("forward_all"), "{bad}");
        let bad = toml::from_str::<PortsFile>("[map]\nweb = 80\n").unwrap_err();
        assert!(bad.to_string().contains("\"web\" = 80"), "{bad}");
    }
}
