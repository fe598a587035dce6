//! `reasonix mcp login NAME` and `reasonix mcp logout NAME`: OAuth sign-in to an HTTP MCP
//! server, done on the laptop (`crate::gateway::oauth`); the tokens stay in the laptop's
//! `<config home>/mcp-oauth.json` (0600).

use std::path::PathBuf;

use clap::Args;
use reasonix_local::gateway::oauth;

use super::error::CliError;

/// `reasonix mcp login`.
#[derive(Args)]
pub(super) struct McpLoginArgs {
    /// The server's name (its `[[mcp]]` / `.mcp.json` entry).
    name: String,
    /// Its URL, when this laptop cannot read its declaration (a host workspace over SSH).
    #[arg(long)]
    url: Option<String>,
    /// Workspace folder whose declarations name the server (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Print the sign-in URL only; do not open a browser.
    #[arg(long)]
    no_browser: bool,
}

/// `reasonix mcp logout`.
#[derive(Args)]
pub(super) struct McpLogoutArgs {
    /// The server's name (or the URL it was signed in for).
    name: String,
}

pub(super) async fn login(args: McpLoginArgs) -> Result<(), CliError> {
    let workspace = super::workspace_or_cwd(args.workspace.clone())?;
    let config = super::load_config(&workspace, None, None, false)?;
    let url = match args.url {
        Some(u) => u,
        None => config
            .mcp
            .iter()
            .find(|m| m.name == args.name)
            .and_then(|m| m.url.clone())
            .ok_or_else(|| {
                CliError::usage(format!(
                    "no HTTP MCP server `{}` is declared here; give its address with --url",
                    args.name
                ))
            })?,
    };
    let store = oauth::TokenStore::in_home(&config.home);
    let no_browser = args.no_browser;
    let grant = oauth::login(&store, &args.name, &url, |auth_url| {
        eprintln!(
            "reasonix: sign in to `{}` in your browser:\n{auth_url}",
            args.name
        );
        if !no_browser {
            if let Err(e) = reasonix_local::ports::open_browser(auth_url) {
                eprintln!("reasonix: could not open a browser ({e}); open the address above");
            }
        }
    })
    .await
    .map_err(|e| CliError::connection(format!("signing in to `{}` failed: {e}", args.name)))?;
    let expiry = match grant.expires_at {
        Some(_) if grant.refresh_token.is_some() => ", refreshed when it expires",
        Some(_) => ", valid until it expires (no refresh token)",
        None => "",
    };
    println!(
        "signed in to `{}` ({url}); token stored in {}{expiry}",
        args.name,
        store.path().display()
    );
    Ok(())
}

pub(super) async fn logout(args: McpLogoutArgs) -> Result<(), CliError> {
    let cwd = super::workspace_or_cwd(None)?;
    let config = super::load_config(&cwd, None, None, true)?;
    let store = oauth::TokenStore::in_home(&config.home);
    match store.remove(&args.name).map_err(CliError::usage)? {
        0 => println!("not signed in to `{}`", args.name),
        n => println!(
            "signed out of `{}` ({n} token{} removed)",
            args.name,
            if n == 1 { "" } else { "s" }
        ),
    }
    Ok(())
}
