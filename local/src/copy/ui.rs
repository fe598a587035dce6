//! `/upload` and `/download` in the workbench, and the offer made when a laptop file path is
//! pasted into the composer.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use reasonix_forward::copy::Progress;
use reasonix_forward::policy::SessionPolicy;

use super::{copy_one, describe, human, Spot};
use crate::client::Client;

/// Split `arg` like a shell would (single and double quotes, backslash escapes).
pub fn split_args(arg: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut chars = arg.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                has = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err("a quote (') is not closed".into()),
                    }
                }
            }
            '"' => {
                has = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => cur.extend(chars.next()),
                        Some(c) => cur.push(c),
                        None => return Err("a quote (\") is not closed".into()),
                    }
                }
            }
            '\\' => {
                has = true;
                cur.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            c => {
                has = true;
                cur.push(c);
            }
        }
    }
    if has {
        out.push(cur);
    }
    Ok(out)
}

/// `path` quoted for [`split_args`] when it needs it.
pub fn quote(path: &str) -> String {
    if !path.is_empty()
        && !path
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '\'' | '"' | '\\'))
    {
        return path.to_string();
    }
    format!("'{}'", path.replace('\'', "'\\''"))
}

/// The laptop file or directory a paste names, when it is exactly one existing absolute path
/// (as terminals drop files: plain, quoted, backslash-escaped, or a `file://` URL).
pub fn pasted_path(text: &str) -> Option<PathBuf> {
    let t = text.trim();
    if t.is_empty() || t.contains('\n') {
        return None;
    }
    let p = match t.strip_prefix("file://") {
        Some(rest) => PathBuf::from(percent_decode(
            rest.strip_prefix("localhost").unwrap_or(rest),
        )?),
        None => {
            let mut words = split_args(t).ok()?;
            if words.len() != 1 {
                return None;
            }
            PathBuf::from(words.pop()?)
        }
    };
    (p.is_absolute() && p.exists()).then_some(p)
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let h = std::str::from_utf8(&b[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// What `/upload ARGS` or `/download ARGS` means: (source, destination), or the usage.
///
/// - `/upload LAPTOP_PATH [HOST_PATH]`: into the workspace root by default;
/// - `/download HOST_PATH [LAPTOP_PATH]`: into the folder Reasonix was started in by default.
pub fn parse(upload: bool, arg: &str) -> Result<(Spot, Spot), String> {
    let words = split_args(arg)?;
    let usage = if upload {
        "usage: /upload LAPTOP_PATH [HOST_PATH] (default: the workspace root)"
    } else {
        "usage: /download HOST_PATH [LAPTOP_PATH] (default: the folder Reasonix started in)"
    };
    let (first, second) = match words.as_slice() {
        [a] => (a.clone(), None),
        [a, b] => (a.clone(), Some(b.clone())),
        _ => return Err(usage.into()),
    };
    // A leading `:` is accepted (as in `reasonix cp`) but not needed.
    let laptop = |s: &str| match (s.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Spot::Laptop(PathBuf::from(home).join(rest)),
        _ => Spot::Laptop(PathBuf::from(s)),
    };
    let host = |s: &str| Spot::Host(s.strip_prefix(':').unwrap_or(s).to_string());
    Ok(if upload {
        (laptop(&first), host(second.as_deref().unwrap_or("")))
    } else {
        (host(&first), laptop(second.as_deref().unwrap_or("./")))
    })
}

/// Run `/upload` or `/download` (directories included); `notice` hears the start, the
/// progress (every quarter) and the result or the error, each as one line.
pub async fn run(
    client: &Client,
    policy: &SessionPolicy,
    upload: bool,
    arg: &str,
    notice: &(dyn Fn(String) + Send + Sync),
) {
    let cmd = if upload { "/upload" } else { "/download" };
    let (src, dest) = match parse(upload, arg) {
        Ok(x) => x,
        Err(e) => return notice(format!("{cmd}: {e}")),
    };
    notice(format!("{cmd}: copying {src} to {dest}…"));
    let quarter = AtomicU64::new(0);
    let progress = |p: Progress| {
        let q = (p.done * 4).checked_div(p.total).unwrap_or(0);
        if q > quarter.load(Ordering::Relaxed) && q < 4 && p.total >= 4_000_000 {
            quarter.store(q, Ordering::Relaxed);
            notice(format!("{cmd}: {} of {}", human(p.done), human(p.total)));
        }
    };
    match copy_one(client, policy, &src, &dest, true, &progress).await {
        Ok(s) => notice(format!("{cmd}: {}", describe(&s))),
        Err(e) => notice(format!("{cmd}: {e}")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    #[test]
    fn arguments_split_like_a_shell() {
        assert_eq!(
            split_args("a 'b c' d\\ e \"f g\"").unwrap(),
            ["a", "b c", "d e", "f g"]
        );
        assert!(split_args("'open").is_err());
        assert_eq!(split_args(&quote("it's here")).unwrap(), ["it's here"]);
        assert_eq!(quote("plain/path"), "plain/path");
    }

    #[test]
    fn a_pasted_existing_path_is_recognised_in_the_forms_terminals_use() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("my shot.png");
        std::fs::write(&f, b"x").unwrap();
        let s = f.display().to_string();
        for form in [
            quote(&s),
            s.replace(' ', "\\ "),
            format!("file://{}", s.replace(' ', "%20")),
            format!("  {}\n", quote(&s)),
        ] {
            assert_eq!(pasted_path(&form), Some(f.clone()), "{form}");
        }
        assert_eq!(pasted_path("/no/such/file.png"), None);
        assert_eq!(pasted_path("relative.png"), None);
        assert_eq!(pasted_path(&format!("{s}\nmore")), None);
    }

    #[test]
    fn upload_and_download_default_their_destination() {
        let (s, d) = parse(true, "'/tmp/a b.png'").unwrap();
        assert_eq!(s, Spot::Laptop("/tmp/a b.png".into()));
        assert_eq!(d, Spot::Host(String::new()));
        let (s, d) = parse(false, ":dist/app.tar.gz /tmp/dl/").unwrap();
        assert_eq!(s, Spot::Host("dist/app.tar.gz".into()));
        assert_eq!(d, Spot::Laptop("/tmp/dl/".into()));
        let (_, d) = parse(false, "x").unwrap();
        assert_eq!(d, Spot::Laptop("./".into()));
        assert!(parse(true, "").is_err());
        assert!(parse(true, "a b c").is_err());
    }
}
