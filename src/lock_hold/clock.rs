//! How long this process has seen each RWO lock unused, on its own monotonic clock (rules.md §2f
//! "one clock"): a lock's age is never the writer's `at` against the local clock (a replica whose
//! clock runs a minute fast, or a lock dated in the future, would move it).
//!
//! The clock runs while this process sees nobody on the lock's node using the claim and restarts
//! whenever it sees a user: a placement on that node admitted a moment ago (not stored yet) is
//! covered for a whole grace from the first time anyone here saw the node empty, whatever the
//! lock's own age.

use crate::rules::rwo_lock::{LockAge, RwoLock, lock_grace};
use crate::runtime::seen::Seen;
use std::time::Duration;

/// Each claim's lock value, on the one "seen since" clock, with the grace its ages are judged
/// by (kube-apiserver's `--request-timeout`: `--apiserver-request-timeout`); keys nobody asked
/// about for a grace may be dropped once many are watched (a dropped lock seen again counts as
/// new: it holds a grace longer, never less).
pub struct LockClock {
    seen: Seen<(String, String), String>,
    grace: Duration,
}

impl LockClock {
    /// A lock seen for the first time is young: the placement it was written for may be in flight.
    pub fn live(request_timeout: Duration) -> LockClock {
        let grace = lock_grace(request_timeout);
        LockClock {
            seen: Seen::new(Some(grace)),
            grace,
        }
    }

    /// The controller's: it looks at a quiet lock written for a bind again only after its tidy
    /// time (`LockAge::tidy`), so an entry is kept twice that since its last look (dropped
    /// earlier, a lock seen again would count as new and wait once more, past a prune every time).
    pub fn tidying(request_timeout: Duration) -> LockClock {
        let age = LockAge {
            quiet: Duration::ZERO,
            grace: lock_grace(request_timeout),
        };
        LockClock {
            seen: Seen::new(Some(2 * age.tidy())),
            grace: age.grace,
        }
    }

    /// Offline, the locks of the state file (`ns`, `name`, value) count as seen a grace ago: the
    /// file is a snapshot with nothing in flight. Locks written while serving are young as live.
    pub fn offline<'a>(
        file: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
        request_timeout: Duration,
    ) -> LockClock {
        let clock = LockClock::live(request_timeout);
        for (ns, name, raw) in file {
            clock.observe(ns, name, raw, clock.grace);
        }
        clock
    }

    /// How long the lock `raw` on claim `ns/name` has been seen unchanged and unused (`in_use`:
    /// what this look found; a use restarts the clock).
    pub fn quiet_for(&self, ns: &str, name: &str, raw: &str, in_use: bool) -> Duration {
        if in_use {
            self.seen.forget(&(ns.to_string(), name.to_string()));
            return Duration::ZERO;
        }
        self.observe(ns, name, raw, Duration::ZERO)
    }

    /// How long `lock` has been quiet (`quiet`, from `quiet_for`), judged by this clock's grace
    /// or the one the lock asks (its writer's), whichever is longer: a process not given
    /// `--apiserver-request-timeout` still waits as long as the webhook that wrote the lock.
    pub fn age(&self, quiet: Duration, lock: &RwoLock) -> LockAge {
        LockAge {
            quiet,
            grace: self.grace.max(lock.grace()),
        }
    }

    /// The grace this process writes into its locks (`RwoLock::with_grace`).
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// This process wrote `raw` onto `ns/name` just now.
    pub fn wrote(&self, ns: &str, name: &str, raw: &str) {
        self.observe(ns, name, raw, Duration::ZERO);
    }

    fn observe(&self, ns: &str, name: &str, raw: &str, first: Duration) -> Duration {
        self.seen
            .observe((ns.to_string(), name.to_string()), raw.to_string(), first)
            .held
    }
}

#[cfg(test)]
#[path = "clock_tests.rs"]
mod tests;
