//! libFuzzer entry point for [`reasonix_fuzz::policy_rules`]; run with `fuzz/run.sh policy_rules` or `cargo fuzz run fuzz_policy_rules`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reasonix_fuzz::policy_rules(data));
