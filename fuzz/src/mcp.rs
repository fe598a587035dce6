//! JSON-RPC lines from an MCP server (`reasonix_remote::mcp::McpClient`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reasonix_remote::mcp::{McpClient, McpConnection, ProgressSink};
use tokio::sync::mpsc;

use crate::{runtime, text};

/// A line of the script that means "let the client send its next message first".
const WAIT: &str = ">>>";

/// How often the fake server yields to the client while it waits for a message. The client
/// runs on the same thread, so this is enough for any message it is about to send; no
/// clock is involved.
const WAIT_YIELDS: usize = 16;

/// A fake server plays `data` as its output lines (`>>>` lines make it wait for the client's
/// next message), then hangs up. The client connects, lists tools and calls one with a
/// progress sink; every step must end (answer, error or "closed"), never panic or hang.
///
/// Request ids are deterministic (1 = initialize, 2 = tools/list, 3 = tools/call), so the
/// corpus can answer them.
pub fn mcp_lines(data: &[u8]) {
    let script = text(data);
    let lines: Vec<String> = script.lines().map(str::to_string).collect();
    runtime().block_on(async move {
        let (to_server, mut from_client) = mpsc::channel::<String>(64);
        let (to_client, from_server) = mpsc::channel::<String>(64);
        let seen = Arc::new(AtomicUsize::new(0));
        // Drain the client's messages all the time, so the client never blocks on a full
        // channel; count them for the `>>>` waits.
        let seen_by_drain = Arc::clone(&seen);
        let drain = tokio::spawn(async move {
            while from_client.recv().await.is_some() {
                seen_by_drain.fetch_add(1, Ordering::SeqCst);
            }
        });
        let server = tokio::spawn(async move {
            let mut waited_for = 0;
            for line in lines {
                if line == WAIT {
                    waited_for += 1;
                    for _ in 0..WAIT_YIELDS {
                        if seen.load(Ordering::SeqCst) >= waited_for {
                            break;
                        }
                        tokio::task::yield_now().await;
                    }
                    continue;
                }
                if to_client.send(line).await.is_err() {
                    return;
                }
            }
            // Dropping `to_client` hangs up: every waiting request ends with "closed".
        });
        let conn = McpConnection::new(to_server, from_server);
        // Generous: a timeout here would mean the client hangs on a closed connection.
        let limit = Duration::from_secs(30);
        if let Ok(client) = McpClient::connect("fuzz", conn, limit).await {
            let _ = client.info();
            if let Ok(tools) = client.list_tools(limit).await {
                for t in &tools {
                    let _ = reasonix_remote::mcp::sanitize_name(&t.name);
                }
            }
            let progress: ProgressSink = Arc::new(|p| {
                let _ = p.render();
            });
            if let Ok(result) = client
                .call_tool("t", serde_json::json!({}), limit, Some(progress))
                .await
            {
                let _ = result.text();
            }
            let _ = client.malformed_lines();
            drop(client);
        }
        let _ = server.await;
        drain.abort();
    });
}
