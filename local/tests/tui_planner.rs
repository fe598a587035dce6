//! The planner's route in the workbench (issue 38 §2): the App fed the events of a routed
//! turn (the route, the planner's handoff) and drawn with ratatui's TestBackend shows the
//! route, depth and reason (never the user's text beyond the turn itself), then the handoff.

mod tui_common;

use reasonix_forward::proto::{ClientRole, EventKind, PlanEvent};
use reasonix_local::tui::App;
use tui_common::*;

#[test]
fn the_route_and_the_handoff_are_shown() {
    let mut app = App::new(settings());
    connected(&mut app, ClientRole::Driver);
    let mut feed = Feed::new();
    feed.ev(
        &mut app,
        1.0,
        EventKind::UserTurn {
            request_id: "r1".into(),
            text: "add a hello section".into(),
            attachments: Vec::new(),
        },
    );
    feed.ev(
        &mut app,
        1.1,
        EventKind::Plan(PlanEvent::Routed {
            route: "plan".into(),
            depth: "light".into(),
            reason: "bounded_work".into(),
        }),
    );
    feed.ev(
        &mut app,
        2.0,
        EventKind::Plan(PlanEvent::Handoff {
            model: "mock/plan".into(),
            text: "[planner handoff] Goal: say hello".into(),
        }),
    );
    let screen = draw(&app, 100, 30);
    assert!(
        screen.contains("route: plan (plan depth light; bounded_work)"),
        "{screen}"
    );
    assert!(screen.contains("Planner handoff"), "{screen}");
    assert!(screen.contains("mock/plan"), "{screen}");
}
