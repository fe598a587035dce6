//! `/memory edit ID` in the real TUI under tmux (#32): the workbench gives the terminal to
//! `$EDITOR` (here a script) on the laptop, takes it back, and writes the result through
//! the same store op as `reasonix memory edit`: a sound edit is saved as a new revision (a
//! project fact on the host through the link, a global fact in the laptop's store); a
//! malformed one is refused naming the problem, the fact unchanged; an unknown id is said so.
//! The workbench keeps working after each.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod term_common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reasonix_testkit::mock_provider::MockProvider;
use term_common::{write_mock_config, Daemons, Tmux};

fn files_with(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_with(&p, needle));
        } else if std::fs::read_to_string(&p).is_ok_and(|t| t.contains(needle)) {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn active(dir: &Path, needle: &str) -> Vec<PathBuf> {
    files_with(dir, needle)
        .into_iter()
        .filter(|p| p.parent() == Some(dir) || p.parent().and_then(Path::parent) == Some(dir))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter(|p| {
            !p.components()
                .any(|c| matches!(c.as_os_str().to_str(), Some("archive" | "revisions")))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_memory_edit_opens_the_editor_and_writes_back_through_the_store() {
    let mock = MockProvider::start(Vec::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let rx_home = dir.path().join("rxhome");
    write_mock_config(&rx_home, &mock.base_url(), "RX_TUI_MEMED_KEY", "");
    let _daemons = Daemons(&rx_home);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let host = bin.parent().unwrap().join("reasonix-remote");

    // A global fact on the laptop, added before the TUI starts.
    let add = Command::new(&bin)
        .args(["memory", "add", "--global", "--type", "user"])
        .arg("Prefers rebase-finch-19 merges.")
        .current_dir(&ws)
        .env("REASONIX_HOME", &rx_home)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(add.status.success(), "{add:?}");
    let global_id = String::from_utf8_lossy(&add.stdout).trim().to_string();
    let global = rx_home.join("memory");

    // The editor: what it does is read from `mode` at each run; it logs that it ran.
    let mode = dir.path().join("mode");
    let ran = dir.path().join("editor-ran");
    let script = dir.path().join("ed.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$1\" >> {ran}\ncase \"$(cat {mode})\" in\n  good) sed -i -e 's/finch-19/finch-20/' -e 's/heron-12/heron-13/' \"$1\" ;;\n  bad) printf 'no front matter here\\n' > \"$1\" ;;\nesac\n",
            ran = ran.display(),
            mode = mode.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(&mode, "good").unwrap();

    let cmd = format!(
        "cd {} && env -u VISUAL HOME={} EDITOR={} REASONIX_HOME={} REASONIX_REMOTE_BIN={} {}",
        ws.display(),
        dir.path().display(),
        script.display(),
        rx_home.display(),
        host.display(),
        bin.display()
    );
    let project = rx_home.join("project-memory");
    let t = Tmux::tui(&cmd);
    tokio::task::block_in_place(|| {
        t.wait_for("connected");
        // A project fact (on the host) by `# note`.
        t.line("# Deploys go through staging-heron-12 first");
        t.wait_for("Remember this note?");
        t.send_keys(&["Enter"]);
        t.wait_for("recalled when a later message matches");
    });
    let noted = active(&project, "staging-heron-12");
    assert_eq!(noted.len(), 1, "{noted:?}");
    let project_id = noted[0].file_stem().unwrap().to_string_lossy().into_owned();

    tokio::task::block_in_place(|| {
        // A sound edit of the project fact: saved as revision 2 on the host.
        t.line(&format!("/memory edit {project_id}"));
        t.wait_for(&format!("saved {project_id} as revision 2"));
        // The global one, in the laptop's store.
        t.line(&format!("/memory edit {global_id}"));
        t.wait_for(&format!("saved {global_id} as revision 2"));
    });
    assert_eq!(active(&project, "staging-heron-13").len(), 1);
    assert!(active(&project, "staging-heron-12").is_empty());
    let kept = files_with(&project, "staging-heron-12");
    assert!(
        kept.len() == 1 && kept[0].to_string_lossy().contains("/revisions/"),
        "the old text is kept as a revision: {kept:?}"
    );
    assert_eq!(active(&global, "rebase-finch-20").len(), 1);
    assert!(active(&global, "rebase-finch-19").is_empty());
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap().lines().count(),
        2,
        "the editor ran once per edit"
    );

    // A malformed edit is refused; the fact keeps its text.
    std::fs::write(&mode, "bad").unwrap();
    tokio::task::block_in_place(|| {
        t.line(&format!("/memory edit {project_id}"));
        let s = t.wait_for("is unchanged; your edited text is kept");
        assert!(s.contains(&format!("/memory edit {project_id}")), "{s}");
        // An unknown id never reaches the editor.
        t.line("/memory edit no-such-fact");
        t.wait_for("no active fact \"no-such-fact\"");
        // The workbench still answers.
        t.line(&format!("/memory show {project_id}"));
        t.wait_screen(Duration::from_secs(30), "the fact shown", |s| {
            s.contains("staging-heron-13")
        });
    });
    assert_eq!(active(&project, "staging-heron-13").len(), 1);
    assert_eq!(std::fs::read_to_string(&ran).unwrap().lines().count(), 3);
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
}
