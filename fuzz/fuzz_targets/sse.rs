//! libFuzzer entry point for [`reasonix_fuzz::sse`]; run with `fuzz/run.sh sse` or `cargo fuzz run fuzz_sse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reasonix_fuzz::sse(data));
