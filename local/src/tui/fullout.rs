//! `/output [N]`: the complete output of a tool call on demand. The transcript shows a few
//! lines; outputs over 64 KiB arrive as a bounded view plus a reference to the full content on
//! the host. This saves the whole of it (fetched chunk by chunk, SHA-256 checked) to a private
//! file on the laptop and names the file, so a 12 MB log is one `less` away, not in the TUI.

use std::io::Write;
use std::path::{Path, PathBuf};

use reasonix_forward::content::ContentRef;

use crate::client::Client;

/// One tool output the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputRequest {
    /// Tool name (part of the file name).
    pub tool: String,
    /// The output as the event carried it (complete when `full` is `None`).
    pub inline: String,
    /// The full output on the host, when the event carried a preview.
    pub full: Option<ContentRef>,
}

/// Parse the argument of `/output`: empty = the last tool call, `N` = the N-th from the end.
pub(crate) fn parse_nth(arg: &str) -> Result<usize, String> {
    if arg.is_empty() {
        return Ok(1);
    }
    match arg.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "/output takes a count from the end (1 = the last tool call), not {arg:?}"
        )),
    }
}

/// Fetch (when needed) and save the output; returns the file and its size.
pub(crate) async fn save(
    client: &Client,
    home: &Path,
    req: &OutputRequest,
) -> Result<(PathBuf, u64), String> {
    let bytes = match &req.full {
        Some(r) => client.fetch_content(r).await.map_err(|e| e.to_string())?,
        None => req.inline.clone().into_bytes(),
    };
    let dir = home.join("outputs");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let sha = reasonix_forward::content::sha256_hex(&bytes);
    let safe: String = req
        .tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{safe}-{}.txt", &sha[..12]));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    reasonix_sftpfs::mode::create_with_mode(&mut opts, 0o600);
    let mut f = opts
        .open(&path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    f.write_all(&bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok((path, bytes.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth() {
        assert_eq!(parse_nth(""), Ok(1));
        assert_eq!(parse_nth("3"), Ok(3));
        assert!(parse_nth("0").is_err());
        assert!(parse_nth("last").is_err());
    }
}
