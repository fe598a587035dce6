//! Plan mode over ACP, driven by the client side of the `agent-client-protocol` crate
//! against the real `reasonix acp` and host: the session offers the modes `default` and
//! `plan`; `session/set_mode plan` turns plan mode on (a `current_mode_update` says so); the
//! model's write while planning is refused; the proposed plan arrives as the ACP plan and its
//! approval as a permission request; "execute" runs it (the write then asks as in `ask` mode)
//! and the planning prompt answers once the plan ran.

mod acp_common;
mod common;

use agent_client_protocol::v1::schema::{
    ContentBlock, SessionUpdate, SetSessionModeRequest, StopReason,
};
use common::LocalRig;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;

const PLAN: &str = "## Goal\nNotes.\n\n## Steps\n1. Write done.txt\n2. Check it\n\n## Files to touch\n- done.txt\n\n## Verification\n1. cat done.txt\n";

fn call(id: &str, name: &str, args: serde_json::Value) -> MockToolCall {
    MockToolCall::new(id, name, &args.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_plan_mode_permission_then_execute() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![call(
                "w1",
                "write_file",
                json!({"path": "early.txt", "content": "x"}),
            )],
            9,
        ),
        MockReply::tool_calls(vec![call("p1", "exit_plan_mode", json!({"plan": PLAN}))], 9),
        MockReply::text(&["plan-ready"]),
        MockReply::tool_calls(
            vec![call(
                "x1",
                "write_file",
                json!({"path": "done.txt", "content": "ok"}),
            )],
            9,
        ),
        MockReply::text(&["executed"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ACP_PLAN_KEY", "sk-acp-plan");
    // Allow once: for the plan that is "execute".
    let done = acp_common::session(&rig, acp_common::allow_once, async |cx, o| {
        let modes = o.session.modes.clone();
        cx.send_request(SetSessionModeRequest::new(
            o.session.session_id.clone(),
            "plan",
        ))
        .block_task()
        .await?;
        let stop = acp_common::prompt(&cx, &o.session.session_id, "add notes").await?;
        Ok((stop, modes))
    })
    .await;
    let (stop, modes) = done.out;
    assert_eq!(stop, StopReason::EndTurn);
    let modes = modes.expect("the session offers modes");
    assert_eq!(modes.current_mode_id.0.as_ref(), "default");
    let ids: Vec<&str> = modes
        .available_modes
        .iter()
        .map(|m| m.id.0.as_ref())
        .collect();
    assert_eq!(ids, ["default", "plan"]);
    assert!(
        !rig.ws.join("early.txt").exists(),
        "a write ran while planning"
    );
    assert_eq!(
        std::fs::read_to_string(rig.ws.join("done.txt")).expect("done.txt"),
        "ok"
    );
    // The planning prompt answered only after the executing turn: all five steps ran.
    assert_eq!(mock.request_count(), 5);
    let asked = &done.asked;
    assert_eq!(asked.len(), 2, "the plan, then the write in ask mode");
    assert!(asked[0]
        .options
        .iter()
        .any(|o| o.option_id.0.as_ref() == "plan_execute"));
    let updates = &done.updates;
    let modes_seen: Vec<String> = updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::CurrentModeUpdate(m) => Some(m.current_mode_id.0.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(modes_seen, ["plan", "default"]);
    let plan = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::Plan(p) => Some(p),
            _ => None,
        })
        .expect("the plan was sent as the ACP plan");
    assert_eq!(plan.entries.len(), 2);
    assert_eq!(plan.entries[0].content, "Write done.txt");
}

/// With a planner model, the turn's route (route, depth, reason — never the user's text)
/// reaches the ACP client as an agent thought, and the executor's answer as the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_shows_the_planners_route_as_a_thought() {
    const HANDOFF_PLAN: &str = "## Goal\nSay hello in the README.\n\n## Steps\n1. Edit README.md\n2. Check it\n\n## Touch points\n- README.md: the text\n\n## Verification\n- cat README.md\n";
    let mock = MockProvider::start(vec![
        MockReply::text(&[HANDOFF_PLAN]),
        MockReply::text(&["executor-done"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ACP_ROUTE_KEY", "sk-acp-route");
    acp_common::add_config(&rig, "[agent]\nplanner_model = \"mock/m\"\n");
    std::fs::write(rig.ws.join("README.md"), "the project\n").expect("readme");
    let done = acp_common::session(&rig, acp_common::allow_once, async |cx, o| {
        acp_common::prompt(
            &cx,
            &o.session.session_id,
            "add a hello section to the readme file",
        )
        .await
    })
    .await;
    let stop = done.out;
    assert!(done.asked.is_empty(), "{:?}", done.asked);
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(mock.request_count(), 2, "the planner, then the executor");
    let updates = &done.updates;
    let text_of = |c: &agent_client_protocol::v1::schema::ContentChunk| match &c.content {
        ContentBlock::Text(t) => t.text.clone(),
        _ => String::new(),
    };
    let thoughts: String = updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentThoughtChunk(c) => Some(text_of(c)),
            _ => None,
        })
        .collect();
    assert!(
        thoughts.contains("route: plan (plan depth light; bounded_work)"),
        "{thoughts}"
    );
    assert!(
        !thoughts.contains("hello section"),
        "the route never carries the user's text: {thoughts}"
    );
    let answer: String = updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(c) => Some(text_of(c)),
            _ => None,
        })
        .collect();
    assert!(answer.contains("executor-done"), "{answer}");
    assert!(
        !answer.contains("route:"),
        "the route is not in the answer: {answer}"
    );
}
