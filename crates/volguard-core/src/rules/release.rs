//! rules.md §4, the controller's decisions: when to add a finalizer, when a terminating volume may be
//! released, what to tell users, and how "unused since" moves. Pure: the controller supplies the
//! cached and consistently-read pods.

use super::Fact;
use super::claims::claims_of;
use super::in_use::{blocking_pods, names_claim, pv_claimed, pv_in_use, unused_for_since};
use crate::model::{Meta, PV_FINALIZER, PVC_FINALIZER, Pod, Pv, Pvc, UNUSED_SINCE};
use json_patch::jsonptr::PointerBuf;
use json_patch::{Patch, PatchOperation, ReplaceOperation, TestOperation};
use serde_json::Value;

/// What to do with a PVC after looking at the cache.
#[derive(Debug, Clone, PartialEq)]
pub enum PvcPlan {
    /// Live, without the finalizer (webhook was down or failed open): add it.
    AddFinalizer,
    /// Terminating and the cache shows scheduled pods using it: keep it, tell the user.
    Blocked(Vec<Blocker>),
    /// Terminating and the cache shows no user: confirm with a consistent read before releasing.
    ConfirmUnused,
    /// Nothing to do about the finalizer.
    Keep,
}

/// A pod that keeps a PVC from being deleted, as reported in the `DeletionPostponed` event.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Blocker {
    pub name: String,
    pub phase: String,
    pub node: String,
    pub terminal: bool,
}

impl Blocker {
    fn of(p: &Pod) -> Self {
        Blocker {
            name: p.metadata.name.clone(),
            phase: p.phase().to_string(),
            node: p.node_name().unwrap_or_default().to_string(),
            terminal: p.is_terminal(),
        }
    }
}

pub fn pvc_plan<'a, P: AsRef<Pod> + 'a>(
    pvc: &Pvc,
    cached_pods: impl IntoIterator<Item = &'a P>,
) -> PvcPlan {
    let m = &pvc.metadata;
    if !m.is_terminating() {
        return if m.has_finalizer(PVC_FINALIZER) {
            PvcPlan::Keep
        } else {
            PvcPlan::AddFinalizer
        };
    }
    if !m.has_finalizer(PVC_FINALIZER) {
        return PvcPlan::Keep;
    }
    match blockers(pvc, cached_pods) {
        b if b.is_empty() => PvcPlan::ConfirmUnused,
        b => PvcPlan::Blocked(b),
    }
}

/// The blocking pods, sorted, for events and for the "did the set change" comparison.
pub fn blockers<'a, P: AsRef<Pod> + 'a>(
    pvc: &Pvc,
    pods: impl IntoIterator<Item = &'a P>,
) -> Vec<Blocker> {
    let mut b: Vec<Blocker> = blocking_pods(pvc, pods)
        .into_iter()
        .map(Blocker::of)
        .collect();
    b.sort();
    b
}

/// The `DeletionPostponed` event message.
pub fn postponed_message(pvc: &Pvc, blockers: &[Blocker]) -> String {
    let list = blockers
        .iter()
        .map(|b| {
            let node = if b.node.is_empty() { "none" } else { &b.node };
            if b.terminal {
                format!(
                    "{} ({} on node {node}; it has finished: delete pod {} to release it)",
                    b.name, b.phase, b.name
                )
            } else {
                format!("{} ({} on node {node})", b.name, b.phase)
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "PersistentVolumeClaim {} is kept until no pod uses it; used by pod(s): {list}",
        pvc.metadata.name
    )
}

/// Terminating PV without the guard of a binding: release it. Live PV without the finalizer: add it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PvPlan {
    AddFinalizer,
    Release,
    Keep,
}

/// `claim`: the claim the PV's claimRef names (`Missing` when none): a PV whose claim is still
/// bound to it is kept whatever its phase says (rules.md §2c).
pub fn pv_plan(pv: &Pv, claim: Fact<&Pvc>) -> PvPlan {
    let m = &pv.metadata;
    match (m.is_terminating(), m.has_finalizer(PV_FINALIZER)) {
        (false, false) => PvPlan::AddFinalizer,
        (true, true) if !pv_in_use(pv) && !pv_claimed(pv, claim) => PvPlan::Release,
        _ => PvPlan::Keep,
    }
}

/// KEP-5541 for a Bound, non-terminating PVC: what to do with `volguard.io/unused-since`.
/// The time may be later than the truth, never earlier (rules.md §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnusedSince {
    /// Seen unused and not yet marked: stamp it with the later of the observation time and
    /// `ended`, the latest end of use volguard can see (a terminal pod's last `finishedAt`).
    Set {
        ended: Option<jiff::Timestamp>,
    },
    /// Marked, but a terminal pod shows use after the mark (or the mark does not parse): move
    /// the mark forward to this time.
    MoveTo(jiff::Timestamp),
    /// A pod uses it again: remove the mark.
    Clear,
    Keep,
    /// Unused and not marked, but not yet seen so for the grace: look again after this long.
    Wait(std::time::Duration),
}

/// A Bound, non-terminating claim no pod uses and no mark names yet: the one state in which
/// `unused_since` waits out the grace (its clock runs only while this holds).
pub fn unmarked_and_unused<'a, P: AsRef<Pod> + 'a>(
    pvc: &Pvc,
    pods: impl IntoIterator<Item = &'a P>,
) -> bool {
    pvc.is_bound()
        && !pvc.metadata.is_terminating()
        && pvc.metadata.annotation(UNUSED_SINCE).is_none()
        && unused_for_since(pvc, pods)
}

/// What to do with the mark. `grace_left`: how much longer the claim must be seen unused before
/// it is first marked (the controller's `--unused-grace` less what its clock has seen). A claim
/// bound just before its pod is created, or between a StatefulSet's pod and its replacement, is
/// then not marked and unmarked (two writes) for a moment of disuse; the mark is later than the
/// truth by up to the grace, which the rule allows.
pub fn unused_since<'a, P: AsRef<Pod> + 'a>(
    pvc: &Pvc,
    pods: impl IntoIterator<Item = &'a P> + Clone,
    grace_left: std::time::Duration,
) -> UnusedSince {
    if !pvc.is_bound() || pvc.metadata.is_terminating() {
        return UnusedSince::Keep;
    }
    let mark = pvc.metadata.annotation(UNUSED_SINCE);
    if !unused_for_since(pvc, pods.clone()) {
        return match mark {
            Some(_) => UnusedSince::Clear,
            None => UnusedSince::Keep,
        };
    }
    let ended = pods
        .into_iter()
        .map(AsRef::as_ref)
        .filter(|p| names_claim(p, pvc))
        .filter_map(Pod::ended_at)
        .max();
    match mark.map(str::parse::<jiff::Timestamp>) {
        None if !grace_left.is_zero() => UnusedSince::Wait(grace_left),
        None => UnusedSince::Set { ended },
        // A mark that is not a time is replaced; safe side: the latest end seen, else "now".
        Some(Err(_)) => match ended {
            Some(t) => UnusedSince::MoveTo(t),
            None => UnusedSince::Set { ended: None },
        },
        Some(Ok(marked)) => {
            // Nothing is unused since before it existed: a mark that predates the claim (restored
            // from a backup) moves to its creation, or later when a pod ended later.
            let floor = ended.max(pvc.metadata.created_at());
            match floor {
                Some(t) if t > marked => UnusedSince::MoveTo(t),
                _ => UnusedSince::Keep,
            }
        }
    }
}

/// Remove `finalizer` with a JSON patch that first `test`s the object's UID and the whole current
/// list: a concurrent writer (kube-controller-manager, a user) makes the patch fail and the
/// controller re-read instead of clobbering their change, and an object deleted and recreated
/// under the same name (a StatefulSet's `data-web-0`) never loses the new one's finalizer.
/// `None` when the finalizer is not there.
pub fn finalizer_removal_patch(meta: &Meta, finalizer: &str) -> Option<Patch> {
    let current = meta.finalizers.as_ref()?;
    if !current.iter().any(|f| f == finalizer) {
        return None;
    }
    let rest: Vec<Value> = current
        .iter()
        .filter(|f| *f != finalizer)
        .map(|f| Value::String(f.clone()))
        .collect();
    let path = PointerBuf::from_tokens(["metadata", "finalizers"]);
    let mut ops = Vec::with_capacity(3);
    if !meta.uid.is_empty() {
        ops.push(PatchOperation::Test(TestOperation {
            path: PointerBuf::from_tokens(["metadata", "uid"]),
            value: Value::String(meta.uid.to_string()),
        }));
    }
    ops.push(PatchOperation::Test(TestOperation {
        path: path.clone(),
        value: Value::Array(current.iter().map(|f| Value::String(f.clone())).collect()),
    }));
    ops.push(PatchOperation::Replace(ReplaceOperation {
        path,
        value: Value::Array(rest),
    }));
    Some(Patch(ops))
}

/// Add `finalizer` guarded by the object's resourceVersion (an absent list cannot be `test`ed).
pub fn finalizer_add_patch(meta: &Meta, finalizer: &str) -> Option<Patch> {
    let mut ops = Vec::new();
    if let Some(rv) = &meta.resource_version {
        ops.push(PatchOperation::Test(TestOperation {
            path: PointerBuf::from_tokens(["metadata", "resourceVersion"]),
            value: Value::String(rv.to_string()),
        }));
    }
    ops.extend(super::protect::finalizer_patch(meta, finalizer)?.0);
    Some(Patch(ops))
}

/// Claim keys (`namespace`, `claim`) a pod change should re-examine (rules.md §4 enqueue rules):
/// add, delete, a change of node, phase, deletion or UID (delete+recreate with the same name,
/// #80476: the old pod's claims are released too).
pub fn claims_to_requeue(old: Option<&Pod>, new: Option<&Pod>) -> Vec<(String, String)> {
    let relevant = match (old, new) {
        (Some(o), Some(n)) => {
            o.metadata.uid != n.metadata.uid
                || o.node_name() != n.node_name()
                || o.status.phase != n.status.phase
                || o.metadata.deletion_timestamp != n.metadata.deletion_timestamp
                || o.metadata.deletion_grace_period_seconds
                    != n.metadata.deletion_grace_period_seconds
                || o.spec.volumes != n.spec.volumes
        }
        _ => true,
    };
    if !relevant {
        return Vec::new();
    }
    let mut keys: Vec<(String, String)> = old
        .into_iter()
        .chain(new)
        .flat_map(|p| claims_of(p).map(move |c| (p.metadata.namespace.clone(), c.name)))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
#[path = "release_tests.rs"]
mod tests;
