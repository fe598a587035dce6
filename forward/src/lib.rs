//! `reasonix-forward`: the wire types and the resumable link shared by `reasonix` and
//! `reasonix-remote`.
//!
//! Layers, bottom up:
//! - [`frame`]: length-prefixed frames carrying `seq`/`ack`;
//! - [`handshake`]: the preamble line and the `Hello`/`Welcome` exchange;
//! - [`link`]: a [`link::Link`] that outlives its transports (replay buffer, resume, heartbeat);
//! - [`rpc`]: requests, responses, notifications and channels multiplexed on one link;
//! - [`channel`]: the one stream primitive (open, credit, data, half-close, cancel) that
//!   provider streams, MCP lines and terminals ride on;
//! - [`proto`]: every message type;
//! - [`pty`]: the wire types of host terminals (re-exported by [`proto`]);
//! - [`content`]: large content by reference (SHA-256 refs, chunked fetch, line splitting);
//! - [`policy`]: the typed session policy and the one tighten-only merge of a project file;
//! - [`testing`]: an in-memory transport that can be cut and stalled on demand;
//! - [`child`]: a line-speaking child process (MCP stdio servers on either side);
//! - [`tunnel`]: tunnelled MCP line channels with credit-based flow control;
//! - [`prefix`]: provider requests sent as the messages after an earlier request's;
//! - [`ports`]: forwarded ports (what the daemon announces, what a port channel reaches).

pub mod agent;
pub mod attach;
pub mod channel;
pub mod child;
pub mod command_files;
pub mod content;
pub mod copy;
pub mod delta;
pub mod frame;
pub mod goal;
pub mod handshake;
pub mod hooks;
pub mod link;
pub mod memory;
pub mod payload;
pub mod plan;
pub mod policy;
pub mod ports;
pub mod prefix;
pub mod private_fs;
pub mod process_group;
pub mod proto;
mod proto_serde;
pub mod pty;
pub mod rpc;
pub mod skills;
pub mod sort;
pub mod sync;
pub mod testing;
pub mod tunnel;
pub mod units;
pub mod web;
pub mod workspaces;

/// Build id of this build: crate version plus a hash of the host-side sources (see
/// `forward/build.rs`), so `reasonix` and the `reasonix-remote` built from the same tree agree.
///
/// Tests that need two builds of one binary set [`TEST_BUILD_ID_ENV`]: a process started with
/// it reports that id instead (both on the laptop and on the host). Only tests set it.
pub fn build_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::env::var(TEST_BUILD_ID_ENV)
            .ok()
            .filter(|v| {
                !v.is_empty()
                    && v.len() <= 64
                    && v.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
            })
            .unwrap_or_else(|| compiled_build_id().to_string())
    })
}

/// The build id compiled into this binary (ignores [`TEST_BUILD_ID_ENV`]).
pub fn compiled_build_id() -> &'static str {
    match option_env!("REASONIX_BUILD_ID") {
        Some(id) => id,
        None => concat!(env!("CARGO_PKG_VERSION"), "-dev"),
    }
}

/// Environment variable through which tests give a process another build id (to run "two
/// builds" of one binary side by side). Not for production use.
pub const TEST_BUILD_ID_ENV: &str = "REASONIX_TEST_BUILD_ID";
