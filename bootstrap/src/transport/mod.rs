//! Transports: how bootstrap reaches a host. [`ssh`] dials with russh; `ssh_exec` runs
//! fenced scripts and the link's exec channel on that connection.

pub(crate) mod ssh;
pub(crate) mod ssh_exec;
