//! rules.md §2f "the lock is recorded, not inferred": the seed's compare-and-swap on the claim.
//!
//! Caches lag: two binds a few milliseconds apart both see no holder in any cache, and two webhook
//! replicas each have their own. So the first placement of a ReadWriteOnce claim on a node writes
//! a lock onto the claim (annotation `volguard.io/rwo-lock`: node, pod, UID, time) with a
//! compare-and-swap; whoever loses the swap reads again and decides again. The lock names the
//! node: a placement on that node writes nothing, and whether it still holds is "does a pod on
//! that node still use the claim", read by quorum. This file decides what to do with the lock as
//! read; the caller does the reads and the swap.

use super::Fact;
use crate::model::{Node, Pod, Pvc};

/// The annotation that carries the lock on a PersistentVolumeClaim.
pub const RWO_LOCK: &str = "volguard.io/rwo-lock";

/// How long a lock nobody on its node uses yet still holds: the placement it was written for is
/// in flight (a bind persists milliseconds after admission; a pod CREATE with `spec.nodeName`
/// after every webhook). The apiserver gives up on a request after 60 s. Measured on the
/// observer's own monotonic clock from when it first saw the lock, never from the lock's `at`
/// (another process's clock: one running a minute fast, or a forged date, would move it).
pub const BIND_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// The lock as stored: `{"node":..,"pod":..,"uid":..,"at":..}` (readable in `kubectl get -o yaml`).
/// Only `node` decides; the first pod placed and the writer's time are for people (`explain`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RwoLock {
    pub node: String,
    pub pod: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    pub at: jiff::Timestamp,
}

impl RwoLock {
    pub fn new(pod: &Pod, node: &str, now: jiff::Timestamp) -> RwoLock {
        RwoLock {
            node: node.to_string(),
            pod: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            at: now,
        }
    }

    /// The lock on `pvc`: `None` when there is none; a value that does not parse is no lock of
    /// volguard's (the holders in the caches still count).
    pub fn of(pvc: &Pvc) -> Option<RwoLock> {
        RwoLock::parse(pvc.metadata.annotation(RWO_LOCK)?)
    }

    pub fn parse(raw: &str) -> Option<RwoLock> {
        serde_json::from_str(raw).ok()
    }

    pub fn encode(&self) -> String {
        // A struct of strings and a timestamp: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Whether `pod` uses claim `ns/claim` on `node`: what a lock on `node` stands for. A pod that is
/// not terminal, scheduled there, naming the claim (read-only or not: any use keeps the volume
/// attached to that node).
pub fn uses_on(pod: &Pod, ns: &str, claim: &str, node: &str) -> bool {
    pod.metadata.namespace == ns
        && pod.node_name() == Some(node)
        && !pod.is_terminal()
        && super::claims::claims_of(pod).any(|c| c.name == claim)
}

/// What is known of a lock's node, for one claim.
pub struct NodeHold<'a> {
    /// The non-terminal pods on the lock's node that use the claim, by a quorum read (a cache may
    /// lag: it must never decide a take-over).
    pub users: Fact<&'a [Pod]>,
    /// The lock's node (a cached out-of-service taint is confirmed live by the caller).
    pub node: Fact<&'a Node>,
    /// How long this process has seen this exact lock with nobody on its node using the claim
    /// (its own monotonic clock; zero when this look found a user).
    pub observed: std::time::Duration,
}

/// Why a lock still holds, or why it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    Holds(&'static str),
    /// Nobody on its node uses the claim any more (past the grace), or its node is gone or out
    /// of service.
    Stale(&'static str),
}

/// Whether a lock still holds. The lock names a node; it holds while any non-terminal pod there
/// uses the claim, and for `BIND_GRACE` after this process first saw nobody there (a placement
/// admitted a moment ago may not be stored yet). Unsure means it holds.
pub fn standing(hold: &NodeHold<'_>) -> Standing {
    match hold.node {
        Fact::Missing => return Standing::Stale("node gone"),
        Fact::Found(n) if n.is_out_of_service() => return Standing::Stale("node out of service"),
        Fact::Found(_) | Fact::Unknown(_) => {}
    }
    match hold.users {
        Fact::Found(u) if !u.is_empty() => Standing::Holds("in use on its node"),
        Fact::Unknown(_) => Standing::Holds("its node's use could not be read"),
        _ if hold.observed < BIND_GRACE => Standing::Holds("placement in progress"),
        Fact::Found(_) | Fact::Missing => Standing::Stale("nobody on its node uses it"),
    }
}

/// What placing a pod on `node` does to one claim's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockStep {
    /// The lock names this node and another pod there uses the claim: nothing to write (whoever
    /// would take the lock over reads that pod first).
    Keep,
    /// Write this lock: no lock yet, a stale one taken over (`took_over` says why), or this
    /// node's lock with nobody on the node using the claim yet, refreshed so that a take-over or
    /// a cleanup racing this placement fails its compare-and-swap. Which pod a lock names never
    /// decides anything (its node does), so a refresh moves nothing.
    Write {
        lock: RwoLock,
        took_over: Option<&'static str>,
    },
    /// Another node holds the claim.
    Held(RwoLock),
}

/// Decide one claim's lock for `pod` going to `node`. `in_use_here`: another non-terminal pod on
/// `node` uses the claim (as the caches show it). `hold` is read only when the lock names another
/// node (`None` otherwise, or when it could not be read: then the lock holds).
pub fn step(
    pod: &Pod,
    node: &str,
    in_use_here: bool,
    current: Option<&RwoLock>,
    hold: Option<&NodeHold<'_>>,
    now: jiff::Timestamp,
) -> LockStep {
    let Some(lock) = current else {
        return LockStep::Write {
            lock: RwoLock::new(pod, node, now),
            took_over: None,
        };
    };
    if lock.node == node {
        return match in_use_here {
            true => LockStep::Keep,
            false => LockStep::Write {
                lock: RwoLock::new(pod, node, now),
                took_over: None,
            },
        };
    }
    match hold.map(standing) {
        Some(Standing::Stale(why)) => LockStep::Write {
            lock: RwoLock::new(pod, node, now),
            took_over: Some(why),
        },
        Some(Standing::Holds(_)) | None => LockStep::Held(lock.clone()),
    }
}

/// The refusal when another node holds the lock.
pub fn held_message(pod: &Pod, node: &str, claim: &str, lock: &RwoLock) -> String {
    format!(
        "pod {:?} cannot run on node {node:?}: PersistentVolumeClaim {claim:?} is ReadWriteOnce and is \
         locked to node {:?} (first placed there by pod {:?}, since {}). Two nodes writing one volume \
         corrupt it; the scheduler retries this pod once no pod on node {:?} uses the claim. For a \
         Deployment use `strategy: Recreate` (a RollingUpdate starts the new pod before the old one stops)",
        pod.metadata.name, lock.node, lock.pod, lock.at, lock.node
    )
}

/// The refusal when the lock's swap was lost (another placement just won) and the claim could
/// not be read again (`unread`), or kept being lost.
pub fn lost_message(pod: &Pod, node: &str, claims: &str, unread: Option<&str>) -> String {
    let why = match unread {
        Some(e) => format!(
            "another placement just took its lock and volguard could not read the claim again ({e})"
        ),
        None => "other placements kept taking its lock first".to_string(),
    };
    format!(
        "pod {:?} cannot run on node {node:?} yet: ReadWriteOnce PersistentVolumeClaim {claims:?}: {why}. \
         The scheduler retries this pod; nothing is needed from you",
        pod.metadata.name
    )
}

/// What the controller may clear: a lock that no longer holds (read consistently by the caller).
pub fn clearable(hold: &NodeHold<'_>) -> Option<&'static str> {
    match standing(hold) {
        Standing::Stale(why) => Some(why),
        Standing::Holds(_) => None,
    }
}

#[cfg(test)]
#[path = "rwo_lock_tests.rs"]
mod tests;
