//! The PV controller (kube-controller-manager): when a volume's claim is gone, its reclaim
//! policy decides whether the volume and its data are deleted or scrubbed.

use crate::model::{MIGRATED_TO, Pv, Pvc};

/// What the PV controller does with a volume's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reclaim {
    /// Nothing: not released, or policy `Retain`, unknown (the volume is marked Failed) or
    /// absent, or the volume migrated to CSI (the external provisioner decides).
    Keep,
    /// The volume is deleted: by its plugin, or by the external provisioner for CSI.
    Delete,
    /// A recycler pod scrubs the volume (`rm -rf`) and makes it Available again.
    Recycle,
}

impl Reclaim {
    pub fn as_str(self) -> &'static str {
        match self {
            Reclaim::Keep => "Keep",
            Reclaim::Delete => "Delete",
            Reclaim::Recycle => "Recycle",
        }
    }
}

/// Ports `pkg/controller/volume/persistentvolume/pv_controller.go: func
/// (*PersistentVolumeController) isVolumeReleased` (v1.37.2). `claim` is the claim the
/// controller's cache holds under `claimRef`'s namespace and name. Never released without a
/// `claimRef` or with an empty `claimRef.uid` (pre-bound by a user); released when the claim is
/// missing or has another UID (a claim re-created under the same name), or when the claim with
/// the right UID names another volume. A claim not yet bound (empty `volumeName`) holds it.
pub fn is_volume_released(pv: &Pv, claim: Option<&Pvc>) -> bool {
    let Some(claim_ref) = &pv.spec.claim_ref else {
        return false;
    };
    let uid = claim_ref.uid.as_deref().unwrap_or_default();
    if uid.is_empty() {
        return false;
    }
    match claim {
        Some(c) if *c.metadata.uid == *uid => {
            let volume = c.spec.volume_name.as_deref().unwrap_or_default();
            !volume.is_empty() && volume != pv.metadata.name
        }
        _ => true,
    }
}

/// Ports `pkg/controller/volume/persistentvolume/pv_controller.go: func
/// (*PersistentVolumeController) reclaimVolume` (v1.37.2): the operation a released volume's
/// policy schedules. A non-empty `pv.kubernetes.io/migrated-to` makes the controller stand down.
pub fn reclaim_volume(pv: &Pv) -> Reclaim {
    if pv
        .metadata
        .annotation(MIGRATED_TO)
        .is_some_and(|m| !m.is_empty())
    {
        return Reclaim::Keep;
    }
    match pv.spec.persistent_volume_reclaim_policy.as_deref() {
        Some("Delete") => Reclaim::Delete,
        Some("Recycle") => Reclaim::Recycle,
        // Retain: nothing to do; anything else: the volume is marked Failed, its data kept.
        _ => Reclaim::Keep,
    }
}

/// What happens to a volume's data: `reclaim_volume` once `is_volume_released` (the delete and
/// recycle operations check `isVolumeReleased` again before acting).
pub fn reclaim(pv: &Pv, claim: Option<&Pvc>) -> Reclaim {
    if !is_volume_released(pv, claim) {
        return Reclaim::Keep;
    }
    reclaim_volume(pv)
}

#[cfg(test)]
#[path = "pv_controller_tests.rs"]
mod tests;
