//! How long this process has seen each RWO lock unused, on its own monotonic clock (rules.md §2f
//! "one clock"): a lock's age is never the writer's `at` against the local clock (a replica whose
//! clock runs a minute fast, or a lock dated in the future, would move it).
//!
//! The clock runs while this process sees nobody on the lock's node using the claim and restarts
//! whenever it sees a user: a placement on that node admitted a moment ago (not stored yet) is
//! covered for a whole grace from the first time anyone here saw the node empty, whatever the
//! lock's own age.

use crate::rules::rwo_lock::BIND_GRACE;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Past this many claims (and twice the count the last prune left), entries nobody looked at for a
/// grace are dropped (a dropped lock seen again counts as new: it holds a grace longer, never less).
const PRUNE_ABOVE: usize = 4096;

pub struct LockClock {
    seen: Mutex<Seen>,
}

struct Seen {
    locks: HashMap<(String, String), Entry>,
    /// The size at which the next prune runs: doubling keeps an insert O(1) amortized.
    prune_at: usize,
}

struct Entry {
    value: String,
    /// When this process first saw `value` unused (backdated by `observe`'s `first`).
    since: Instant,
    /// When anyone here last asked about it.
    looked: Instant,
}

impl LockClock {
    /// A lock seen for the first time is young: the placement it was written for may be in flight.
    pub fn live() -> LockClock {
        LockClock {
            seen: Mutex::new(Seen {
                locks: HashMap::new(),
                prune_at: PRUNE_ABOVE,
            }),
        }
    }

    /// Offline, the locks of the state file (`ns`, `name`, value) count as seen a grace ago: the
    /// file is a snapshot with nothing in flight. Locks written while serving are young as live.
    pub fn offline<'a>(file: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) -> LockClock {
        let clock = LockClock::live();
        for (ns, name, raw) in file {
            clock.observe(ns, name, raw, BIND_GRACE);
        }
        clock
    }

    /// How long the lock `raw` on claim `ns/name` has been seen unchanged and unused (`in_use`:
    /// what this look found; a use restarts the clock).
    pub fn quiet_for(&self, ns: &str, name: &str, raw: &str, in_use: bool) -> Duration {
        if in_use {
            self.forget(ns, name);
            return Duration::ZERO;
        }
        self.observe(ns, name, raw, Duration::ZERO)
    }

    fn forget(&self, ns: &str, name: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.locks.remove(&(ns.to_string(), name.to_string()));
    }

    /// This process wrote `raw` onto `ns/name` just now.
    pub fn wrote(&self, ns: &str, name: &str, raw: &str) {
        self.observe(ns, name, raw, Duration::ZERO);
    }

    fn observe(&self, ns: &str, name: &str, raw: &str, first: Duration) -> Duration {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let key = (ns.to_string(), name.to_string());
        if let Some(e) = seen.locks.get_mut(&key)
            && e.value == raw
        {
            e.looked = now;
            return now.duration_since(e.since);
        }
        // By last look, not by age: dropping the locks first seen a grace ago dropped exactly those
        // about to be judged, so while more than 4,096 were watched (a churn of 7,606 pods at 5,000
        // nodes, `make bench-scale`) none ever aged past the grace, and binds the scheduler retried
        // on another node were refused for minutes. A lock that placements keep asking about stays.
        if seen.locks.len() >= seen.prune_at {
            seen.locks
                .retain(|_, e| now.duration_since(e.looked) < BIND_GRACE);
            seen.prune_at = PRUNE_ABOVE.max(2 * seen.locks.len());
        }
        // Backdated by `first` so that the next look measures from the same origin.
        let since = now.checked_sub(first).unwrap_or(now);
        seen.locks.insert(
            key,
            Entry {
                value: raw.to_string(),
                since,
                looked: now,
            },
        );
        now.duration_since(since)
    }

    /// Tests: as if nobody had asked about any lock for `by`.
    #[cfg(test)]
    fn unlooked_for(&self, by: Duration) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for e in seen.locks.values_mut() {
            e.looked = e.looked.checked_sub(by).unwrap_or(e.looked);
        }
    }
}

#[cfg(test)]
#[path = "lock_clock_tests.rs"]
mod tests;
