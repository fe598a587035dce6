//! `reasonix`: the laptop side — CLI, config, TUI, the provider gateway (the only code that
//! holds an API key) and the client that keeps the link to the host alive.

#[cfg(lead)]
pub mod client;
pub mod config;
#[cfg(lead)]
pub mod connect;
pub mod gateway;
#[cfg(lead)]
pub mod run;
