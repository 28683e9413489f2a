//! How far a watched map has caught up with the apiserver: the newest resourceVersion its watch
//! applied, within one listing. A map whose watch applied version `v` holds every object at least
//! as new as `v` (a watch delivers changes in the order etcd stored them), so it can answer a
//! read "not older than" `v` as the apiserver's watch cache would, with no request: an object
//! stored before `v` and not deleted since is in it; one absent was never stored by then or was
//! deleted.
//!
//! A relist replaces the map with a listing that may be older than what the last watch applied (a
//! watch cache served it, and in an HA control plane another apiserver's): the listing starts a
//! new epoch, and a read that saw the epoch change between its sample and its answer is not
//! answered from the map. A watch that skipped an event (one that did not decode: kube's client
//! reports it and goes on) vouches for nothing until its next listing (`run_watch`).

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

#[derive(Debug, Default)]
pub struct Mark {
    epoch: AtomicU64,
    /// The newest resourceVersion applied in this epoch (0: none known yet).
    version: AtomicU64,
}

/// A sample of a `Mark` at least as new as the version asked: valid while its epoch lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caught(u64);

impl Mark {
    /// A relist is about to replace the map: nothing it held is vouched for until the listing's
    /// versions are known.
    pub(super) fn relisting(&self) {
        // The version first: a reader that sees the new epoch then sees no version from before
        // it (the other order let a reader pair the new epoch with the old version, then read
        // the new, possibly older, listing: adversary review).
        self.version.store(0, SeqCst);
        self.epoch.fetch_add(1, SeqCst);
    }

    /// A change of `version` (an object's resourceVersion as a number; 0: none) is in the map,
    /// and in every index kept beside it.
    pub(super) fn applied(&self, version: u64) {
        self.version.fetch_max(version, SeqCst);
    }

    /// Whether the map holds every change up to `version`: sampled before the map is read.
    pub(super) fn at_least(&self, version: u64) -> Option<Caught> {
        let epoch = self.epoch.load(SeqCst);
        (version > 0 && self.version.load(SeqCst) >= version).then_some(Caught(epoch))
    }

    /// `read` of the map, answered only if the map held every change up to `version` before it and
    /// is the same listing after it (the one way a read leans on the mark).
    pub(super) fn read_at_least<T>(&self, version: u64, read: impl FnOnce() -> T) -> Option<T> {
        let caught = self.at_least(version)?;
        let answer = read();
        self.still(caught).then_some(answer)
    }

    /// Whether the map read since `caught` was sampled is the same listing (no relist replaced
    /// it meanwhile): checked after the map is read.
    pub(super) fn still(&self, caught: Caught) -> bool {
        self.epoch.load(SeqCst) == caught.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caught_up_only_to_what_was_applied_within_one_listing() {
        let m = Mark::default();
        assert_eq!(m.at_least(1), None, "nothing applied");
        m.applied(120);
        m.applied(0);
        m.applied(90);
        let c = m.at_least(120).expect("caught up to 120");
        assert!(m.at_least(121).is_none());
        assert!(m.at_least(0).is_none(), "version 0 is no version");
        assert!(m.still(c));
        m.relisting();
        assert!(!m.still(c), "a relist ends the sample");
        assert!(m.at_least(1).is_none(), "a relist vouches for nothing yet");
        m.applied(100);
        let d = m.at_least(100).expect("the new listing's version");
        assert!(m.at_least(120).is_none(), "the relist may be older");
        assert!(m.still(d) && d != c);
        assert_eq!(m.read_at_least(100, || 7), Some(7));
        assert_eq!(m.read_at_least(101, || 7), None, "behind");
        assert_eq!(
            m.read_at_least(100, || m.relisting()),
            None,
            "relisted meanwhile"
        );
    }
}
