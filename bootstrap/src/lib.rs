//! `reasonix-bootstrap`: reach a host over SSH and start `reasonix-remote` there.
//!
//! - [`transport`]: SSH (russh) and exec (`docker`/`podman`/`kubectl exec`) transports
//!   behind one [`Remote`] trait;
//! - [`config`]: OpenSSH command-line options and `ssh_config` files;
//! - [`dest`]: `[user@]host[:path]` and `ssh://` destinations;
//! - [`known_hosts`]: host-key lookup and recording;
//! - [`prompter`]: the callback trait through which the user is asked and informed;
//! - [`connect`]: dial (with ProxyJump), host-key check before auth, authentication;
//! - [`SshConnection::run_script`] / [`SshConnection::exec_stream`]: remote commands;
//! - [`install`]: probe, upload and verify the matching `reasonix-remote`;
//! - [`attach`]: probe, version check and attach in one exec (the warm path);
//! - [`workspaces`]: every workspace daemon on the host, and stopping one.
//! - [`codec`], [`payload`], [`cache`]: compressed and delta uploads, the laptop's cache;
//! - [`build_hint`]: the one command that builds a missing host binary.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod attach;
mod auth;
pub mod build_hint;
pub mod cache;
pub mod codec;
pub mod config;
pub mod dest;
mod error;
pub mod install;
pub mod known_hosts;
mod pattern;
pub mod payload;
pub mod platform;
pub mod prompter;
pub mod transport;
pub mod workspaces;

pub use cache::HostBinaryCache;
pub use codec::{Codec, HostCodecs};
pub use config::{ConfigError, JumpHost, ResolvedHost, SshOptions, StrictHostKeyChecking};
pub use dest::{Destination, DestinationError};
pub use error::{BootstrapError, HostKeyRefusal};
pub use install::{
    install, install_and_attach, launch_command, probe, status, stop, uninstall, InstalledVersion,
    Probe, RemoteInstall, RemoteProcess, RemoteStatus, ShippedBinaries, Target, Transfer,
    UninstallScope,
};
pub use prompter::{
    CredentialCache, HostKeyAnswer, HostKeyQuestion, HostKeyStatus, KbdRound,
    NonInteractivePrompter, Prompter, SecretPrompt, SecretPurpose, Stage, TerminalPrompter,
    UpgradeAnswer, UpgradeQuestion,
};
pub use reasonix_sftpfs as sftpfs;
pub use transport::container::{container_command, ContainerOnHost, Engine};
pub use transport::exec::{split_command, ExecConnection};
pub use transport::ssh::{connect, connect_with_cache, SshConnection};
pub use transport::ssh_exec::{
    ExecReader, ExecStream, ExecWriter, ExitInfo, ScriptOutput, StderrTail,
};
pub use transport::Remote;
