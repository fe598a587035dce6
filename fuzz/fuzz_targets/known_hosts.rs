//! libFuzzer entry point for [`reasonix_fuzz::known_hosts`]; run with `fuzz/run.sh known_hosts` or `cargo fuzz run fuzz_known_hosts`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reasonix_fuzz::known_hosts(data));
