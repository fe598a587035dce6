//! Standalone scripted mock provider for manual runs and benchmarks.
//!
//! Usage: `mock-provider [--anthropic] SCRIPT.json` (`--anthropic`: serve the Anthropic
//! Messages wire, `POST /v1/messages`) where the file holds a JSON array of `MockReply`
//! objects tagged by `"type"`, e.g.
//! `[{"type":"text","chunks":["Hel","lo"]},{"type":"status","code":429,"retry_after":1,"body":""}]`.
//! Prints the base URL on the first line of stdout, then serves until killed (or Ctrl-C).
//! Once the script is exhausted every request gets the text reply "done".

use std::io::Write;

use reasonix_testkit::mock_provider::{MockProvider, MockReply};

#[tokio::main]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let anthropic = args.first().is_some_and(|a| a == "--anthropic");
    if anthropic {
        args.remove(0);
    }
    let Some(path) = args.first().cloned() else {
        eprintln!("usage: mock-provider [--anthropic] SCRIPT.json");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mock-provider: cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let script: Vec<MockReply> = match serde_json::from_str(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mock-provider: {path} is not a JSON array of replies: {e}");
            std::process::exit(1);
        }
    };
    let mock = if anthropic {
        MockProvider::start_anthropic(script).await
    } else {
        MockProvider::start(script).await
    };
    println!("{}", mock.base_url());
    let _ = std::io::stdout().flush();
    let _ = tokio::signal::ctrl_c().await;
    eprintln!("mock-provider: served {} requests", mock.request_count());
}
