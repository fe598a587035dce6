//! One writer per session: a second client attaches read-only while the first drives; with
//! `takeover` it becomes the driver and the first is told it is now read-only.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reasonix_forward::proto::{ClientRole, OpenSession, Request, Response, SessionSettings};
use reasonix_local::client::{Client, ClientEvent};
use reasonix_local::config::{Config, LoadOptions};
use reasonix_local::connect::LocalConnector;
use reasonix_local::gateway::Gateway;
use reasonix_testkit::mock_provider::{MockProvider, MockReply};

fn host_bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"))
        .parent()
        .expect("bin dir")
        .join("reasonix-remote");
    assert!(p.is_file(), "build the workspace binaries first");
    p
}

fn client(
    config: &Config,
    ws: &std::path::Path,
) -> (Client, tokio::sync::mpsc::UnboundedReceiver<ClientEvent>) {
    Client::start(
        Arc::new(LocalConnector {
            binary: host_bin(),
            workspace: ws.to_path_buf(),
        }),
        Arc::new(Gateway::new(config)),
        reasonix_local::client::options_for(config).0,
    )
}

fn open(session: Option<String>, takeover: bool) -> Request {
    Request::OpenSession(OpenSession {
        session,
        new: false,
        takeover,
        settings: SessionSettings {
            mode: Some("yolo".into()),
            ..SessionSettings::default()
        },
        ..OpenSession::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_client_is_read_only_until_it_takes_over() {
    let mock = MockProvider::start(vec![
        MockReply::text(&["from the first"]),
        MockReply::text(&["from the second"]),
    ])
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(
        home.join("config.toml"),
        format!("default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_ROLE_KEY\"\n", mock.base_url()),
    )
    .expect("config");
    std::fs::write(home.join(".env"), "RX_ROLE_KEY=sk-roles\n").expect(".env");
    std::env::set_var("REASONIX_HOME", &home);
    std::env::remove_var("XDG_RUNTIME_DIR");
    let config = Config::load(&LoadOptions {
        home: Some(home.clone()),
        project_dir: Some(ws.clone()),
        ..LoadOptions::default()
    })
    .expect("config");

    let (first, mut first_events) = client(&config, &ws);
    let Response::SessionOpened(o1) = first.request(open(None, false)).await.expect("open 1")
    else {
        panic!("not opened");
    };
    assert_eq!(o1.role, ClientRole::Driver);

    let (second, _second_events) = client(&config, &ws);
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
