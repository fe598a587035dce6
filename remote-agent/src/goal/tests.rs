#![allow(clippy::unwrap_used)] // tests may unwrap

use super::*;
use reasonix_forward::proto::Usage;

fn started(budgets: GoalBudgets) -> EventKind {
    EventKind::Goal(GoalEvent::Started {
        goal_id: "g1".into(),
        objective: "make tests pass".into(),
        budgets,
    })
}

fn report(status: GoalReport, evidence: &str) -> EventKind {
    EventKind::Goal(GoalEvent::Reported {
        status,
        evidence: evidence.into(),
    })
}

fn turn() -> EventKind {
    EventKind::UserTurn {
        request_id: "r".into(),
        text: "t".into(),
        attachments: Vec::new(),
    }
}

fn usage(prompt: u64, completion: u64) -> EventKind {
    EventKind::Usage {
        usage: Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            ..Default::default()
        },
        model: "m".into(),
        system_hash: String::new(),
        tools_hash: String::new(),
        cache_note: None,
    }
}

#[test]
fn the_same_blocker_three_times_in_a_row_ends_the_goal() {
    let mut s = GoalState::default();
    s.observe(&started(GoalBudgets::default()), 0);
    for i in 0..2 {
        s.observe(&turn(), 0);
        s.observe(&report(GoalReport::Blocked, "  No  network "), 0);
        assert_eq!(s.after_turn(TurnOutcome::Completed, 0), Next::Turn, "{i}");
    }
    s.observe(&turn(), 0);
    s.observe(&report(GoalReport::Blocked, "no network"), 0);
    match s.after_turn(TurnOutcome::Completed, 0) {
        Next::Status(GoalStatus::Blocked, why) => assert!(why.contains("3 times"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_different_blocker_or_progress_restarts_the_count() {
    let mut s = GoalState::default();
    s.observe(&started(GoalBudgets::default()), 0);
    for ev in [
        report(GoalReport::Blocked, "a"),
        report(GoalReport::Blocked, "a"),
        report(GoalReport::Blocked, "b"),
        report(GoalReport::Blocked, "b"),
        report(GoalReport::Continue, "did x"),
        report(GoalReport::Blocked, "b"),
        report(GoalReport::Blocked, "b"),
    ] {
        s.observe(&turn(), 0);
        s.observe(&ev, 0);
        assert_eq!(s.after_turn(TurnOutcome::Completed, 0), Next::Turn);
    }
}

#[test]
fn complete_ends_with_its_evidence() {
    let mut s = GoalState::default();
    s.observe(&started(GoalBudgets::default()), 0);
    s.observe(&turn(), 0);
    s.observe(&report(GoalReport::Complete, "cargo test: 12 passed"), 0);
    assert_eq!(
        s.after_turn(TurnOutcome::Completed, 0),
        Next::Status(GoalStatus::Complete, "cargo test: 12 passed".into())
    );
}

#[test]
fn budgets_pause_and_a_resume_counts_again() {
    let mut s = GoalState::default();
    s.observe(
        &started(GoalBudgets {
            tokens: Some(100),
            ..Default::default()
        }),
        0,
    );
    s.observe(&turn(), 0);
    s.observe(&usage(60, 10), 0);
    assert_eq!(s.after_turn(TurnOutcome::Completed, 0), Next::Turn);
    s.observe(&turn(), 0);
    s.observe(&usage(25, 5), 0);
    let Next::Status(GoalStatus::BudgetPaused, why) = s.after_turn(TurnOutcome::Completed, 0)
    else {
        panic!("not paused")
    };
    assert!(why.contains("100 of 100 tokens"), "{why}");
    s.observe(
        &EventKind::Goal(GoalEvent::Status {
            status: GoalStatus::BudgetPaused,
            detail: Some(why),
        }),
        0,
    );
    // Paused: usage is not counted, and nothing runs.
    s.observe(&usage(1000, 0), 0);
    assert_eq!(s.after_turn(TurnOutcome::Completed, 0), Next::Idle);
    s.observe(
        &EventKind::Goal(GoalEvent::Status {
            status: GoalStatus::Running,
            detail: None,
        }),
        0,
    );
    s.observe(&turn(), 0);
    s.observe(&usage(50, 0), 0);
    assert_eq!(s.after_turn(TurnOutcome::Completed, 0), Next::Turn);
    let sum = s.summary().unwrap();
    assert_eq!((sum.turns, sum.tokens), (3, 150));
}

#[test]
fn time_and_cost_budgets() {
    let mut s = GoalState::default();
    s.observe(
        &started(GoalBudgets {
            minutes: Some(2),
            cost_micro_usd: Some(1_000),
            prices: Some([1_000_000, 100_000, 2_000_000]),
            ..Default::default()
        }),
        1_000,
    );
    s.observe(&turn(), 1_000);
    assert_eq!(s.after_turn(TurnOutcome::Completed, 60_000), Next::Turn);
    let Next::Status(GoalStatus::BudgetPaused, why) = s.after_turn(TurnOutcome::Completed, 121_000)
    else {
        panic!()
    };
    assert!(why.contains("time budget"), "{why}");
    // 400 uncached input tokens at $1/M and 300 output at $2/M: $0.001.
    s.observe(&usage(400, 300), 2_000);
    let Next::Status(GoalStatus::BudgetPaused, why) = s.after_turn(TurnOutcome::Completed, 2_000)
    else {
        panic!()
    };
    assert!(why.contains("cost budget"), "{why}");
}

#[test]
fn a_cancelled_turn_pauses_and_the_journal_rebuilds_the_state() {
    let mut s = GoalState::default();
    s.observe(&started(GoalBudgets::default()), 0);
    s.observe(&turn(), 0);
    assert!(matches!(
        s.after_turn(TurnOutcome::Cancelled, 0),
        Next::Status(GoalStatus::Paused, _)
    ));
    // A daemon restart closes the turn as interrupted: the goal goes on.
    assert_eq!(s.after_turn(TurnOutcome::Interrupted, 0), Next::Turn);
    assert_eq!(ts_ms("1970-01-01T00:00:01.500Z"), 1500);
}
