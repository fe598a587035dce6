//! `reasonix`: the laptop binary.

#[cfg(lead)]
include!("main_impl.rs");

#[cfg(not(lead))]
fn main() {}
