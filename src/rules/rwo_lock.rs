//! rules.md §2f "the lock is recorded, not inferred": the seed's compare-and-swap on the claim.
//!
//! Caches lag: two binds a few milliseconds apart both see no holder in any cache, and two webhook
//! replicas each have their own. So the first placement of a ReadWriteOnce claim on a node writes
//! a lock onto the claim (annotation `volguard.io/rwo-lock`: node, pod, UID, time) with a
//! compare-and-swap; whoever loses the swap reads again and decides again. This file decides what
//! to do with the lock as read; the caller does the swap.

use super::Fact;
use crate::model::{Node, Pod, Pvc};

/// The annotation that carries the lock on a PersistentVolumeClaim.
pub const RWO_LOCK: &str = "volguard.io/rwo-lock";

/// A lock whose pod has not been bound this long after the lock was taken no longer counts: the
/// bind it was written for was refused later (another webhook, a timeout). Binds that get through
/// finish in milliseconds; the apiserver gives up on a request after 60 s.
pub const BIND_GRACE_SECONDS: i64 = 60;

/// The lock as stored: `{"node":..,"pod":..,"uid":..,"at":..}` (readable in `kubectl get -o yaml`).
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

/// What is known of the pod a lock names, and of the lock's node.
pub struct LockHolder<'a> {
    pub pod: Fact<&'a Pod>,
    pub node: Fact<&'a Node>,
}

/// Why a lock still holds, or why it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Its pod may still run on the lock's node (or is about to be bound there).
    Holds,
    /// Its pod is gone, was replaced (another UID), ended, sits on another node, was never bound
    /// in time, or its node is gone or out of service.
    Stale(&'static str),
}

/// Whether `lock` still holds at `now`. Unsure means it holds: a pod or node that could not be
/// read counts as present.
pub fn standing(lock: &RwoLock, holder: &LockHolder<'_>, now: jiff::Timestamp) -> Standing {
    if let Some(why) = holder_gone(lock, holder.pod.as_ref().map(|p| *p), now) {
        return Standing::Stale(why);
    }
    match holder.node {
        Fact::Missing => Standing::Stale("node gone"),
        Fact::Found(n) if n.is_out_of_service() => Standing::Stale("node out of service"),
        Fact::Found(_) | Fact::Unknown(_) => Standing::Holds,
    }
}

/// Why the lock's pod no longer holds it, judged on the pod alone (the controller's cleanup,
/// which reads no nodes). `None`: it may still hold (or could not be read).
pub fn holder_gone(lock: &RwoLock, pod: Fact<&Pod>, now: jiff::Timestamp) -> Option<&'static str> {
    let pod = match pod {
        Fact::Missing => return Some("holder deleted"),
        Fact::Unknown(_) => return None,
        Fact::Found(p) => p,
    };
    if !lock.uid.is_empty() && !pod.metadata.uid.is_empty() && pod.metadata.uid != lock.uid {
        return Some("holder replaced");
    }
    if pod.is_terminal() {
        return Some("holder ended");
    }
    match pod.node_name() {
        Some(n) if n != lock.node => Some("holder on another node"),
        Some(_) => None,
        None if now.duration_since(lock.at).as_secs() > BIND_GRACE_SECONDS => {
            Some("holder never bound")
        }
        None => None,
    }
}

/// What placing a pod on `node` does to one claim's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockStep {
    /// The lock already names this pod on this node: nothing to write.
    Keep,
    /// Write this lock (no lock yet, the same node's lock moves to the newest pod, or a stale
    /// lock is taken over). `took_over` names why the old one no longer held.
    Write {
        lock: RwoLock,
        took_over: Option<&'static str>,
    },
    /// Another node holds the claim.
    Held(RwoLock),
}

/// Decide one claim's lock for `pod` going to `node`. `holder` is read only when the lock names
/// another node (`None` otherwise). The newest placement on the lock's node is recorded, so the
/// lock never names a pod that ended while a younger one on that node (not yet in any cache)
/// still uses the claim.
pub fn step(
    pod: &Pod,
    node: &str,
    current: Option<&RwoLock>,
    holder: Option<&LockHolder<'_>>,
    now: jiff::Timestamp,
) -> LockStep {
    // Built only when written: the common bind (the lock already names this pod) allocates nothing.
    let fresh = || RwoLock::new(pod, node, now);
    let Some(lock) = current else {
        return LockStep::Write {
            lock: fresh(),
            took_over: None,
        };
    };
    if lock.node == node {
        if lock.pod == pod.metadata.name && lock.uid == pod.metadata.uid {
            return LockStep::Keep;
        }
        return LockStep::Write {
            lock: fresh(),
            took_over: None,
        };
    }
    match holder.map(|h| standing(lock, h, now)) {
        Some(Standing::Stale(why)) => LockStep::Write {
            lock: fresh(),
            took_over: Some(why),
        },
        Some(Standing::Holds) | None => LockStep::Held(lock.clone()),
    }
}

/// The refusal when another node holds the lock.
pub fn held_message(pod: &Pod, node: &str, claim: &str, lock: &RwoLock) -> String {
    format!(
        "pod {:?} cannot run on node {node:?}: PersistentVolumeClaim {claim:?} is ReadWriteOnce and is \
         locked to node {:?} by pod {:?} (since {}). Two nodes writing one volume corrupt it; the \
         scheduler retries this pod once {:?} has ended. For a Deployment use `strategy: Recreate` \
         (a RollingUpdate starts the new pod before the old one stops)",
        pod.metadata.name, lock.node, lock.pod, lock.at, lock.pod
    )
}

/// What the controller may clear: a lock that no longer holds (read consistently by the caller).
pub fn clearable(
    lock: &RwoLock,
    holder: &LockHolder<'_>,
    now: jiff::Timestamp,
) -> Option<&'static str> {
    match standing(lock, holder, now) {
        Standing::Stale(why) => Some(why),
        Standing::Holds => None,
    }
}

#[cfg(test)]
#[path = "rwo_lock_tests.rs"]
mod tests;
