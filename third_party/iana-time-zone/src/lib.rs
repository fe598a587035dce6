//! The local system's IANA time zone name (`Europe/Berlin`), read from the `/etc/localtime`
//! link (Linux, macOS, the BSDs) or `/etc/timezone` (older Debian). The same public API as
//! crates.io's `iana-time-zone` 0.1, which this crate replaces (see its Cargo.toml for why).

use std::path::Path;

/// Why the zone name could not be found.
#[derive(Debug)]
pub enum GetTimezoneError {
    /// The link or file did not hold a zone name.
    FailedParsingString,
    /// Reading the link or file failed.
    IoError(std::io::Error),
    /// The system has no place this crate knows to read.
    OsError,
}

impl std::error::Error for GetTimezoneError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GetTimezoneError::IoError(err) => Some(err),
            _ => None,
        }
    }
}

impl std::fmt::Display for GetTimezoneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GetTimezoneError::FailedParsingString => f.write_str("GetTimezoneError::FailedParsingString"),
            GetTimezoneError::IoError(err) => err.fmt(f),
            GetTimezoneError::OsError => f.write_str("OsError"),
        }
    }
}

impl From<std::io::Error> for GetTimezoneError {
    fn from(orig: std::io::Error) -> Self {
        GetTimezoneError::IoError(orig)
    }
}

/// The current IANA time zone name.
pub fn get_timezone() -> Result<String, GetTimezoneError> {
    from_localtime_link(Path::new("/etc/localtime"))
        .or_else(|_| from_timezone_file(Path::new("/etc/timezone")))
}

/// The zone name in the target of a `localtime` link: what follows its last `zoneinfo/`
/// (`/usr/share/zoneinfo/Europe/Berlin` on Linux, `/var/db/timezone/zoneinfo/Europe/Berlin`
/// on macOS, `../usr/share/zoneinfo/…` relative, NixOS's `/etc/zoneinfo/…`).
fn from_localtime_link(link: &Path) -> Result<String, GetTimezoneError> {
    let target = std::fs::read_link(link)?;
    let target = target
        .to_str()
        .ok_or(GetTimezoneError::FailedParsingString)?;
    zone_in_link_target(target)
        .map(str::to_string)
        .ok_or(GetTimezoneError::FailedParsingString)
}

fn zone_in_link_target(target: &str) -> Option<&str> {
    let (_, zone) = target.rsplit_once("zoneinfo/")?;
    (!zone.is_empty()).then_some(zone)
}

fn from_timezone_file(file: &Path) -> Result<String, GetTimezoneError> {
    let contents = std::fs::read_to_string(file)?;
    let zone = contents.trim();
    if zone.is_empty() {
        return Err(GetTimezoneError::FailedParsingString);
    }
    Ok(zone.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_names_from_each_systems_link() {
        let cases = [
            ("/usr/share/zoneinfo/Europe/Berlin", Some("Europe/Berlin")),
            ("../usr/share/zoneinfo/Etc/UTC", Some("Etc/UTC")),
            ("/var/db/timezone/zoneinfo/America/New_York", Some("America/New_York")),
            ("/etc/zoneinfo/Asia/Shanghai", Some("Asia/Shanghai")),
            ("/usr/share/zoneinfo/", None),
            ("/some/file", None),
        ];
        for (target, want) in cases {
            assert_eq!(zone_in_link_target(target), want, "{target}");
        }
    }

    #[test]
    fn reads_a_real_link_and_file() {
        let dir = std::env::temp_dir().join(format!("iana-tz-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("localtime");
        let _ = std::fs::remove_file(&link);
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/var/db/timezone/zoneinfo/Europe/Paris", &link).unwrap();
            assert_eq!(from_localtime_link(&link).unwrap(), "Europe/Paris");
        }
        let file = dir.join("timezone");
        std::fs::write(&file, "Europe/Rome\n").unwrap();
        assert_eq!(from_timezone_file(&file).unwrap(), "Europe/Rome");
        std::fs::write(&file, "\n").unwrap();
        assert!(matches!(
            from_timezone_file(&file),
            Err(GetTimezoneError::FailedParsingString)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
