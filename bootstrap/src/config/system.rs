//! What the local system says: the user's name and home, host name, service ports, numeric
//! addresses. One implementation per system (`system/unix.rs` asks libc, `system/windows.rs`
//! the environment and the `directories` crate); the rest of `config` is the same everywhere.

#[cfg_attr(unix, path = "system/unix.rs")]
#[cfg_attr(not(unix), path = "system/windows.rs")]
mod imp;

pub(super) use imp::{
    canonical_address, default_home, home_of, local_uid, local_user, service_port, this_host,
};
