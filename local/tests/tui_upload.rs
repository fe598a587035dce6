//! `/upload`, `/download` and the paste offer in the workbench's state machine: a laptop file
//! path pasted (or dropped) into the empty input becomes an `/upload` line that Enter runs;
//! anything else pasted stays text. (The copy itself is proven end to end in `cp_e2e`.)

mod tui_common;

use crossterm::event::KeyCode;
use reasonix_forward::proto::ClientRole;
use reasonix_local::tui::{Action, App};
use tui_common::*;

fn ready_app() -> App {
    let mut app = App::new(settings());
    connected(&mut app, ClientRole::Driver);
    app
}

fn transfer(actions: &[Action]) -> Option<(bool, String)> {
    actions.iter().find_map(|a| match a {
        Action::Transfer { upload, arg } => Some((*upload, arg.clone())),
        _ => None,
    })
}

#[test]
fn a_pasted_laptop_file_path_is_offered_for_upload_and_enter_runs_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shot = dir.path().join("screen shot.png");
    std::fs::write(&shot, b"png").expect("file");
    let mut app = ready_app();
    // As a terminal drops it: quoted.
    app.handle_paste(&format!("'{}'", shot.display()));
    let actions = app.handle_key(key(KeyCode::Enter));
    let (upload, arg) = transfer(&actions).expect("Enter ran the offered /upload");
    assert!(upload);
    assert_eq!(
        reasonix_local::copy::split_args(&arg).expect("quoted"),
        [shot.display().to_string()],
        "{arg}"
    );
}

#[test]
fn other_pastes_stay_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shot = dir.path().join("a.png");
    std::fs::write(&shot, b"png").expect("file");
    // A path that does not exist, and a path pasted after some text: sent as typed.
    for (before, paste) in [
        ("", "/no/such/file.png".to_string()),
        ("look at ", shot.display().to_string()),
    ] {
        let mut app = ready_app();
        type_str(&mut app, before);
        app.handle_paste(&paste);
        let actions = app.handle_key(key(KeyCode::Enter));
        assert!(transfer(&actions).is_none(), "{before}{paste}");
        let sent = actions.iter().any(
            |a| matches!(a, Action::Submit { text, .. } if *text == format!("{before}{paste}")),
        );
        assert!(sent, "{before}{paste} was not sent as text: {actions:?}");
    }
}

#[test]
fn upload_and_download_commands_become_transfers() {
    let mut app = ready_app();
    type_str(&mut app, "/download dist/app.tar.gz");
    let (upload, arg) = transfer(&app.handle_key(key(KeyCode::Enter))).expect("download");
    assert!(!upload);
    assert_eq!(arg, "dist/app.tar.gz");
    type_str(&mut app, "/upload notes.txt docs/");
    let (upload, arg) = transfer(&app.handle_key(key(KeyCode::Enter))).expect("upload");
    assert!(upload);
    assert_eq!(arg, "notes.txt docs/");
}
