//! libFuzzer entry point for [`reasonix_fuzz::bash_split`]; run with `fuzz/run.sh bash_split` or `cargo fuzz run fuzz_bash_split`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reasonix_fuzz::bash_split(data));
