//! rules.md §3: when is a volume in use. One implementation for the webhook and the controller.

use super::Fact;
use super::claims::find_claim;
use crate::model::{Pod, Pv, Pvc};

/// For deletion (finalizer removal): a *scheduled* pod naming the PVC blocks it in any phase,
/// terminal included, because volume teardown on the node is asynchronous (#113828, #123320).
/// An ephemeral claim `POD-VOLUME` counts for the scheduled pod `POD` that declares the ephemeral
/// volume `VOLUME` until that pod is shut down (#99604), whatever the claim's ownerReferences
/// say: a patch that kept the finalizer (so no webhook saw it) may have removed or re-pointed
/// them, and a pod that mounts a claim is not told by who owns it. Unscheduled pods never block.
pub fn pod_blocks_deletion(pod: &Pod, pvc: &Pvc) -> bool {
    if !pod.is_scheduled() {
        return false;
    }
    match find_claim(pod, &pvc.metadata.namespace, &pvc.metadata.name) {
        None => false,
        Some(c) if c.ephemeral => !pod.is_shut_down(),
        Some(_) => true,
    }
}

/// For "unused since" (KEP-5541): a *non-terminal* pod naming the PVC uses it, scheduled or not.
pub fn pod_uses_for_unused_since(pod: &Pod, pvc: &Pvc) -> bool {
    if pod.is_terminal() {
        return false;
    }
    match find_claim(pod, &pvc.metadata.namespace, &pvc.metadata.name) {
        None => false,
        Some(c) if c.ephemeral => claimed_by(pod, pvc),
        Some(_) => true,
    }
}

/// Whether `pod` names `pvc` at all (an ephemeral claim only for the pod that owns it, or for
/// the pod of that name when the claim is orphaned).
pub fn names_claim(pod: &Pod, pvc: &Pvc) -> bool {
    match find_claim(pod, &pvc.metadata.namespace, &pvc.metadata.name) {
        None => false,
        Some(c) if c.ephemeral => claimed_by(pod, pvc),
        Some(_) => true,
    }
}

/// The pods that keep `pvc` from being deleted.
pub fn blocking_pods<'a, P>(pvc: &Pvc, pods: impl IntoIterator<Item = &'a P>) -> Vec<&'a Pod>
where
    P: AsRef<Pod> + 'a,
{
    pods.into_iter()
        .map(AsRef::as_ref)
        .filter(|p| pod_blocks_deletion(p, pvc))
        .collect()
}

/// KEP-5541: no non-terminal pod references the PVC.
pub fn unused_for_since<'a, P>(pvc: &Pvc, pods: impl IntoIterator<Item = &'a P>) -> bool
where
    P: AsRef<Pod> + 'a,
{
    !pods
        .into_iter()
        .any(|p| pod_uses_for_unused_since(p.as_ref(), pvc))
}

/// rules.md §3: a PV is in use while it is Bound (what its status says; see `pv_claimed` for
/// what its binding says).
pub fn pv_in_use(pv: &Pv) -> bool {
    pv.is_bound()
}

/// rules.md §2c: the claim the PV's `spec.claimRef` names, as read, is bound to this PV (its
/// `spec.volumeName` names it, and its UID is the one the claimRef records, when recorded). A
/// `status.phase` is written through `/status` and proves nothing: a PV forged `Available` while
/// its claim still points at it is in use. A claim that could not be read: unsure means in use.
pub fn pv_claimed(pv: &Pv, claim: Fact<&Pvc>) -> bool {
    let Some(r) = pv.spec.claim_ref.as_ref() else {
        return false;
    };
    match claim {
        Fact::Missing => false,
        Fact::Unknown(_) => true,
        Fact::Found(c) => {
            c.volume_name() == Some(pv.metadata.name.as_str())
                && r.uid.as_deref().is_none_or(|u| {
                    u.is_empty() || c.metadata.uid.is_empty() || u == &*c.metadata.uid
                })
        }
    }
}

/// The pod's ephemeral claim is its own: the PVC's controller is this pod (UID), or the PVC has
/// no controller at all, so volguard cannot tell which pod of that name it was made for and
/// counts it for this one (unsure means in use). A claim owned by another UID (an earlier pod of
/// the same name) is not this pod's.
fn claimed_by(pod: &Pod, pvc: &Pvc) -> bool {
    match pvc.metadata.controller_uid() {
        Some(uid) => !pod.metadata.uid.is_empty() && uid == &*pod.metadata.uid,
        None => true,
    }
}

impl AsRef<Pod> for Pod {
    fn as_ref(&self) -> &Pod {
        self
    }
}

/// A short "ns/name (phase Running, node n1)" description of blocking pods for messages and events.
pub fn describe_pods(pods: &[&Pod]) -> String {
    pods.iter()
        .map(|p| {
            format!(
                "{} (phase {}, node {})",
                p.metadata.name,
                p.phase(),
                p.node_name().unwrap_or("none")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[path = "in_use_tests.rs"]
mod tests;
