//! `reasonix-remote`: the host binary (daemon and attach bridge).

#[cfg(lead)]
include!("main_impl.rs");

#[cfg(not(lead))]
fn main() {}
