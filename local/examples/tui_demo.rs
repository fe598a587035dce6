//! Manual harness for the TUI until `reasonix` itself opens it: runs [`run_tui`] on a local
//! workspace exactly as `reasonix` with no arguments will (config from `$REASONIX_HOME` and
//! `./reasonix.toml`, host binary from `$REASONIX_REMOTE_BIN` or next to the executable).
//!
//! ```text
//! REASONIX_HOME=/tmp/rx-home REASONIX_REMOTE_BIN=target/debug/reasonix-remote \
//!     cargo run -p reasonix --example tui_demo -- /path/to/workspace [--continue]
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use reasonix_local::config::{Config, LoadOptions};
use reasonix_local::connect::{locate_host_binary, Connector, LocalConnector};
use reasonix_local::tui::{run_tui, TuiOptions};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut workspace = None;
    let mut continue_last = false;
    for a in args.by_ref() {
        match a.as_str() {
            "--continue" => continue_last = true,
            other => workspace = Some(PathBuf::from(other)),
        }
    }
    let workspace = match workspace.map(Ok).unwrap_or_else(std::env::current_dir) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("tui_demo: no workspace: {e}");
            std::process::exit(2);
        }
    };
    let config = match Config::load(&LoadOptions {
        project_dir: Some(workspace.clone()),
        ..LoadOptions::default()
    }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tui_demo: {e}");
            std::process::exit(2);
        }
    };
    let binary = match locate_host_binary() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("tui_demo: {e}");
            std::process::exit(2);
        }
    };
    let connector: Arc<dyn Connector> = Arc::new(LocalConnector::new(binary, workspace.clone()));
    let code = run_tui(
        config,
        connector,
        TuiOptions {
            workspace: workspace.display().to_string(),
            continue_last,
            ..TuiOptions::default()
        },
    )
    .await;
    std::process::exit(code);
}
