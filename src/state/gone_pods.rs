//! The UIDs of pods this process saw stored and then saw go (deleted, or replaced under their
//! name): what lets a lock written for a pod created with `spec.nodeName` be judged at once when
//! that pod is gone. A quorum read that misses a pod proves nothing of a create still in flight,
//! but a UID the watch delivered was stored, and a UID is never created twice (rules.md §2f).
//!
//! Bounded: an entry is kept for `KEEP` (past it the lock's own grace has long decided) and at
//! most `MAX` at once, oldest dropped first. A UID not found here only means the lock waits for
//! its grace, as it did before.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const KEEP: Duration = Duration::from_secs(600);
const MAX: usize = 1 << 18;

#[derive(Default)]
pub struct GonePods {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    uids: HashSet<Box<str>>,
    order: VecDeque<(Instant, Box<str>)>,
}

impl GonePods {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pod of `uid` was stored and is gone.
    pub fn note(&self, uid: &str) {
        if uid.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut m = self.lock();
        m.expire(now);
        if m.uids.insert(uid.into()) {
            m.order.push_back((now, uid.into()));
        }
    }

    pub(super) fn contains(&self, uid: &str) -> bool {
        let mut m = self.lock();
        m.expire(Instant::now());
        m.uids.contains(uid)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().uids.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.order.front() {
            if now.duration_since(*at) < KEEP && self.order.len() < MAX {
                break;
            }
            if let Some((_, uid)) = self.order.pop_front() {
                self.uids.remove(&uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_what_went_and_stays_bounded() {
        let g = GonePods::default();
        g.note("");
        assert!(g.is_empty(), "no UID, nothing to match");
        g.note("u-1");
        g.note("u-1");
        assert!(g.contains("u-1"));
        assert!(!g.contains("u-2"));
        assert_eq!(g.len(), 1);
        for i in 0..MAX + 10 {
            g.note(&format!("u-{i}-x"));
        }
        assert!(g.len() <= MAX, "{} kept", g.len());
        assert!(!g.contains("u-1"), "the oldest goes first");
        assert!(g.contains(&format!("u-{}-x", MAX + 9)));
    }
}
