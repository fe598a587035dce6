//! `reasonix-remote`: the host side of Reasonix — daemon, attach bridge, sessions and their
//! journal, the agent loop, tools, permission policy, sandbox, checkpoints and MCP client.

pub mod agent;
pub mod agent_sock;
pub mod attach;
pub mod catalog;
pub mod checkpoint;
pub mod clock;
pub mod commands;
pub mod compaction;
pub mod content;
pub mod copy;
pub mod daemon;
pub mod delegate;
pub mod delta;
mod forwarder;
pub mod goal;
pub mod hooks;
pub mod journal;
pub mod mcp;
pub mod memory;
pub mod paths;
pub mod plan;
pub mod policy;
pub mod ports;
pub mod preflight;
pub mod project;
pub mod prompt_history;
pub mod pty;
pub(crate) mod runner;
pub mod runtime;
pub mod sandbox;
pub mod session;
pub mod skills;
pub mod steer;
pub mod tools;
pub mod workspaces;
