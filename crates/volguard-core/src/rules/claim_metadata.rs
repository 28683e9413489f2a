//! rules.md §2f and §3: who may change what a claim's metadata proves.
//!
//! Two facts live in a claim's metadata that another guard trusts: the RWO lock
//! (`volguard.io/rwo-lock`, which the placement guard reads) and, for a generic-ephemeral claim,
//! the controller ownerReference to its pod (which upstream's pvc-protection controller reads
//! before it releases a claim). Anyone allowed to patch claims could otherwise delete or forge a
//! lock, or re-point an owner and then `kubectl delete pvc` a mounted claim without volguard
//! deciding anything.

use super::claims::ephemeral_claim_name;
use super::force_delete::is_human;
use super::proof::{Key, Proof};
use super::rwo_lock::RWO_LOCK;
use super::{Decision, Effect, Fact, Recorded};
use crate::model::{Meta, OwnerReference, Pod, Pvc, UserInfo};

/// The break glass that lets a person clear a lock (a stale lock volguard cannot see as stale).
const ALLOW_LOCK_REMOVAL: Key = Key::AllowLockRemoval;

/// The garbage collector's identities: it removes ownerReferences when an owner is deleted with
/// `--cascade=orphan` (its own ServiceAccount, or the controller manager's when it runs without
/// per-controller credentials).
pub const GARBAGE_COLLECTORS: [&str; 2] = [
    "system:serviceaccount:kube-system:generic-garbage-collector",
    "system:kube-controller-manager",
];

/// The controller ownerReference to a Pod, if any.
pub fn pod_owner(meta: &Meta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "Pod")
}

/// The pod whose owner reference this update removes or re-points, when it does (`None`: the
/// update leaves the pod owner as it was). The caller reads that pod.
pub fn owner_changed<'a>(old: &'a Pvc, new: &Pvc) -> Option<&'a OwnerReference> {
    let before = pod_owner(&old.metadata)?;
    match pod_owner(&new.metadata) {
        Some(after) if after.uid == before.uid && after.name == before.name => None,
        _ => Some(before),
    }
}

/// Decide a PVC UPDATE (or `/status` UPDATE) from `old` (stored) to `new`. `own`: volguard's
/// identities (its webhook, which writes locks, and its controller, which clears them).
/// `owner_pod`: the pod `owner_changed` names, as read (`Missing` when the owner is unchanged).
/// `break_glass`: the stored claim's proof, when one counts (`proof::Reader::read`).
pub fn claim_update(
    user: &UserInfo,
    own: &[String],
    old: &Pvc,
    new: &Pvc,
    owner_pod: Fact<&Pod>,
    break_glass: Option<&Proof>,
) -> Decision {
    let name = &old.metadata.name;
    // 1: the lock, which only volguard writes.
    let (before, after) = (
        old.metadata.annotation(RWO_LOCK),
        new.metadata.annotation(RWO_LOCK),
    );
    if before != after && !own.contains(&user.username) {
        // Read from the stored claim: set by a person in an earlier request (rules.md §8).
        let break_glass = break_glass.is_some_and(|p| p.is(ALLOW_LOCK_REMOVAL));
        if after.is_none() && break_glass && is_human(user) {
            return Decision::allow("rwo-lock-break-glass")
                .with_effect(Effect::Record(Recorded::BreakGlass))
                .with_warning(format!(
                "ReadWriteOnce lock removed from PersistentVolumeClaim {name:?} by {:?} with {ALLOW_LOCK_REMOVAL}=true: \
                 the next placement on any node takes the claim; make sure no pod on the old node still writes to it",
                user.username
            ));
        }
        let what = match after {
            None => "removing",
            Some(_) if before.is_none() => "adding",
            Some(_) => "changing",
        };
        return Decision::deny(
            "rwo-lock-foreign-write",
            format!(
                "{what} the ReadWriteOnce lock ({RWO_LOCK}) of PersistentVolumeClaim {name:?} refused: only volguard \
                 writes it (the placement guard trusts it to keep the volume on one node). If the lock is stale and \
                 volguard has not cleared it, a person may annotate the claim {ALLOW_LOCK_REMOVAL}=true and remove it"
            ),
        );
    }
    // 2: the owner of a generic-ephemeral claim, while its pod may mount it.
    if let Some(owner) = owner_changed(old, new)
        && !GARBAGE_COLLECTORS.contains(&user.username.as_str())
    {
        let mounted = match owner_pod {
            Fact::Missing => None,
            Fact::Found(p) => mounts_as_ephemeral(p, name).then_some(String::new()),
            // Unsure means in use.
            Fact::Unknown(e) => Some(format!(" (pod {:?} could not be read: {e})", owner.name)),
        };
        if let Some(unknown) = mounted {
            return Decision::deny(
                "ephemeral-owner-changed",
                format!(
                    "removing or re-pointing the owner of ephemeral PersistentVolumeClaim {name:?} refused: pod {:?} \
                     still mounts it{unknown}. Kubernetes releases a claim by its owner's UID, so a changed owner lets \
                     `kubectl delete pvc` delete the volume under the running pod. Delete the pod (the claim goes \
                     with it), or orphan it with `kubectl delete pod {} --cascade=orphan`",
                    owner.name, owner.name
                ),
            );
        }
    }
    Decision::allow("claim-metadata-kept")
}

/// The pod is scheduled, not shut down, and declares the ephemeral volume this claim was made for.
fn mounts_as_ephemeral(pod: &Pod, claim: &str) -> bool {
    pod.is_scheduled()
        && !pod.is_shut_down()
        && pod.spec.volumes.iter().any(|v| {
            v.ephemeral.is_some() && ephemeral_claim_name(&pod.metadata.name, &v.name) == claim
        })
}

#[cfg(test)]
#[path = "claim_metadata_tests.rs"]
mod tests;
