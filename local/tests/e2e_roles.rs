//! One writer per session: a second client attaches read-only while the first drives; with
//! `takeover` it becomes the driver and the first is told it is now read-only.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::LocalRig;
use reasonix_forward::proto::{
    ClientRole, EventKind, OpenSession, Request, Response, SessionSettings, TurnOutcome, TurnState,
};
use reasonix_local::client::ClientEvent;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;

fn open(session: Option<String>, takeover: bool) -> Request {
    Request::OpenSession(OpenSession {
        session,
        new: false,
        takeover,
        settings: SessionSettings {
            policy: reasonix_forward::policy::SessionPolicy {
                mode: reasonix_forward::policy::PermissionMode::Yolo,
                ..Default::default()
            },
            ..SessionSettings::default()
        },
        ..OpenSession::default()
    })
}

/// A stand-in for the host binary that records each attach bridge's pid in the returned file
/// and, from the second start on (a reconnect), runs `on_reconnect` first: `sleep 1` is a
/// laptop whose network comes back, `exec sleep 600` one that never does.
fn bridge_wrapper(rig: &LocalRig, on_reconnect: &str) -> (PathBuf, PathBuf) {
    named_bridge_wrapper(rig, "bridge", on_reconnect)
}

/// [`bridge_wrapper`] with its own file names, for several clients in one test.
fn named_bridge_wrapper(rig: &LocalRig, name: &str, on_reconnect: &str) -> (PathBuf, PathBuf) {
    let pids = rig.dir.path().join(format!("{name}.pids"));
    let wrapper = rig.dir.path().join(format!("{name}-wrapper"));
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ -s '{p}' ]; then {on_reconnect}; fi\necho $$ >> '{p}'\nexec '{bin}' \"$@\"\n",
            p = pids.display(),
            bin = common::host_bin().display()
        ),
    )
    .expect("wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    (wrapper, pids)
}

/// `kill -9` the first attach bridge recorded by [`bridge_wrapper`]: the link drops.
fn kill_first_bridge(pids: &Path) {
    let pid: i32 = std::fs::read_to_string(pids)
        .expect("pids")
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("bridge pid");
    // SAFETY: kill(2) of the bridge process this test's client started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_client_is_read_only_until_it_takes_over() {
    let mock = MockProvider::start(vec![
        MockReply::text(&["from the first"]),
        MockReply::text(&["from the second"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ROLE_KEY", "sk-roles");
    let config = rig.config();

    let (first, mut first_events) = rig.client(&config);
    let Response::SessionOpened(o1) = first.request(open(None, false)).await.expect("open 1")
    else {
        panic!("not opened");
    };
    assert_eq!(o1.role, ClientRole::Driver);

    let (second, _second_events) = rig.client(&config);
    let Response::SessionOpened(o2) = second
        .request(open(Some(o1.session.clone()), false))
        .await
        .expect("open 2")
    else {
        panic!("not opened");
    };
    assert_eq!(o2.session, o1.session);
    assert_eq!(
        o2.role,
        ClientRole::Spectator,
        "a live driver keeps the session"
    );
    let refused = second
        .request(Request::SubmitTurn {
            request_id: "s1".into(),
            text: "may I?".into(),
        })
        .await;
    let err = refused.expect_err("a spectator cannot submit");
    assert!(err.to_string().contains("read-only"), "{err}");

    // The driver still works.
    assert_eq!(
        first
            .request(Request::SubmitTurn {
                request_id: "f1".into(),
                text: "hello".into(),
            })
            .await
            .expect("driver submit"),
        Response::Ok
    );

    // Take over: the second drives, the first is told.
    second.request(Request::Takeover).await.expect("takeover");
    let told = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(ev) = first_events.recv().await {
            if let ClientEvent::Role { role, reason } = ev {
                return Some((role, reason));
            }
        }
        None
    })
    .await
    .expect("role notice within 30 s")
    .expect("client alive");
    assert_eq!(told.0, ClientRole::Spectator);
    assert!(told.1.contains("took over"), "{}", told.1);
    // Wait for the first turn to end, then the new driver can submit.
    let mut second_ok = false;
    for _ in 0..100 {
        match second
            .request(Request::SubmitTurn {
                request_id: "s2".into(),
                text: "my turn".into(),
            })
            .await
        {
            Ok(Response::Ok) | Ok(Response::Duplicate) => {
                second_ok = true;
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert!(second_ok, "the new driver can submit");
    let old = first
        .request(Request::SubmitTurn {
            request_id: "f2".into(),
            text: "still mine?".into(),
        })
        .await;
    assert!(old.is_err(), "the old driver is read-only now");
    // Both turns happened once each.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while mock.request_count() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "second turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if let Ok(Response::Status(s)) = first.request(Request::Status).await {
        unsafe {
            libc::kill(s.pid as i32, libc::SIGTERM);
        }
    }
}

/// A driver whose link is down (its laptop unreachable, the link kept for a resume) while a
/// model reply is awaited shows "waiting for laptop" to everyone watching, and `running`
/// again once it reconnects; the reply is neither lost nor asked for twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_whose_link_is_down_shows_waiting_for_laptop_until_it_resumes() {
    let chunks: Vec<String> = (0..16).map(|i| format!("w{i:02} ")).collect();
    let mock = MockProvider::start(vec![
        MockReply::text(&chunks).slow(Duration::from_millis(150))
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ROLE_KEY", "sk-roles");
    let config = rig.config();

    // The driver reaches the host through a wrapper that records each bridge's pid and, on
    // every reconnect, waits a second first (as a laptop on a dead network would).
    let (wrapper, pids) = bridge_wrapper(&rig, "sleep 1");
    let (driver, mut driver_events) = rig.client_via(&config, &wrapper);
    let Response::SessionOpened(o1) = driver.request(open(None, false)).await.expect("open") else {
        panic!("not opened");
    };
    assert_eq!(o1.role, ClientRole::Driver);
    let (watcher, mut watcher_events) = rig.client(&config);
    let Response::SessionOpened(o2) = watcher
        .request(open(Some(o1.session.clone()), false))
        .await
        .expect("open watcher")
    else {
        panic!("not opened");
    };
    assert_eq!(o2.role, ClientRole::Spectator);
    assert_eq!(
        driver
            .request(Request::SubmitTurn {
                request_id: "t1".into(),
                text: "stream".into(),
            })
            .await
            .expect("submit"),
        Response::Ok
    );

    // Everything the watcher sees, until the turn finishes.
    let collect = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(ev) = watcher_events.recv().await {
            let done = matches!(&ev, ClientEvent::Event(e) if matches!(e.kind, EventKind::TurnFinished { .. }));
            seen.push(ev);
            if done {
                break;
            }
        }
        seen
    });
    // Once the reply streams, cut the driver's link: kill its attach bridge.
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(ev) = driver_events.recv().await {
            if matches!(&ev, ClientEvent::Event(e) if matches!(e.kind, EventKind::TextDelta { .. }))
            {
                return;
            }
        }
    })
    .await
    .expect("the reply starts streaming");
    kill_first_bridge(&pids);
    let seen = tokio::time::timeout(Duration::from_secs(60), collect)
        .await
        .expect("the turn finishes")
        .expect("collector");

    let states: Vec<(TurnState, Option<String>)> = seen
        .iter()
        .filter_map(|e| match e {
            ClientEvent::State { state, detail } => Some((*state, detail.clone())),
            _ => None,
        })
        .collect();
    let waiting = states
        .iter()
        .position(|(s, d)| {
            *s == TurnState::WaitingForLaptop
                && d.as_deref()
                    .is_some_and(|d| d.contains("link to the driving client is down"))
        })
        .unwrap_or_else(|| {
            panic!("no waiting-for-laptop state while the link was down: {states:?}")
        });
    assert!(
        states[waiting..]
            .iter()
            .any(|(s, _)| *s == TurnState::Running),
        "running again after the resume: {states:?}"
    );
    let text: String = seen
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Event(ev) => match &ev.kind {
                EventKind::TextDelta { text } => Some(text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(text, chunks.concat());
    assert!(matches!(
        seen.last(),
        Some(ClientEvent::Event(e)) if matches!(&e.kind, EventKind::TurnFinished { outcome, .. } if matches!(outcome, TurnOutcome::Completed))
    ));
    assert_eq!(mock.request_count(), 1, "the reply was not asked for twice");
    assert!(
        std::fs::read_to_string(&pids)
            .expect("pids")
            .lines()
            .count()
            >= 2,
        "the driver reconnected through a new bridge"
    );
    if let Ok(Response::Status(s)) = watcher.request(Request::Status).await {
        unsafe {
            libc::kill(s.pid as i32, libc::SIGTERM);
        }
    }
}

/// Laptop MCP servers follow the driver: when a new client takes over from a driver whose
/// laptop became unreachable, a call in flight on the old laptop ends at once as a tool error
/// (never re-sent, it may have run there) instead of hanging until the old link expires, and
/// the next call starts the server on the new driver's laptop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_driver_ends_laptop_mcp_calls_stuck_on_the_old_one_and_serves_the_next() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "slow",
                "mcp__lap__trigger-long-running-operation",
                &json!({"duration": 120, "steps": 120}).to_string(),
            )],
            3,
        ),
        MockReply::text(&["the slow call ended"]),
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "echo",
                "mcp__lap__echo",
                &json!({"message": "served by the new driver"}).to_string(),
            )],
            3,
        ),
        MockReply::text(&["echoed"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ROLE_KEY", "sk-roles");
    let mut cfg = std::fs::read_to_string(rig.home.join("config.toml")).expect("config");
    cfg.push_str("\n[[mcp]]\nname = \"lap\"\ncommand = \"mcp-server-everything\"\nargs = [\"stdio\"]\nrun_on = \"laptop\"\n");
    std::fs::write(rig.home.join("config.toml"), cfg).expect("config");
    let config = rig.config();
    let laptop = reasonix_local::client::options_for(&config).1;
    assert_eq!(laptop, ["lap"]);
    let open_with_mcp = |session: Option<String>| {
        Request::OpenSession(OpenSession {
            session,
            settings: SessionSettings {
                policy: reasonix_forward::policy::SessionPolicy {
                    mode: reasonix_forward::policy::PermissionMode::Yolo,
                    ..Default::default()
                },
                laptop_mcp: laptop.clone(),
                ..SessionSettings::default()
            },
            ..OpenSession::default()
        })
    };

    // The first driver's laptop "goes away" for good: after its first bridge is killed, every
    // reconnect attempt hangs.
    let (wrapper, pids) = bridge_wrapper(&rig, "exec sleep 600");
    let (first, mut first_events) = rig.client_via(&config, &wrapper);
    let Response::SessionOpened(o1) =
        tokio::time::timeout(Duration::from_secs(120), first.request(open_with_mcp(None)))
            .await
            .expect("open in time")
            .expect("open")
    else {
        panic!("not opened");
    };
    first
        .request(Request::SubmitTurn {
            request_id: "t1".into(),
            text: "call the slow tool".into(),
        })
        .await
        .expect("submit");
    // Wait until the laptop server reports progress: the call is running on the laptop.
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(ev) = first_events.recv().await {
            if matches!(&ev, ClientEvent::ToolProgress { call_id, .. } if call_id == "slow") {
                return;
            }
        }
    })
    .await
    .expect("progress from the laptop server");
    kill_first_bridge(&pids);

    // A new client opens the session: the old driver's link is down, so it drives.
    let (second, mut second_events) = rig.client(&config);
    let Response::SessionOpened(o2) = tokio::time::timeout(
        Duration::from_secs(120),
        second.request(open_with_mcp(Some(o1.session.clone()))),
    )
    .await
    .expect("open in time")
    .expect("open 2") else {
        panic!("not opened");
    };
    assert_eq!(o2.role, ClientRole::Driver);
    // The stuck call ends (well before its 120 s), the turn completes through the new
    // driver, and the new driver's next turn runs the server on its own laptop.
    let mut finished = Vec::new();
    let mut seen = Vec::new();
    let mut turns_done = 0;
    let mut submitted = false;
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(ev) = second_events.recv().await {
            let ClientEvent::Event(e) = ev else { continue };
            seen.push(format!("{:?}", e.kind).chars().take(120).collect::<String>());
            match e.kind {
                EventKind::ToolFinished {
                    call_id,
                    is_error,
                    output,
                    ..
                } => finished.push((call_id, is_error, output)),
                EventKind::TurnFinished { outcome, .. } => {
                    assert_eq!(outcome, TurnOutcome::Completed);
                    turns_done += 1;
                    if turns_done == 2 {
                        return;
                    }
                }
                _ => {}
            }
            if turns_done == 1 && !submitted {
                submitted = true;
                second
                    .request(Request::SubmitTurn {
                        request_id: "t2".into(),
                        text: "echo".into(),
                    })
                    .await
                    .expect("submit 2");
            }
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "two turns within 60 s; tool results so far: {finished:?}; provider requests: {}; events seen by the new driver: {seen:#?}",
            mock.request_count()
        )
    });
    assert_eq!(finished.len(), 2, "{finished:?}");
    let (id, is_error, output) = &finished[0];
    assert_eq!(id, "slow");
    assert!(*is_error, "{output}");
    assert!(output.contains("driving client changed"), "{output}");
    let (id, is_error, output) = &finished[1];
    assert_eq!(id, "echo");
    assert!(!*is_error, "{output}");
    assert!(output.contains("served by the new driver"), "{output}");
    assert_eq!(mock.request_count(), 4);
    if let Ok(Response::Status(s)) = second.request(Request::Status).await {
        unsafe {
            libc::kill(s.pid as i32, libc::SIGTERM);
        }
    }
}

/// A link whose transport died is kept for a resume only when it holds something: the link
/// of a client that only asked for the daemon's status goes after a thirtieth of the grace,
/// the link of a client driving a session stays for the whole grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_that_holds_nothing_is_not_kept_for_the_whole_grace() {
    let mock = MockProvider::start(vec![]).await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ROLE_KEY", "sk-roles");
    // 300 s of grace: 10 s for a link that holds nothing (room for a loaded machine to see
    // both dead links before the bare one goes).
    std::env::set_var("REASONIX_LINK_GRACE_SECS", "300");
    let config = rig.config();
    let (holding_wrapper, holding_pids) = named_bridge_wrapper(&rig, "holding", "exec sleep 600");
    let (bare_wrapper, bare_pids) = named_bridge_wrapper(&rig, "bare", "exec sleep 600");
    let (holding, _h_events) = rig.client_via(&config, &holding_wrapper);
    let Response::SessionOpened(_) = tokio::time::timeout(
        Duration::from_secs(60),
        holding.request(Request::OpenSession(OpenSession::default())),
    )
    .await
    .expect("open in time")
    .expect("open") else {
        panic!("not opened");
    };
    let (bare, _b_events) = rig.client_via(&config, &bare_wrapper);
    let Response::Status(s) =
        tokio::time::timeout(Duration::from_secs(60), bare.request(Request::Status))
            .await
            .expect("status in time")
            .expect("status")
    else {
        panic!("no status");
    };
    assert_eq!(s.links, 2, "{s:?}");
    kill_first_bridge(&holding_pids);
    kill_first_bridge(&bare_pids);
    let (watcher, _w_events) = rig.client(&config);
    let links = || async {
        match tokio::time::timeout(Duration::from_secs(60), watcher.request(Request::Status))
            .await
            .expect("status in time")
        {
            Ok(Response::Status(s)) => (s.links, s.clients),
            other => panic!("no status: {other:?}"),
        }
    };
    // Both transports end (the watcher alone is connected), then the bare link goes.
    let guard = std::time::Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let now = links().await;
        seen.push(now);
        if now == (2, 1) {
            break;
        }
        assert!(
            std::time::Instant::now() < guard,
            "the bare link was never dropped; (links, clients) seen: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        seen.contains(&(3, 1)),
        "both dead links were kept at first: {seen:?}"
    );
    // The holding link stays in its grace: a second later it is still there.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(links().await, (2, 1));
    let pid = s.pid;
    // SAFETY: kill(2) of the daemon this test started.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
}
