//! `reasonix-forward`: the wire types and the resumable link shared by `reasonix` and
//! `reasonix-remote`.
//!
//! Layers, bottom up:
//! - [`frame`]: length-prefixed frames carrying `seq`/`ack`;
//! - [`handshake`]: the preamble line and the `Hello`/`Welcome` exchange;
//! - [`link`]: a [`link::Link`] that outlives its transports (replay buffer, resume, heartbeat);
//! - [`rpc`]: requests, responses and notifications multiplexed on one link;
//! - [`proto`]: every message type;
//! - [`testing`]: an in-memory transport that can be cut and stalled on demand;
//! - [`child`]: a line-speaking child process (MCP stdio servers on either side).

pub mod child;
pub mod frame;
pub mod handshake;
pub mod link;
pub mod proto;
pub mod rpc;
pub mod testing;

/// Build id of this build: crate version plus a hash of the host-side sources (see
/// `forward/build.rs`), so `reasonix` and the `reasonix-remote` built from the same tree agree.
pub fn build_id() -> &'static str {
    match option_env!("REASONIX_BUILD_ID") {
        Some(id) => id,
        None => concat!(env!("CARGO_PKG_VERSION"), "-dev"),
    }
}
