//! Session management end to end in local mode (real `reasonix` → real `reasonix-remote`
//! over pipes → the scripted mock provider): `reasonix sessions --json` fields, rename,
//! delete to the trash, restore, purge, a delete refused while a client has the session
//! open, and `reasonix run --session ID` resuming the given session (the provider receives
//! its earlier conversation).

mod common;

use common::{ok, reasonix, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use serde_json::Value;

fn setup(base_url: &str) -> LocalRig {
    LocalRig::new(base_url, "RX_SESS_KEY", "sk-sessions")
}

fn lines(s: &str) -> Vec<Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn listed(env: &LocalRig, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["sessions", "--json"];
    args.extend_from_slice(extra);
    lines(&ok(&reasonix(env, &args)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_rename_delete_restore_purge_and_resume_by_id() {
    let mock = MockProvider::start(vec![
        MockReply::text(&["first answer"]),
        MockReply::text(&["second answer"]),
        MockReply::text(&["resumed answer"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    let run = |args: &[&str]| {
        let env = &env;
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        tokio::task::block_in_place(move || {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            reasonix(env, &a)
        })
    };
    ok(&run(&["run", "fix the build\nthen run the tests"]));
    ok(&run(&["run", "explain the parser"]));

    let list = tokio::task::block_in_place(|| listed(&env, &[]));
    assert_eq!(list.len(), 2, "{list:?}");
    // Newest first; every field of the listing is there.
    assert_eq!(list[0]["title"], "explain the parser");
    assert_eq!(list[1]["title"], "fix the build");
    for s in &list {
        assert_eq!(s["turns"], 1, "{s}");
        assert_eq!(s["state"], "idle", "{s}");
        assert_eq!(s["driver_attached"], false, "{s}");
        assert_eq!(s["clients"], 0, "{s}");
        let last = s["last_activity"].as_str().expect("last_activity");
        let created = s["created"].as_str().expect("created");
        assert!(last.ends_with('Z') && last >= created, "{s}");
        assert!(s["last_seq"].as_u64().expect("last_seq") >= 3, "{s}");
    }
    let old = list[1]["id"].as_str().expect("id").to_string();
    let new = list[0]["id"].as_str().expect("id").to_string();

    // Rename: the listing shows the new title; the table too.
    ok(&run(&["sessions", "rename", &old, "Build fixes"]));
    let list = tokio::task::block_in_place(|| listed(&env, &[]));
    assert_eq!(list[1]["title"], "Build fixes");
    let table = ok(&run(&["sessions"]));
    assert!(
        table.contains("Build fixes") && table.contains(&old),
        "{table}"
    );
    assert!(table.contains("idle"), "{table}");

    // `run --session ID` resumes that session: the provider receives its first turn.
    ok(&run(&["run", "--session", &old, "and now the docs"]));
    let reqs = mock.requests();
    let last = reqs.last().expect("requests").messages();
    let users: Vec<String> = last
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        users.iter().any(|u| u.contains("fix the build"))
            && users.iter().any(|u| u.contains("and now the docs")),
        "{users:?}"
    );
    assert!(
        !users.iter().any(|u| u.contains("explain the parser")),
        "{users:?}"
    );
    let list = tokio::task::block_in_place(|| listed(&env, &[]));
    let resumed = list
        .iter()
        .find(|s| s["id"] == old.as_str())
        .expect("listed");
    assert_eq!(resumed["turns"], 2, "{resumed}");
    assert_eq!(
        resumed["title"], "Build fixes",
        "a rename survives new turns"
    );

    // Delete moves to the trash; the listing no longer has it, the trash does.
    let out = ok(&run(&["sessions", "delete", &old]));
    assert!(out.contains("restore"), "{out}");
    let list = tokio::task::block_in_place(|| listed(&env, &[]));
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], new.as_str());
    let trash = tokio::task::block_in_place(|| listed(&env, &["--trash"]));
    assert_eq!(trash.len(), 1, "{trash:?}");
    assert_eq!(trash[0]["info"]["id"], old.as_str());
    assert_eq!(trash[0]["info"]["title"], "Build fixes");
    assert!(trash[0]["purge_after"].as_str() > trash[0]["deleted"].as_str());
    // Opening a trashed session is refused with a clear error.
    let out = run(&["run", "--session", &old, "hello?"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&old),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Restore brings it back with its turns and title.
    ok(&run(&["sessions", "restore", &old]));
    let list = tokio::task::block_in_place(|| listed(&env, &[]));
    let back = list
        .iter()
        .find(|s| s["id"] == old.as_str())
        .expect("restored");
    assert_eq!(
        (back["turns"].as_u64(), back["title"].as_str()),
        (Some(2), Some("Build fixes"))
    );
    assert!(tokio::task::block_in_place(|| listed(&env, &["--trash"])).is_empty());

    // Purge: only from the trash, then gone for good.
    let out = run(&["sessions", "purge", &new]);
    assert!(
        !out.status.success(),
        "a session not in the trash is not purged"
    );
    ok(&run(&["sessions", "delete", &new]));
    let out = ok(&run(&["sessions", "purge", "--all"]));
    assert!(out.contains(&new), "{out}");
    let out = run(&["sessions", "restore", &new]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("trash"));
    let list = tokio::task::block_in_place(|| listed(&env, &[]));
    assert_eq!(list.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_open_in_a_client_is_not_deleted() {
    let mock = MockProvider::start(vec![MockReply::text(&["hi"])]).await;
    let env = setup(&mock.base_url());
    ok(&tokio::task::block_in_place(|| {
        reasonix(&env, &["run", "keep me"])
    }));
    let id = tokio::task::block_in_place(|| listed(&env, &[]))[0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    // A library client attaches to it (the same daemon: same home, same workspace).
    let rig = common::LocalRig {
        dir: tempfile::tempdir().expect("tempdir"),
        home: env.home.clone(),
        ws: env.ws.clone(),
    };
    let config = rig.config();
    let (client, _events) = rig.client(&config);
    let opened = client
        .open_session(reasonix_forward::proto::OpenSession {
            session: Some(id.clone()),
            ..Default::default()
        })
        .await
        .expect("open");
    assert_eq!(opened.session, id);
    let list = tokio::task::block_in_place(|| listed(&env, &[]));
    assert_eq!(list[0]["driver_attached"], true, "{list:?}");
    assert_eq!(list[0]["clients"], 1, "{list:?}");
    let out = tokio::task::block_in_place(|| reasonix(&env, &["sessions", "delete", &id]));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("open in 1 client"), "{err}");
    assert_eq!(tokio::task::block_in_place(|| listed(&env, &[])).len(), 1);
    drop(client);
}
