//! The laptop's goal keeper (issue 38 §3): a standby gateway beside the driver. A goal
//! goes on with no workbench attached, but its model requests still go through a laptop
//! gateway (the key never leaves the laptop); the keeper is a small laptop process that
//! holds a link for that while the goal runs. It never drives: it cannot submit, approve or
//! change settings (every such request asks for the driver role), and the session uses its
//! gateway only while no driver with a live link is there.

use super::*;

/// Which gateway a model request goes through: the driver while its link is up, else a
/// standby (keeper) whose link is up, else the driver whose link is down (the request waits
/// for its resume, as it always did), else a standby whose link is down. `None`: no gateway
/// at all ("waiting for laptop"). Arguments: each slot's gateway and whether its link is up.
pub(crate) fn pick<T: Clone>(driver: Option<(T, bool)>, standby: Option<(T, bool)>) -> Option<T> {
    match (driver, standby) {
        (Some((d, true)), _) => Some(d),
        (_, Some((s, true))) => Some(s),
        (Some((d, false)), _) => Some(d),
        (None, Some((s, false))) => Some(s),
        (None, None) => None,
    }
}

fn with_state(g: Option<Arc<dyn DriverLink>>) -> Option<(Arc<dyn DriverLink>, bool)> {
    g.map(|g| {
        let up = *g.link_state().borrow();
        (g, up)
    })
}

impl Session {
    /// Add a laptop's goal keeper: a gateway used only while no driver with a live link is
    /// attached ([`pick`]). The latest keeper comes first; an earlier one (another laptop's)
    /// stays as a fallback until its link is released.
    pub fn add_standby(&self, gateway: Arc<dyn DriverLink>) {
        let id = gateway.conn_id();
        self.standby.send_modify(|list| {
            list.retain(|g| g.conn_id() != id);
            list.insert(0, gateway);
        });
    }

    /// Drop the keeper of `conn_id`, if it is one.
    pub(super) fn release_standby(&self, conn_id: u64) {
        self.standby.send_if_modified(|list| {
            let before = list.len();
            list.retain(|g| g.conn_id() != conn_id);
            list.len() != before
        });
    }

    /// True when the link `conn_id` is one of the session's keepers.
    pub fn is_standby(&self, conn_id: u64) -> bool {
        self.standby.borrow().iter().any(|g| g.conn_id() == conn_id)
    }

    /// True when a keeper is attached with its link up.
    pub fn standby_live(&self) -> bool {
        self.standby_live_count() > 0
    }

    /// How many keepers are attached with their link up.
    pub fn standby_live_count(&self) -> u32 {
        let n = self
            .standby
            .borrow()
            .iter()
            .filter(|g| *g.link_state().borrow())
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The keeper to use: the first whose link is up, else the latest.
    fn standby_gateway(&self) -> Option<(Arc<dyn DriverLink>, bool)> {
        let list = self.standby.borrow().clone();
        let live = list.iter().find(|g| *g.link_state().borrow()).cloned();
        match live {
            Some(g) => Some((g, true)),
            None => list.first().cloned().map(|g| (g, false)),
        }
    }

    /// The gateway a model request goes through now ([`pick`]).
    pub(super) fn current_gateway(&self) -> Option<Arc<dyn DriverLink>> {
        let driver = with_state(self.driver.borrow().clone());
        pick(driver, self.standby_gateway())
    }

    /// Wait for a gateway ([`pick`]); woken when a driver or keeper comes or goes, and when
    /// either's link goes up or down. `None` when cancelled.
    pub(super) async fn wait_any_gateway(
        &self,
        cancel: &CancellationToken,
    ) -> Option<Arc<dyn DriverLink>> {
        let mut drivers = self.driver.subscribe();
        let mut standbys = self.standby.subscribe();
        loop {
            drivers.borrow_and_update();
            standbys.borrow_and_update();
            if let Some(g) = self.current_gateway() {
                return Some(g);
            }
            // A goal runs with no client (#38 §3): say why it stopped and that it goes on
            // by itself when a laptop attaches.
            let detail = if self.goal_running() {
                reasonix_forward::goal::WAITING_FOR_LAPTOP
            } else {
                "waiting for laptop: the model is reached through a client's gateway"
            };
            self.set_state(TurnState::WaitingForLaptop, Some(detail.into()));
            tokio::select! {
                _ = cancel.cancelled() => return None,
                r = drivers.changed() => if r.is_err() { return None; },
                r = standbys.changed() => if r.is_err() { return None; },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn a_live_driver_wins_and_a_live_keeper_stands_in_for_a_dead_one() {
        // The driver with its link up always wins, keeper or not.
        assert_eq!(pick(Some(("d", true)), Some(("k", true))), Some("d"));
        assert_eq!(pick(Some(("d", true)), Some(("k", false))), Some("d"));
        assert_eq!(pick(Some(("d", true)), None), Some("d"));
        // A driver whose client was killed (link down, kept for a resume): the keeper.
        assert_eq!(pick(Some(("d", false)), Some(("k", true))), Some("k"));
        // No driver at all: the keeper.
        assert_eq!(pick(None, Some(("k", true))), Some("k"));
        // Both down (the laptop sleeps): the driver, whose resume the request waits for.
        assert_eq!(pick(Some(("d", false)), Some(("k", false))), Some("d"));
        assert_eq!(pick(Some(("d", false)), None), Some("d"));
        assert_eq!(pick(None, Some(("k", false))), Some("k"));
        assert_eq!(pick::<&str>(None, None), None);
    }
}
