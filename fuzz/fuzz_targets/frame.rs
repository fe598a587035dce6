//! libFuzzer entry point for [`reasonix_fuzz::frame`]; run with `fuzz/run.sh frame` or `cargo fuzz run fuzz_frame`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reasonix_fuzz::frame(data));
