//! rules.md §2f: what holds a ReadWriteOnce lock on its node, read one way for every door that
//! judges one: the webhook's take-over (`admission::RwoLocks`) and the controller's cleanup of a
//! stale lock. Both then judge with the same pure function (`rules::rwo_lock::standing`, through
//! `step` or `cleanup_live`); reading the facts two ways had let the controller read them
//! without what the webhook had learnt (the cache's user, the pod seen gone, the lock's age).
//!
//! The reading: the pods on the lock's node that use the claim (by a LIST unless the cache
//! already shows one: a cache may show a use that ended, never decide a release; the LIST at
//! least as fresh as the claim, the apiserver's watch cache or this process's own once its watch
//! has applied the claim's version, when the lock's pod is read or seen gone, else consistent);
//! the pod the lock names, read live (may the placement the lock was written for still land?)
//! unless this process saw it deleted, its cache at the claim's version lacks a bind's pod, or
//! its cache has held the lock for the grace (it cannot: landed, it is a user the consistent
//! LIST shows); the node, a cached
//! out-of-service taint confirmed live as for a force delete; the record of its deletion on
//! proof when it is gone (`fencing::records`, the one reading of that record); and how long this
//! process has seen the node empty (`LockClock`, its own clock) or its cache has held the lock.

mod clock;

pub use clock::LockClock;

use crate::model::{Node, Pod, Pvc};
use crate::rules::Fact;
use crate::rules::rwo_lock::{self, LockPod, NodeHold, RwoLock};
use crate::runtime::rate_limit::RateLimiter;
use crate::state::query;
use crate::state::{Fresh, PodSeen, PodsIn, Readable, View};
use std::sync::Arc;
use std::time::Duration;

/// The facts of one lock's hold, as read (`LockHolds::read`).
pub struct Hold {
    pub users: Fact<Vec<Pod>>,
    pub writer: LockPod<Arc<Pod>>,
    pub node: Fact<Arc<Node>>,
    pub gone_recorded: bool,
    pub observed: rwo_lock::LockAge,
}

impl Hold {
    /// The hold as the rule reads it. `writer_stored`: whether this process saw the lock's pod
    /// stored, sampled by the caller before the reads (a create landing between the read and a
    /// later sample would look deleted).
    pub fn judged<'a>(&'a self, claim: &'a str, writer_stored: bool) -> NodeHold<'a> {
        NodeHold {
            claim,
            users: self.users.as_ref().map(Vec::as_slice),
            writer: self.writer.as_ref().map(|a| &**a),
            node: deref(&self.node),
            gone_recorded: self.gone_recorded,
            observed: self.observed,
            writer_stored,
        }
    }

    /// Whether a fact a release hinged on could not be read (the rule took it as holding): the
    /// users on the node, or, with nobody there, the lock's pod or the node. A user found decides
    /// by itself, whatever else was unread.
    pub fn undecided(&self) -> bool {
        match &self.users {
            Fact::Unknown(_) => true,
            Fact::Found(u) if !u.is_empty() => false,
            Fact::Found(_) | Fact::Missing => {
                self.writer.is_unknown() || matches!(self.node, Fact::Unknown(_))
            }
        }
    }
}

fn deref<T>(f: &Fact<Arc<T>>) -> Fact<&T> {
    f.as_ref().map(|a| &**a)
}

/// The reading of locks' holds over one view, with the process's clock of each lock.
pub struct LockHolds {
    view: View,
    clock: LockClock,
}

impl LockHolds {
    /// `clock`: the webhook's (`LockClock::live`, or `offline` over a `--state` file) or the
    /// controller's (`LockClock::tidying`).
    pub fn new(view: View, clock: LockClock) -> Self {
        LockHolds { view, clock }
    }

    /// The process's clock of each lock (the webhook notes the locks it writes).
    pub fn clock(&self) -> &LockClock {
        &self.clock
    }

    /// What holds `lock` (on claim `pvc`) on its node, every live read by `reads`; each of them
    /// first waits for a permit of `pace` when given (the controller's client-side limit).
    pub async fn read(
        &self,
        pvc: &Pvc,
        lock: &RwoLock,
        reads: Fresh,
        pace: Option<&RateLimiter>,
    ) -> Hold {
        let (ns, claim) = (&pvc.metadata.namespace, &pvc.metadata.name);
        // A node the cache lacks is read live (gone, or not watched): paced as any live read.
        let mut node = self
            .view
            .read(Node::named("", &lock.node, Fresh::Cache))
            .await;
        if !matches!(node, Fact::Found(_)) {
            paced(pace).await;
            node = self
                .view
                .read(Node::named("", &lock.node, Fresh::CacheOrLive))
                .await;
        }
        if let Fact::Found(n) = &node
            && n.is_out_of_service()
        {
            paced(pace).await;
            node = self.view.read(Node::named("", &lock.node, reads)).await;
        }
        let cached = match self
            .view
            .read(query::PodsNaming(ns, claim, Fresh::CacheOrLive))
            .await
        {
            Fact::Found(pods) => pods
                .iter()
                .find(|p| rwo_lock::uses_on(p, ns, claim, &lock.node))
                .map(|p| (**p).clone()),
            _ => None,
        };
        let raw = pvc
            .metadata
            .annotation(rwo_lock::RWO_LOCK)
            .unwrap_or_default();
        // The lock's age is taken before the reads are sent: the placement it names must be over
        // before they are served, or it could land after them (its age read after slow reads
        // judged a flight still in the air over: adversary review).
        let (held, issued) = (cache_held(pvc), std::time::Instant::now());
        // The LIST of the users there and the live GET of the lock's pod are issued at
        // once: a placement landing between the two is seen by whichever is served second, in
        // either order (the lock model checks both). The GET's answer is wanted only when nobody
        // uses the claim there (may the lock's placement still land?): a LIST answering first
        // with a user, or unsure, drops it.
        let in_use = |users: &Fact<Vec<Pod>>| !matches!(users, Fact::Found(u) if u.is_empty());
        let (users, writer) = match cached {
            Some(p) => (Fact::Found(vec![p]), LockPod::InUse),
            None => {
                paced(pace).await;
                // A lock the cache has held for the grace names a placement that is over:
                // landed (a user the LIST shows) or never to land; its pod is not read.
                let since = reads.not_older_than(pvc.metadata.resource_version.as_deref());
                let unread = if self.seen_gone(ns, lock) || self.absent_since(ns, lock, since) {
                    Some(LockPod::SeenGone)
                } else if self.clock.age(held, lock).past_grace() {
                    Some(LockPod::PastGrace)
                } else {
                    None
                };
                // Every user on the lock's node but the lock's own pod was stored before the
                // lock's value was written (each placement there wrote the lock, and a rename or
                // take-over waited for the placement it replaced to settle), so a LIST at least as
                // fresh as the claim shows them: the apiserver's watch cache, no quorum read. The
                // lock's pod is then judged by its own read, or seen deleted. Not read (past the
                // grace), its placement may have landed after the claim's version: only a
                // consistent LIST shows it (the lock model checks both, and finds the LIST at the
                // claim's version there). Reading that pod to list from the cache instead cost
                // more than it saved at 5,000 nodes (docs/performance.md). The LIST at the claim's
                // version is this process's own cache once its pod watch has applied that version
                // (`query::Pods`): no request.
                let users_read = match unread {
                    Some(LockPod::PastGrace) => reads,
                    _ => since,
                };
                let users = self.view.read(query::Pods(
                    PodsIn::NamespaceOnNode(ns, &lock.node),
                    |p| rwo_lock::uses_on(p, ns, claim, &lock.node),
                    users_read,
                ));
                if let Some(unread) = unread {
                    (users.await, unread)
                } else {
                    paced(pace).await;
                    let (mut users, mut writer) = (
                        std::pin::pin!(users),
                        std::pin::pin!(self.view.read(Pod::named(ns, &lock.pod, reads))),
                    );
                    tokio::select! {
                        u = &mut users => match in_use(&u) {
                            true => (u, LockPod::InUse),
                            false => (u, LockPod::Read(writer.await)),
                        },
                        w = &mut writer => (users.await, LockPod::Read(w)),
                    }
                }
            }
        };
        let in_use = in_use(&users);
        let observed = self.clock.age(
            self.clock
                .quiet_for(ns, claim, raw, in_use)
                .saturating_sub(issued.elapsed())
                .max(held),
            lock,
        );
        let writer = match in_use {
            true => LockPod::InUse,
            false => writer,
        };
        // The one reading of a deletion record every door shares (the Lease checked with it),
        // made only for a node gone.
        let gone_recorded = match &node {
            Fact::Missing => {
                paced(pace).await;
                crate::fencing::records::gone_record(&self.view, &lock.node, &node, Some(lock.at))
                    .await
                    .is_some()
            }
            _ => false,
        };
        Hold {
            users,
            writer,
            node,
            gone_recorded,
            observed,
        }
    }

    /// This process's pod watch saw the lock's pod (its UID) go: deleted for good (a UID is never
    /// created twice), so its placement can never land, as a quorum read of its name would show
    /// (missing, or another UID: either ends a placement this process saw stored). The read is
    /// not made. Any placement since would have renamed the lock, which the write's
    /// compare-and-swap (or the controller's `test`) sees.
    pub fn seen_gone(&self, ns: &str, lock: &RwoLock) -> bool {
        self.view.pod_seen(ns, &lock.pod, &lock.uid) == PodSeen::Gone
    }

    /// A bind's lock whose pod this process's cache lacks at the claim's version or later (its
    /// pod watch has applied that version, `View::pod_absent_since`): a bind reads its pod, so
    /// the pod was stored before the lock was written, and absent since, it was deleted: its
    /// placement can never land, as with `seen_gone` (a restarted process never saw the delete;
    /// this is what it knows instead). Not for a create's lock: its pod is stored after the lock,
    /// so absent it may still land (the lock model finds that variant).
    fn absent_since(&self, ns: &str, lock: &RwoLock, since: Fresh) -> bool {
        lock.via == Some(rwo_lock::Via::Bind)
            && since
                .version()
                .is_some_and(|v| self.view.pod_absent_since(ns, &lock.pod, &lock.uid, v))
    }

    /// Whether this process saw the pod the lock names stored (a created placement that landed,
    /// whose pod a quorum read then misses, was deleted). A bind's pod was stored before its
    /// lock: there is nothing more to know. Sample it before the reads.
    pub fn writer_stored(&self, ns: &str, lock: &RwoLock) -> bool {
        lock.via != Some(rwo_lock::Via::Bind)
            && self.view.pod_seen(ns, &lock.pod, &lock.uid) != PodSeen::Unseen
    }
}

/// A permit of the caller's limit, if it has one.
async fn paced(pace: Option<&RateLimiter>) {
    if let Some(l) = pace {
        l.acquire().await;
    }
}

/// How long this process's cache has held the claim's lock value (zero for a claim read live):
/// the value was stored no later, so the request of the placement it names is over once the grace
/// has passed since, whoever looked in between (the lock model checks it beside this process's
/// own clock). A process started after the lock was written counts from its first list, not from
/// its first look there.
pub fn cache_held(pvc: &Pvc) -> Duration {
    pvc.lock_seen().ago().unwrap_or_default()
}

#[cfg(test)]
mod tests;
