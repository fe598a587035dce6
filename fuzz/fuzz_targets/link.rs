//! libFuzzer entry point for [`reasonix_fuzz::link`]; run with `fuzz/run.sh link` or `cargo fuzz run fuzz_link`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reasonix_fuzz::link(data));
