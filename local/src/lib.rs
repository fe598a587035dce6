//! `reasonix`: the laptop side — CLI, config, TUI, the provider gateway (the only code that
//! holds an API key) and the client that keeps the link to the host alive.

pub mod acp;
pub mod agent_confirm;
mod agent_fwd;
pub mod always_scope;
mod by_ref;
pub mod client;
pub mod commands;
pub mod config;
pub mod connect;
pub mod context;
pub mod copy;
pub mod exec_target;
pub mod exit;
pub mod gateway;
pub mod goal;
pub mod hooks_laptop;
pub mod hooks_trust;
pub mod keeper;
mod laptop_channels;
pub mod mcp_host;
pub mod memory;
pub mod permissions;
pub mod plan_lines;
pub mod platform;
pub mod ports;
pub mod remote_status;
pub mod run;
pub mod skills;
pub mod ssh;
pub mod term;
pub mod tui;
