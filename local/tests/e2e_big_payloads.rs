//! No silent loss, end to end in local mode (the real `reasonix-remote` over pipes, the
//! scripted mock provider over real HTTP): a 12 MB bash output, a 40 MB single-line file, a
//! 5 MB MCP result (host and laptop servers) and a conversation too big for one frame all
//! reach the client, the full content is fetchable by reference with a matching SHA-256, and
//! the next turn works. Cancelling a turn closes the provider connection (the mock sees it).

mod common;

use std::path::Path;
use std::time::Duration;

use common::LocalRig;
use reasonix_forward::content::{sha256_hex, EXTERNALIZE_OVER};
use reasonix_forward::proto::{
    Event, EventKind, OpenSession, Request, Response, SessionSettings, TurnOutcome,
};
use reasonix_local::client::{Client, ClientEvent};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

/// 12 MiB: 24 MiB once JSON-encoded, beyond the 16 MiB frame limit.
const QUOTES: usize = 12 * 1024 * 1024;

/// A safety net so a lost event fails the test instead of hanging it (not a speed check).
const PATIENCE: Duration = Duration::from_secs(300);

async fn open(client: &Client) -> String {
    let open = Request::OpenSession(OpenSession {
        new: true,
        settings: SessionSettings {
            policy: reasonix_forward::proto::SessionPolicy {
                mode: reasonix_forward::proto::PermissionMode::Yolo,
                ..Default::default()
            },
            ..SessionSettings::default()
        },
        ..OpenSession::default()
    });
    match client.request(open).await.expect("open") {
        Response::SessionOpened(o) => o.session,
        other => panic!("unexpected {other:?}"),
    }
}

/// Submit `text` and collect this client's events of that turn until it finished.
async fn turn(
    client: &Client,
    events: &mut UnboundedReceiver<ClientEvent>,
    id: &str,
    text: &str,
) -> Vec<Event> {
    let r = client
        .request(Request::SubmitTurn {
            request_id: id.into(),
            text: text.into(),
        })
        .await
        .expect("submit");
    assert_eq!(r, Response::Ok);
    until_finished(events, id).await
}

async fn until_finished(events: &mut UnboundedReceiver<ClientEvent>, id: &str) -> Vec<Event> {
    let mut seen = Vec::new();
    let mut turn = None;
    tokio::time::timeout(PATIENCE, async {
        while let Some(ev) = events.recv().await {
            let ClientEvent::Event(e) = ev else { continue };
            if let EventKind::UserTurn { request_id, .. } = &e.kind {
                if request_id == id {
                    turn = Some(e.turn);
                }
            }
            if turn.is_none() || turn != Some(e.turn) {
                continue;
            }
            let done = matches!(e.kind, EventKind::TurnFinished { .. });
            seen.push(e);
            if done {
                return;
            }
        }
        panic!("the client stopped");
    })
    .await
    .unwrap_or_else(|_| panic!("turn {id} did not finish; events so far: {}", kinds(&seen)));
    seen
}

fn kinds(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e.seq,
                serde_json::to_value(&e.kind)
                    .map(|v| v["type"].to_string())
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The seqs of `events` have no holes: nothing was skipped on the way.
fn assert_contiguous(events: &[Event]) {
    for w in events.windows(2) {
        assert_eq!(
            w[1].seq,
            w[0].seq + 1,
            "a hole in the events: {}",
            kinds(events)
        );
    }
}

fn outcome(events: &[Event]) -> TurnOutcome {
    match events.last().map(|e| &e.kind) {
        Some(EventKind::TurnFinished { outcome, .. }) => *outcome,
        other => panic!("no TurnFinished: {other:?}"),
    }
}

fn tool_finished<'a>(
    events: &'a [Event],
    name: &str,
) -> (
    &'a str,
    bool,
    Option<&'a reasonix_forward::content::ContentRef>,
) {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolFinished {
                name: n,
                output,
                is_error,
                output_ref,
                ..
            } if n == name => Some((output.as_str(), *is_error, output_ref.as_ref())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {name} result in {}", kinds(events)))
}

/// The tool message the model got for `call_id` in the last request so far.
fn model_saw(mock: &MockProvider, call_id: &str) -> String {
    let reqs = mock.requests();
    let last = reqs.last().expect("a request").messages();
    last.iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no tool message for {call_id}"))
        .to_string()
}

fn bash(id: &str, command: &str) -> MockReply {
    MockReply::tool_calls(
        vec![MockToolCall::new(
            id,
            "bash",
            &json!({ "command": command }).to_string(),
        )],
        64,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_mb_of_quotes_arrive_by_reference_and_the_next_turn_works() {
    let mock = MockProvider::start(vec![
        bash("b1", &format!("head -c {QUOTES} /dev/zero | tr '\\0' '\"'")),
        MockReply::text(&["printed them"]),
        MockReply::text(&["second turn ok"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_BIG_KEY", "sk-big");
    let config = rig.config();
    let (client, mut events) = rig.client(&config);
    open(&client).await;

    let first = turn(&client, &mut events, "t1", "print quotes").await;
    assert_eq!(outcome(&first), TurnOutcome::Completed, "{}", kinds(&first));
    assert_contiguous(&first);
    let (preview, is_error, r) = tool_finished(&first, "bash");
    assert!(!is_error, "{preview}");
    let r = r.expect("a 12 MB output travels by reference");
    assert_eq!(r.bytes, QUOTES as u64);
    assert!(
        preview.len() < EXTERNALIZE_OVER,
        "the event holds a bounded view"
    );
    assert!(
        preview.starts_with('"'),
        "the view starts with the output's head"
    );

    // The client fetches the whole output and it matches the hash and the bytes.
    let full = client.fetch_content(r).await.expect("fetch");
    assert_eq!(full.len(), QUOTES);
    assert!(full.iter().all(|b| *b == b'"'));
    assert_eq!(sha256_hex(&full), r.sha256);

    // The model got the same bounded view, not 12 MB.
    assert_eq!(model_saw(&mock, "b1"), preview);

    let second = turn(&client, &mut events, "t2", "again").await;
    assert_eq!(outcome(&second), TurnOutcome::Completed);
    let text: String = second
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "second turn ok");

    // A client that catches up from the journal gets the same events, ref included.
    let (late, mut late_events) = rig.client(&config);
    let session = match late.request(Request::ListSessions).await.expect("list") {
        Response::Sessions { sessions } => sessions[0].id.clone(),
        other => panic!("{other:?}"),
    };
    let open = Request::OpenSession(OpenSession {
        session: Some(session),
        read_only: true,
        ..OpenSession::default()
    });
    late.request(open).await.expect("reopen");
    let replay = until_finished(&mut late_events, "t1").await;
    let (_, _, r2) = tool_finished(&replay, "bash");
    assert_eq!(r2, Some(r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_mb_single_line_file_is_read_and_the_next_turn_works() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "r1",
                "read_file",
                &json!({"path": "one-line.txt"}).to_string(),
            )],
            64,
        ),
        MockReply::text(&["read it"]),
        MockReply::text(&["next ok"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_BIG_KEY", "sk-big");
    std::fs::write(rig.ws.join("one-line.txt"), "\"".repeat(40 * 1024 * 1024)).expect("file");
    let config = rig.config();
    let (client, mut events) = rig.client(&config);
    open(&client).await;
    let first = turn(&client, &mut events, "t1", "read the file").await;
    assert_eq!(outcome(&first), TurnOutcome::Completed, "{}", kinds(&first));
    assert_contiguous(&first);
    let (output, is_error, _) = tool_finished(&first, "read_file");
    assert!(!is_error, "{output}");
    assert!(output.contains("[line truncated]"), "{output}");
    assert_eq!(model_saw(&mock, "r1"), output);
    let second = turn(&client, &mut events, "t2", "next").await;
    assert_eq!(outcome(&second), TurnOutcome::Completed);
}

/// A stdio MCP server (python3) whose one tool `big` returns `n` `"` characters.
fn write_big_mcp_server(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("big_mcp.py");
    std::fs::write(
        &path,
        r#"import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    mid = msg.get("id")
    method = msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "big", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "big", "description": "a big result",
                             "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}]}
    elif method == "tools/call":
        n = msg["params"]["arguments"]["n"]
        result = {"content": [{"type": "text", "text": '"' * n}]}
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no"}}) + "\n")
        sys.stdout.flush()
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()
"#,
    )
    .expect("server script");
    path
}

const MCP_BYTES: usize = 5 * 1024 * 1024;

async fn five_mb_mcp_result(run_on_laptop: bool) {
    let tool = "mcp__big__big";
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "m1",
                tool,
                &json!({ "n": MCP_BYTES }).to_string(),
            )],
            64,
        ),
        MockReply::text(&["got it"]),
        MockReply::text(&["next ok"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_BIG_KEY", "sk-big");
    let script = write_big_mcp_server(rig.dir.path());
    let decl = format!(
        "\n[[mcp]]\nname = \"big\"\ncommand = \"python3\"\nargs = [\"{}\"]\n",
        script.display()
    );
    let mut laptop_mcp = Vec::new();
    if run_on_laptop {
        let cfg = rig.home.join("config.toml");
        let mut text = std::fs::read_to_string(&cfg).expect("config");
        text.push_str(&decl);
        text.push_str("run_on = \"laptop\"\n");
        std::fs::write(&cfg, text).expect("config");
        laptop_mcp.push("big".to_string());
    } else {
        std::fs::write(rig.ws.join("reasonix.toml"), decl).expect("reasonix.toml");
    }
    let config = rig.config();
    let (client, mut events) = rig.client(&config);
    let open = Request::OpenSession(OpenSession {
        new: true,
        settings: SessionSettings {
            policy: reasonix_forward::proto::SessionPolicy {
                mode: reasonix_forward::proto::PermissionMode::Yolo,
                ..Default::default()
            },
            laptop_mcp,
            ..SessionSettings::default()
        },
        ..OpenSession::default()
    });
    client.request(open).await.expect("open");
    let first = turn(&client, &mut events, "t1", "call big").await;
    assert_eq!(outcome(&first), TurnOutcome::Completed, "{}", kinds(&first));
    assert_contiguous(&first);
    let (preview, is_error, r) = tool_finished(&first, tool);
    assert!(!is_error, "{preview}");
    let r = r.expect("a 5 MB MCP result travels by reference");
    let full = client.fetch_content(r).await.expect("fetch");
    assert_eq!(sha256_hex(&full), r.sha256);
    assert_eq!(
        full.len(),
        MCP_BYTES,
        "the full result, nothing added or cut"
    );
    assert!(full.iter().all(|b| *b == b'"'));
    assert_eq!(model_saw(&mock, "m1"), preview);
    let second = turn(&client, &mut events, "t2", "next").await;
    assert_eq!(outcome(&second), TurnOutcome::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_mb_result_of_a_host_mcp_server_arrives_by_reference() {
    five_mb_mcp_result(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_mb_result_of_a_laptop_mcp_server_crosses_the_link_in_pieces() {
    // The result line (10 MB of `\"`) is 20 MB inside an envelope: over the frame limit
    // unless it is split.
    five_mb_mcp_result(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_too_big_for_a_frame_reaches_the_provider_whole() {
    // 5 MiB of user text: the request's messages are beyond the inline limit, so the laptop
    // fetches them from the host by reference.
    let big = "q".repeat(5 * 1024 * 1024);
    let mock = MockProvider::start(vec![
        MockReply::text(&["read all of it"]),
        MockReply::text(&["and the rest"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_BIG_KEY", "sk-big");
    let config = rig.config();
    let (client, mut events) = rig.client(&config);
    open(&client).await;
    let first = turn(&client, &mut events, "t1", &big).await;
    assert_eq!(outcome(&first), TurnOutcome::Completed, "{}", kinds(&first));
    let reqs = mock.requests();
    let user: Vec<Value> = reqs[0]
        .messages()
        .into_iter()
        .filter(|m| m["role"] == "user")
        .collect();
    assert_eq!(user.len(), 1);
    assert_eq!(user[0]["content"].as_str().map(str::len), Some(big.len()));
    // The next request extends a conversation that went by reference: it arrives whole too.
    let second = turn(&client, &mut events, "t2", "and now?").await;
    assert_eq!(
        outcome(&second),
        TurnOutcome::Completed,
        "{}",
        kinds(&second)
    );
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let first_msgs = reqs[0].messages();
    let next = reqs[1].messages();
    assert_eq!(
        &next[..first_msgs.len()],
        &first_msgs[..],
        "extends the first"
    );
    assert_eq!(next.last().expect("message")["content"], "and now?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_closes_the_provider_connection_and_the_next_turn_works() {
    let mock = MockProvider::start(vec![
        MockReply::Hang {
            chunks: vec!["thinking about it".into()],
        },
        MockReply::text(&["fresh answer"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_BIG_KEY", "sk-big");
    let config = rig.config();
    let (client, mut events) = rig.client(&config);
    open(&client).await;
    client
        .request(Request::SubmitTurn {
            request_id: "t1".into(),
            text: "hang".into(),
        })
        .await
        .expect("submit");
    // Wait for the first words: the provider stream is open and the mock is hanging.
    tokio::time::timeout(PATIENCE, async {
        while let Some(ev) = events.recv().await {
            if let ClientEvent::Event(Event {
                kind: EventKind::TextDelta { .. },
                ..
            }) = ev
            {
                return;
            }
        }
    })
    .await
    .expect("the reply started");
    assert!(mock.closed_early().is_empty());
    client
        .request(Request::Cancel {
            request_id: "c1".into(),
        })
        .await
        .expect("cancel");
    // The laptop's gateway closed the HTTP stream: the mock saw its client leave.
    // Well under the gateway's 300 s idle timeout, which would also close it.
    tokio::time::timeout(Duration::from_secs(120), mock.wait_closed_early(0))
        .await
        .expect("the provider connection was closed after the cancel");
    let finished = tokio::time::timeout(PATIENCE, async {
        while let Some(ev) = events.recv().await {
            if let ClientEvent::Event(Event {
                kind: EventKind::TurnFinished { outcome, .. },
                ..
            }) = ev
            {
                return outcome;
            }
        }
        panic!("the client stopped");
    })
    .await
    .expect("the cancelled turn finished");
    assert_eq!(finished, TurnOutcome::Cancelled);
    let second = turn(&client, &mut events, "t2", "again").await;
    assert_eq!(outcome(&second), TurnOutcome::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_too_big_for_a_frame_arrives_by_reference_and_the_session_goes_on() {
    // A 9 MiB answer of `"`: its deltas are small, but the assistant message event is 18 MiB
    // of JSON, beyond the frame limit. It must reach the client whole, in its place (same
    // seq, no hole), through the content store; a second client catching up from the start
    // gets it the same way; and the session goes on (the next request carries the 9 MiB
    // answer, by reference).
    let piece = "\"".repeat(1024 * 1024);
    let mock = MockProvider::start(vec![
        MockReply::text(&[piece.as_str(); 9]),
        MockReply::text(&["still here"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_BIG_KEY", "sk-big");
    let config = rig.config();
    let (client, mut events) = rig.client(&config);
    let session = open(&client).await;
    let first = turn(&client, &mut events, "t1", "say a lot").await;
    assert_eq!(outcome(&first), TurnOutcome::Completed, "{}", kinds(&first));
    assert_contiguous(&first);
    let text_len: usize = first
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta { text } => Some(text.len()),
            _ => None,
        })
        .sum();
    assert_eq!(text_len, 9 * piece.len());
    let whole_answer = |events: &[Event]| {
        events.iter().any(|e| {
            matches!(&e.kind, EventKind::AssistantMessage { content, .. }
                if content.len() == 9 * piece.len() && content.bytes().all(|b| b == b'"'))
        })
    };
    assert!(whole_answer(&first), "{}", kinds(&first));
    assert!(
        !first.iter().any(|e| matches!(&e.kind,
            EventKind::Notice { text } if text.starts_with("error: event"))),
        "{}",
        kinds(&first)
    );

    // A second client opens the same session from seq 0: the catch-up carries it too.
    let (watcher, mut watcher_events) = rig.client(&config);
    let reopened = watcher
        .request(Request::OpenSession(OpenSession {
            session: Some(session.clone()),
            read_only: true,
            ..OpenSession::default()
        }))
        .await
        .expect("reopen");
    assert!(
        matches!(reopened, Response::SessionOpened(_)),
        "{reopened:?}"
    );
    let caught_up = tokio::time::timeout(PATIENCE, async {
        let mut seen = Vec::new();
        while let Some(ev) = watcher_events.recv().await {
            let ClientEvent::Event(e) = ev else { continue };
            let done = matches!(e.kind, EventKind::TurnFinished { .. });
            seen.push(e);
            if done {
                return seen;
            }
        }
        panic!("the watcher stopped");
    })
    .await
    .expect("the watcher caught up");
    assert_contiguous(&caught_up);
    assert!(whole_answer(&caught_up), "{}", kinds(&caught_up));
    drop(watcher);

    let second = turn(&client, &mut events, "t2", "and now?").await;
    assert_eq!(outcome(&second), TurnOutcome::Completed);
    let reqs = mock.requests();
    let answer = reqs[1]
        .messages()
        .into_iter()
        .find(|m| m["role"] == "assistant")
        .expect("the first answer is in the next request");
    assert_eq!(
        answer["content"].as_str().map(str::len),
        Some(9 * piece.len())
    );
}
