//! `web_fetch`: a web page fetched by the laptop's gateway (the host often has no route out),
//! returned as text. The host only checks the arguments and hands the request over the link
//! ([`WebGateway`]); the laptop applies the address rule, follows redirects, caps size and
//! time and converts HTML (`local/src/gateway/web_fetch.rs`). Permission (`WebFetch` rules)
//! is decided before the tool runs, like every tool.

use std::future::Future;
use std::pin::Pin;

use reasonix_forward::proto::{WebFetchReply, WebFetchRequest};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{parse_args, Tool, ToolContext, ToolOutput};

/// Body bytes read when `max_bytes` is not given.
pub const WEB_FETCH_DEFAULT_BYTES: u64 = 2 * 1024 * 1024;
/// The largest `max_bytes` the tool passes on (the laptop has its own cap too).
pub const WEB_FETCH_MAX_BYTES: u64 = 8 * 1024 * 1024;

/// A boxed future of a fetch.
pub type FetchFuture = Pin<Box<dyn Future<Output = Result<WebFetchReply, String>> + Send>>;

/// Where `web_fetch` sends its request: the session's driving laptop.
pub trait WebGateway: Send + Sync {
    /// Fetch through the laptop; `Err` is the text the model sees.
    fn fetch(&self, request: WebFetchRequest) -> FetchFuture;
}

/// No laptop to fetch with (outside a session).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoWebGateway;

impl WebGateway for NoWebGateway {
    fn fetch(&self, _request: WebFetchRequest) -> FetchFuture {
        Box::pin(async {
            Err("web_fetch needs a laptop attached to this session (pages are fetched with the laptop's network)".to_string())
        })
    }
}

/// `web_fetch{url, max_bytes?}`.
pub struct WebFetchTool;

#[derive(Deserialize)]
struct Args {
    url: String,
    #[serde(default)]
    max_bytes: Option<u64>,
}

#[async_trait::async_trait]
impl Tool for WebFetchTool {
    fn name(&self) -> &'static str {
        "web_fetch"
    }

    fn description(&self) -> &'static str {
        "Fetch a web page (http or https) with the user's laptop network and return it as text: \
         HTML is converted to Markdown-like text, other text types are returned as they are, \
         binary types are refused. Redirects are followed (at most 5; a redirect to another \
         host may be reported instead, to fetch with a new call). Addresses on the user's local \
         network are refused unless the user allows the host. The final URL and status are \
         reported. Fetching needs the user's permission unless a rule allows the host."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The http:// or https:// URL to fetch"},
                "max_bytes": {"type": "integer", "minimum": 1, "description": "Most bytes of the body to read (default 2 MiB, at most 8 MiB)"}
            },
            "required": ["url"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        // Not a workspace writer, but a URL can carry data out: the policy asks (see
        // `policy::web`), and `read_only` must not let it through on its own.
        false
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: Args = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        if reasonix_forward::web::url_host(&a.url).is_none() {
            return ToolOutput::err(format!(
                "`{}` is not an http:// or https:// URL with a host",
                a.url
            ));
        }
        let request = WebFetchRequest {
            url: a.url.trim().to_string(),
            max_bytes: a
                .max_bytes
                .unwrap_or(WEB_FETCH_DEFAULT_BYTES)
                .clamp(1, WEB_FETCH_MAX_BYTES),
        };
        match ctx.web.fetch(request).await {
            Ok(reply) => ToolOutput::ok(render(&reply)),
            Err(e) => ToolOutput::err(format!("web_fetch {}: {e}", a.url.trim())),
        }
    }
}

/// The result text: a header naming the final URL, status, type and redirects, then the text.
pub fn render(r: &WebFetchReply) -> String {
    let mut out = format!("URL: {}\nstatus: {}", r.final_url, r.status);
    if !r.content_type.is_empty() {
        out.push_str(&format!("\ncontent-type: {}", r.content_type));
    }
    for hop in &r.redirects {
        out.push_str(&format!("\nredirected: {hop}"));
    }
    if let Some(to) = &r.unfollowed_redirect {
        out.push_str(&format!(
            "\n[redirect to another host, not followed: {to} — call web_fetch with that URL to fetch it]"
        ));
    }
    if r.truncated {
        out.push_str("\n[the body was cut at max_bytes]");
    }
    out.push_str("\n\n");
    out.push_str(&r.text);
    out
}
