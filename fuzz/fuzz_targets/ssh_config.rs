//! libFuzzer entry point for [`reasonix_fuzz::ssh_config`]; run with `fuzz/run.sh ssh_config` or `cargo fuzz run fuzz_ssh_config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reasonix_fuzz::ssh_config(data));
