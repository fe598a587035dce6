//! `reasonix-remote`: the host side of Reasonix — daemon, attach bridge, sessions and their
//! journal, the agent loop, tools, permission policy, sandbox, checkpoints and MCP client.

#[cfg(lead)]
pub mod agent;
#[cfg(lead)]
pub mod attach;
pub mod checkpoint;
#[cfg(lead)]
pub mod daemon;
#[cfg(lead)]
pub mod journal;
pub mod mcp;
#[cfg(lead)]
pub mod paths;
pub mod policy;
pub mod sandbox;
#[cfg(lead)]
pub mod runtime;
#[cfg(lead)]
pub mod session;
pub mod tools;
