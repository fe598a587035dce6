//! libFuzzer entry point for [`reasonix_fuzz::preamble`]; run with `fuzz/run.sh preamble` or `cargo fuzz run fuzz_preamble`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reasonix_fuzz::preamble(data));
