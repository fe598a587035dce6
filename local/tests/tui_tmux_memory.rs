//! Memory in the real `reasonix` TUI under tmux (#32): the model's global `remember` waits
//! for the approval modal and the laptop writes the fact once approved; `# note` asks its
//! scope and type in a modal before anything is written; `/memory` lists, searches, pins and
//! (after a confirmation) forgets; a secret-looking note is refused; a rewind of the turn
//! that remembered a fact offers to forget it too.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod term_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;
use term_common::{write_mock_config, Daemons, Tmux};

/// Every `*.md` file under `dir` (recursively) whose text contains `needle`.
fn files_with(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else if std::fs::read_to_string(&p).is_ok_and(|t| t.contains(needle)) {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn stem(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_memory_approval_note_slash_memory_and_rewind_offer() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "r1",
                "remember",
                &json!({
                    "content": "The user indents with tabs-walrus-77 everywhere.",
                    "type": "user",
                    "scope": "global"
                })
                .to_string(),
            )],
            9,
        ),
        MockReply::text(&["noted-it"]),
    ])
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let rx_home = dir.path().join("rxhome");
    write_mock_config(
        &rx_home,
        &mock.base_url(),
        "RX_TUI_MEM_KEY",
        // `yolo` must not answer a memory write for the user.
        "[permissions]\nmode = \"yolo\"\n",
    );
    let _daemons = Daemons(&rx_home);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let host = bin.parent().expect("bin dir").join("reasonix-remote");
    let cmd = format!(
        "cd {} && env HOME={} REASONIX_HOME={} REASONIX_REMOTE_BIN={} {}",
        ws.display(),
        dir.path().display(),
        rx_home.display(),
        host.display(),
        bin.display()
    );
    let global = rx_home.join("memory");
    let project = rx_home.join("project-memory");
    let t = Tmux::tui(&cmd);
    tokio::task::block_in_place(|| {
        t.wait_for("connected");
        // 1. The model's global remember asks, even in yolo; nothing is written before.
        t.line("remember how I indent");
        let s = t.wait_for("Approval needed");
        assert!(
            s.contains("remember") && s.contains("tabs-walrus-77"),
            "{s}"
        );
        assert!(files_with(&global, "tabs-walrus-77").is_empty());
        t.send_keys(&["y"]);
        t.wait_for("noted-it");
        let written = files_with(&global, "tabs-walrus-77");
        assert_eq!(written.len(), 1, "{written:?}");
        assert!(!written[0].to_string_lossy().contains("archive"));
        let global_id = stem(&written[0]);

        // 2. `# note`: a modal asks where; Esc writes nothing.
        t.line("# Deploys go through staging-heron-12 first");
        let s = t.wait_for("Remember this note?");
        assert!(
            s.contains("staging-heron-12") && s.contains("project"),
            "{s}"
        );
        t.send_keys(&["Escape"]);
        t.wait_screen(Duration::from_secs(30), "the modal closed", |s| {
            !s.contains("Remember this note?")
        });
        assert!(files_with(&project, "staging-heron-12").is_empty());
        // Again, then Tab to global and back, `t` to `user`, Enter.
        t.line("# Deploys go through staging-heron-12 first");
        t.wait_for("Remember this note?");
        t.send_keys(&["Tab"]);
        t.wait_for("global — yours");
        t.send_keys(&["Tab"]);
        t.wait_for("project — this workspace");
        t.send_keys(&["t"]);
        t.wait_screen(Duration::from_secs(30), "type user", |s| {
            s.lines().any(|l| l.contains("Type") && l.contains("user"))
        });
        t.send_keys(&["Enter"]);
        t.wait_for("recalled when a later message matches");
        let noted = files_with(&project, "staging-heron-12");
        assert_eq!(noted.len(), 1, "{noted:?}");
        let text = std::fs::read_to_string(&noted[0]).unwrap();
        assert!(
            text.contains("type: user") && text.contains("scope: project"),
            "{text}"
        );
        let note_id = stem(&noted[0]);
        assert!(files_with(&global, "staging-heron-12").is_empty());

        // 3. A secret-looking note is refused before anything is shown or written.
        t.line("# the db password=hunter2-secret-value");
        t.wait_for("not remembered");
        assert!(files_with(&rx_home, "hunter2-secret-value").is_empty());

        // 4. `/memory` lists both stores; search; pin.
        t.line("/memory");
        let s = t.wait_screen(Duration::from_secs(60), "the listing", |s| {
            s.contains("project facts (1)") && s.contains("global facts (1)")
        });
        assert!(s.contains(&note_id) && s.contains(&global_id), "{s}");
        t.line("/memory search heron");
        t.wait_screen(Duration::from_secs(60), "the search", |s| {
            s.lines()
                .any(|l| l.contains(&note_id) && l.contains("staging-heron-12"))
        });
        t.line(&format!("/memory pin {note_id}"));
        t.wait_for("pinned; pinned facts join");
        let text = std::fs::read_to_string(&noted[0]).unwrap();
        assert!(
            text.contains("pinned: true") && text.contains("revision: 2"),
            "{text}"
        );

        // 5. `/memory forget` asks first; `n` keeps it, `y` archives it.
        t.line(&format!("/memory forget {note_id}"));
        t.wait_for("Forget remembered facts?");
        t.send_keys(&["n"]);
        t.wait_screen(Duration::from_secs(30), "the modal closed", |s| {
            !s.contains("Forget remembered facts?")
        });
        assert!(noted[0].exists());
        t.line(&format!("/memory forget {note_id}"));
        t.wait_for("Forget remembered facts?");
        t.send_keys(&["y"]);
        t.wait_for(&format!("archived {note_id}"));
        assert!(!noted[0].exists());
        assert_eq!(
            files_with(&project.clone(), "staging-heron-12")
                .iter()
                .filter(|p| p.to_string_lossy().contains("/archive/"))
                .count(),
            1
        );

        // 6. Rewinding the turn that remembered the global fact offers to forget it.
        t.line("/rewind 1 conversation");
        let s = t.wait_for("Forget remembered facts?");
        assert!(
            s.contains(&global_id) && s.contains("the rewound turns remembered them"),
            "{s}"
        );
        t.send_keys(&["y"]);
        t.wait_for(&format!("archived {global_id}"));
        assert!(!written[0].exists());
        assert!(global
            .join("archive")
            .join(format!("{global_id}.md"))
            .exists());
    });
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
}
