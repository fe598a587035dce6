//! The planner's lines for people (issue 38 §2), shared by the workbench's transcript and
//! ACP: the route of a turn (route, depth and reason, never the user's text) and a planner
//! that gave no plan.

/// `route: plan (plan depth light; bounded_work)`.
pub fn route_line(route: &str, depth: &str, reason: &str) -> String {
    format!("route: {route} (plan depth {depth}; {reason})")
}

/// Why the planner gave no plan, and whether the executor takes the task.
pub fn planner_failed_line(reason: &str, handed_over: bool) -> String {
    format!(
        "{reason}{}",
        if handed_over {
            "; the executor takes the task"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_the_route_and_the_handover() {
        assert_eq!(
            route_line("plan", "light", "bounded_work"),
            "route: plan (plan depth light; bounded_work)"
        );
        assert_eq!(
            planner_failed_line("no plan", true),
            "no plan; the executor takes the task"
        );
        assert_eq!(planner_failed_line("no plan", false), "no plan");
    }
}
