//! Calls one built-in tool directly, for `bench/tools_bench.sh`.
//!
//! ```text
//! tool_bench grep <pattern> <dir>        # prints the number of result lines
//! tool_bench glob <pattern> <dir>
//! tool_bench bash <command> <dir> <n> <enforce|off>   # prints mean ms per call
//! ```

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use reasonix_remote::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use reasonix_remote::tools::{ToolContext, ToolRegistry};
use serde_json::json;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!(
            "usage: tool_bench grep|glob <pattern> <dir> | bash <command> <dir> <n> <enforce|off>"
        );
        std::process::exit(2);
    }
    let (tool, arg, dir) = (args[1].as_str(), args[2].as_str(), Path::new(&args[3]));
    let mode = match args.get(5).map(String::as_str) {
        Some("enforce") => SandboxMode::Enforce,
        _ => SandboxMode::Off,
    };
    let cfg = SandboxConfig {
        bash: mode,
        ..SandboxConfig::default()
    };
    let sandbox = Arc::new(Sandbox::probe(cfg, dir));
    let mut ctx = ToolContext::new(dir, sandbox.clone());
    ctx.forbid_read.clear();
    let reg = ToolRegistry::builtin();
    let Some(t) = reg.get(tool) else {
        eprintln!("unknown tool {tool}");
        std::process::exit(2);
    };
    match tool {
        "bash" => {
            let n: u32 = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(20);
            let start = Instant::now();
            for _ in 0..n {
                let o = t.run(json!({"command": arg}), &ctx).await;
                if o.is_error {
                    eprintln!("bash failed ({}): {}", sandbox.status(), o.text);
                    std::process::exit(1);
                }
            }
            println!(
                "{:.2}",
                start.elapsed().as_secs_f64() * 1000.0 / f64::from(n)
            );
        }
        _ => {
            let o = t.run(json!({"pattern": arg}), &ctx).await;
            if o.is_error {
                eprintln!("{}", o.text);
                std::process::exit(1);
            }
            println!("{}", o.text.lines().count());
        }
    }
}
