//! One "seen since" clock: how long this process has seen each key hold one value, on its own
//! monotonic clock. A time written by someone else (a lock's `at`, a Lease's renewTime, a
//! claim's last use) is never compared with ours: a peer whose clock runs fast would move it.
//! A value seen anew starts its clock again; a key forgotten and seen again counts as new (young:
//! it waits longer, never less). The RWO lock's quiet time, each node's Lease silence and a
//! claim's "unused since" are all this clock.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Past this many keys (and twice the count the last prune left), the keys nobody asked about
/// for the clock's idle time are dropped.
pub const PRUNE_ABOVE: usize = 4096;

pub struct Seen<K, V> {
    inner: Mutex<Inner<K, V>>,
    /// Keys nobody asked about for this long may be dropped (`None`: kept until forgotten).
    idle: Option<Duration>,
}

struct Inner<K, V> {
    entries: HashMap<K, Entry<V>>,
    /// The size at which the next prune runs: doubling keeps an insert O(1) amortized.
    prune_at: usize,
}

struct Entry<V> {
    value: V,
    since: Instant,
    /// `since` by the wall clock, for what people read ("unused since").
    wall: jiff::Timestamp,
    looked: Instant,
}

/// How long a key has held its value, and since when by the wall clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Since {
    pub held: Duration,
    pub wall: jiff::Timestamp,
}

impl<K: Eq + Hash, V: PartialEq> Default for Seen<K, V> {
    fn default() -> Self {
        Seen::new(None)
    }
}

impl<K: Eq + Hash, V: PartialEq> Seen<K, V> {
    /// `idle`: past `PRUNE_ABOVE` keys, drop those nobody asked about for this long.
    pub fn new(idle: Option<Duration>) -> Seen<K, V> {
        Seen {
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                prune_at: PRUNE_ABOVE,
            }),
            idle,
        }
    }

    /// How long `key` has held `value` (a different value starts the clock again); a key seen
    /// for the first time counts as seen `first` ago (a snapshot with nothing in flight).
    pub fn observe(&self, key: K, value: V, first: Duration) -> Since {
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = inner.entries.get_mut(&key)
            && e.value == value
        {
            e.looked = now;
            return Since {
                held: now.duration_since(e.since),
                wall: e.wall,
            };
        }
        // By last look, not by age: dropping the keys first seen an idle time ago dropped exactly
        // those about to be judged (`make bench-scale`: binds refused for minutes at 5,000 nodes).
        if let Some(idle) = self.idle
            && inner.entries.len() >= inner.prune_at
        {
            inner
                .entries
                .retain(|_, e| now.duration_since(e.looked) < idle);
            inner.prune_at = PRUNE_ABOVE.max(2 * inner.entries.len());
        }
        let since = now.checked_sub(first).unwrap_or(now);
        let held = now.duration_since(since);
        let wall = jiff::Timestamp::now()
            .checked_sub(jiff::SignedDuration::try_from(held).unwrap_or_default())
            .unwrap_or_else(|_| jiff::Timestamp::now());
        inner.entries.insert(
            key,
            Entry {
                value,
                since,
                wall,
                looked: now,
            },
        );
        Since { held, wall }
    }

    pub fn forget(&self, key: &K) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.entries.remove(key);
    }

    /// Keep only the keys `keep` accepts.
    pub fn retain(&self, keep: impl Fn(&K) -> bool) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.entries.retain(|k, _| keep(k));
    }

    pub fn len(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, key: &K) -> bool {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.entries.contains_key(key)
    }

    /// Tests: as if nobody had asked about any key for `by`.
    #[cfg(test)]
    pub fn unlooked_for(&self, by: Duration) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for e in inner.entries.values_mut() {
            e.looked = e.looked.checked_sub(by).unwrap_or(e.looked);
        }
    }
}

#[cfg(test)]
#[path = "seen_tests.rs"]
mod tests;
