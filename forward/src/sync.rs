//! Locks that survive a panicked holder, the one place both sides take a std lock from.
//!
//! A panic in one task (a tool, a pump, a test thread) must not take the session or the daemon
//! down with it by poisoning every later lock of the same data. Our critical sections are a
//! few field updates or single map/queue operations, so the data behind a poisoned lock is
//! still consistent at our lock boundaries: recovering the guard is the right answer, every
//! time, and these helpers say so once instead of at every call.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, WaitTimeoutResult};
use std::time::Duration;

/// [`Mutex`] access that ignores poisoning (see the module docs for why that is sound here).
pub trait LockExt<T> {
    /// [`Mutex::lock`], taking the guard even if a holder panicked.
    fn lock_or_recover(&self) -> MutexGuard<'_, T>;

    /// [`Mutex::into_inner`], taking the value even if a holder panicked.
    fn into_inner_or_recover(self) -> T
    where
        Self: Sized;
}

impl<T> LockExt<T> for Mutex<T> {
    fn lock_or_recover(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn into_inner_or_recover(self) -> T {
        self.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`Condvar`] waits that ignore poisoning of the mutex they reacquire, like [`LockExt`].
pub trait CondvarExt {
    /// [`Condvar::wait`], taking the guard back even if a holder panicked meanwhile.
    fn wait_or_recover<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T>;

    /// [`Condvar::wait_timeout`], taking the guard back even if a holder panicked meanwhile.
    fn wait_timeout_or_recover<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult);
}

impl CondvarExt for Condvar {
    fn wait_or_recover<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    fn wait_timeout_or_recover<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        self.wait_timeout(guard, timeout)
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A mutex whose holder panicked after changing the data.
    fn poisoned() -> Arc<Mutex<Vec<u32>>> {
        let m = Arc::new(Mutex::new(vec![1]));
        let held = Arc::clone(&m);
        let joined = std::thread::spawn(move || {
            let mut g = held.lock_or_recover();
            g.push(2);
            panic!("holder panics with the lock held");
        })
        .join();
        assert!(joined.is_err(), "the holder panicked");
        assert!(m.is_poisoned());
        assert!(m.lock().is_err(), "a plain lock sees the poison");
        m
    }

    #[test]
    fn lock_recovers_a_poisoned_mutex_with_its_data() {
        let m = poisoned();
        let mut g = m.lock_or_recover();
        assert_eq!(*g, [1, 2]);
        g.push(3);
        drop(g);
        assert_eq!(*m.lock_or_recover(), [1, 2, 3]);
    }

    #[test]
    fn into_inner_recovers_a_poisoned_mutex_with_its_data() {
        let m = Arc::into_inner(poisoned()).expect("the only reference");
        assert_eq!(m.into_inner_or_recover(), [1, 2]);
    }

    #[test]
    fn condvar_waits_recover_a_mutex_poisoned_meanwhile() {
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let other = Arc::clone(&pair);
        let g = pair.0.lock_or_recover();
        let poisoner = std::thread::spawn(move || {
            let (m, cv) = &*other;
            let _g = m.lock_or_recover();
            cv.notify_all();
            panic!("holder panics with the lock held");
        });
        // The poisoner can only take the lock while this thread waits; it always notifies
        // first, but guard against a spurious wakeup before it ran.
        let mut g = pair.1.wait_or_recover(g);
        while !pair.0.is_poisoned() {
            g = pair
                .1
                .wait_timeout_or_recover(g, Duration::from_millis(10))
                .0;
        }
        assert!(!*g);
        drop(g);
        assert!(poisoner.join().is_err());
        let (g, timeout) = pair
            .1
            .wait_timeout_or_recover(pair.0.lock_or_recover(), Duration::from_millis(1));
        assert!(timeout.timed_out());
        assert!(!*g);
    }
}
