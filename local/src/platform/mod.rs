//! What differs between the laptop systems (Linux, macOS, Windows) on the laptop side, one
//! module per concern, so that feature code has no `#[cfg]`: console signals and resizes
//! ([`signals`]), the console as a byte stream for `reasonix term` ([`console`]), the
//! workbench's screen output in row-sized pieces for wine's console ([`console_rows`]), what
//! local mode (no SSH) can do here ([`local_mode`]), reaching the laptop's ssh-agent for
//! forwarding ([`agent`]), and starting the detached goal keeper ([`detach`]). The SSH side's
//! differences (home, agent, prompts) are in
//! `reasonix_bootstrap::platform`, file modes in `reasonix_sftpfs::mode`, process trees in
//! `reasonix_forward::process_group`.

pub mod agent;
pub mod console;
pub mod console_rows;
pub mod detach;
pub mod local_mode;
pub mod signals;

pub use reasonix_bootstrap::platform::{home_dir, Os};

#[cfg(test)]
mod tests {
    use crate::config::reasonix_home_from;
    use std::ffi::OsString;
    use std::path::PathBuf;

    #[test]
    fn reasonix_home_on_each_system() {
        let home = |over: Option<&str>, h: Option<&str>| {
            reasonix_home_from(over.map(OsString::from), h.map(PathBuf::from)).ok()
        };
        assert_eq!(
            home(None, Some("/Users/me")),
            Some(PathBuf::from("/Users/me/.reasonix"))
        );
        assert_eq!(
            home(None, Some(r"C:\Users\me")),
            Some(PathBuf::from(r"C:\Users\me").join(".reasonix"))
        );
        assert_eq!(
            home(Some(r"D:\rx"), Some(r"C:\Users\me")),
            Some(PathBuf::from(r"D:\rx"))
        );
        assert_eq!(
            home(Some(""), Some("/home/me")),
            Some(PathBuf::from("/home/me/.reasonix"))
        );
        assert_eq!(home(None, None), None);
        assert_eq!(home(None, Some("")), None);
    }
}
