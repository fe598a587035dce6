//! libFuzzer entry point for [`reasonix_fuzz::handshake`]; run with `fuzz/run.sh handshake` or `cargo fuzz run fuzz_handshake`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reasonix_fuzz::handshake(data));
