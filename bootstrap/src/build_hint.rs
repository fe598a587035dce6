//! The one command that builds the static host binaries. The release build prints it when it
//! could not build one (local/build.rs compiles this file too), and `reasonix ssh` prints it
//! when the binary a host needs is missing, so the two always say the same.

/// The folder, relative to the Reasonix source folder, where a release build places
/// `reasonix` and the `reasonix-remote-<triple>` host binaries beside it.
pub const RELEASE_DIR: &str = "target/release";

/// A shell command, to run in the Reasonix source folder, that installs the Rust targets
/// `triples` (a no-op for those already there) and runs a release build, which then places
/// the host binaries for them next to `target/release/reasonix`.
pub fn build_host_binaries_command(triples: &[&str]) -> String {
    format!(
        "rustup target add {} && cargo build --release --workspace --bins",
        triples.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_names_every_target_once_and_builds_in_release() {
        let c = build_host_binaries_command(&[
            "x86_64-unknown-linux-musl",
            "aarch64-unknown-linux-musl",
        ]);
        assert_eq!(
            c,
            "rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl \
             && cargo build --release --workspace --bins"
        );
    }
}
