//! libFuzzer entry point for [`reasonix_fuzz::mcp_lines`]; run with `fuzz/run.sh mcp_lines` or `cargo fuzz run fuzz_mcp_lines`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reasonix_fuzz::mcp_lines(data));
