//! rules.md §2c: refuse stripping a protection finalizer while the volume is in use.
//!
//! `kubectl patch pvc X -p '{"metadata":{"finalizers":null}}'` is the folk remedy for a PVC stuck
//! in Terminating; while a pod still mounts the volume it destroys data. The PVC check uses a live
//! list of the namespace's pods (never a cache), handed in by the caller.

use super::in_use::{blocking_pods, describe_pods, pod_blocks_deletion, pv_claimed, pv_in_use};
use super::proof::{Key, Proof, Reader};
use super::{Decision, Effect, Fact, Recorded};
use crate::model::{ClaimRef, Meta, PV_FINALIZER, PVC_FINALIZER, Pod, Pv, Pvc, UserInfo};

const ALLOW_FINALIZER_REMOVAL: Key = Key::AllowFinalizerRemoval;

/// Controller identities that remove protection finalizers as their job.
pub const UPSTREAM_CONTROLLERS: [&str; 3] = [
    "system:serviceaccount:kube-system:pvc-protection-controller",
    "system:serviceaccount:kube-system:pv-protection-controller",
    "system:kube-controller-manager",
];

/// True when this update drops `finalizer` from the object.
pub fn strips(old: &Meta, new: &Meta, finalizer: &str) -> bool {
    old.has_finalizer(finalizer) && !new.has_finalizer(finalizer)
}

/// Why a finalizer removal is allowed without looking at use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exemption {
    VolguardController,
    UpstreamController,
    BreakGlass,
}

impl Exemption {
    /// The decision's rule (row) name.
    pub fn rule(self) -> &'static str {
        match self {
            Exemption::VolguardController => "finalizer-removal-volguard-controller",
            Exemption::UpstreamController => "finalizer-removal-upstream-controller",
            Exemption::BreakGlass => "finalizer-removal-break-glass",
        }
    }

    /// The removal allowed, recorded when a person's override allowed it.
    pub fn decision(self) -> Decision {
        let d = Decision::allow(self.rule());
        match self {
            Exemption::BreakGlass => d.with_effect(Effect::Record(Recorded::BreakGlass)),
            Exemption::VolguardController | Exemption::UpstreamController => d,
        }
    }
}

impl std::fmt::Display for Exemption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Exemption::VolguardController => "volguard controller",
            Exemption::UpstreamController => "upstream protection controller",
            Exemption::BreakGlass => "break-glass annotation",
        })
    }
}

/// Who may always remove the finalizer: volguard's controller, the upstream controllers, and
/// anyone when the stored object carries the break-glass proof, set by a person in an earlier
/// request (rules.md §8: `break_glass` as `proof::Reader::read` found it).
pub fn exempt(
    user: &UserInfo,
    own_controllers: &[String],
    break_glass: Option<&Proof>,
) -> Option<Exemption> {
    if own_controllers.contains(&user.username) {
        Some(Exemption::VolguardController)
    } else if UPSTREAM_CONTROLLERS.contains(&user.username.as_str()) {
        Some(Exemption::UpstreamController)
    } else if break_glass.is_some_and(|p| p.is(ALLOW_FINALIZER_REMOVAL)) {
        Some(Exemption::BreakGlass)
    } else {
        None
    }
}

/// An object whose protection finalizer the guard keeps: a claim or a volume.
pub trait Protected {
    const FINALIZER: &'static str;
    /// The row of an update that keeps the finalizer.
    const KEEPS: &'static str;
    fn meta(&self) -> &Meta;
}

impl Protected for Pvc {
    const FINALIZER: &'static str = PVC_FINALIZER;
    const KEEPS: &'static str = "keeps-pvc-finalizer";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
}

impl Protected for Pv {
    const FINALIZER: &'static str = PV_FINALIZER;
    const KEEPS: &'static str = "keeps-pv-finalizer";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
}

/// A finalizer update as the guard first sees it, before anything is read: judged already (it
/// keeps the finalizer, or its caller or the stored override is exempt), or a strip that can
/// be judged only on the volume's users. A `Strip` is made here alone, so a strip's use is
/// never judged before those three questions were asked.
pub enum Look<'a, T> {
    /// The update keeps the finalizer.
    Decided(Decision),
    /// The caller, or a person's stored override, may always strip it: why, and the answer.
    Exempt(Exemption, Decision),
    Strip(Strip<'a, T>),
}

/// A strip of `T`'s protection finalizer that no exemption allows: the stored object (`old`:
/// ownership and namespace are read from it, never from the update, which may null
/// `ownerReferences` in the same patch), the update, and why a stored override did not count.
pub struct Strip<'a, T> {
    stored: &'a T,
    new: &'a T,
    ignored: Option<String>,
}

/// rules.md §2c's first look at an update of `stored` into `new` by `user`: the override is
/// read from the stored object by the one proof reader (only when the update strips).
pub fn look<'a, T: Protected>(
    user: &UserInfo,
    own_controllers: &[String],
    proofs: &Reader,
    stored: &'a T,
    new: &'a T,
) -> Look<'a, T> {
    if !strips(stored.meta(), new.meta(), T::FINALIZER) {
        return Look::Decided(Decision::allow(T::KEEPS));
    }
    let read = proofs.read(stored.meta(), ALLOW_FINALIZER_REMOVAL);
    let ignored = read.ignored().map(str::to_string);
    match exempt(user, own_controllers, read.proof()) {
        Some(why) => Look::Exempt(why, warned(why.decision(), ignored)),
        None => Look::Strip(Strip {
            stored,
            new,
            ignored,
        }),
    }
}

/// `d`, with the warning that an override did not count, when one did not.
fn warned(d: Decision, ignored: Option<String>) -> Decision {
    match ignored {
        Some(w) => d.with_warning(w),
        None => d,
    }
}

impl<T: Protected> Strip<'_, T> {
    /// The stored object.
    pub fn stored(&self) -> &T {
        self.stored
    }
}

impl Strip<'_, Pvc> {
    /// Whether `pod` holds the claim against the strip (so a cache or a LIST keeps only those).
    pub fn blocks(&self, pod: &Pod) -> bool {
        pod_blocks_deletion(pod, self.stored)
    }

    /// The strip judged on the namespace's pods (`Found`: those that block, or all of them).
    pub fn judge(self, pods: Fact<&[Pod]>) -> Decision {
        warned(pvc_finalizer_removal(self.stored, pods), self.ignored)
    }
}

impl Strip<'_, Pv> {
    /// The claim the stored volume's `claimRef` names, to be read live (a forged phase must not
    /// decide).
    pub fn claim_ref(&self) -> Option<&ClaimRef> {
        self.stored
            .spec
            .claim_ref
            .as_ref()
            .filter(|r| !r.name.is_empty())
    }

    /// The strip judged on that claim (`Missing` when it names none).
    pub fn judge(self, claim: Fact<&Pvc>) -> Decision {
        warned(
            pv_finalizer_removal(self.stored, self.new, claim),
            self.ignored,
        )
    }
}

/// PVC UPDATE that strips `kubernetes.io/pvc-protection`, no exemption applying (`Strip::judge`).
/// `pvc` is the **stored** object (the request's `oldObject`): ownership and namespace are read
/// from it, never from the update, which may null `ownerReferences` in the same patch.
pub fn pvc_finalizer_removal(pvc: &Pvc, pods: Fact<&[Pod]>) -> Decision {
    let pods = match pods {
        Fact::Found(p) => p,
        Fact::Missing => &[][..],
        // Safety first: unsure means in use.
        Fact::Unknown(err) => {
            return Decision::unavailable(
                "strip-pvc-finalizer",
                format!(
                    "refusing to remove {PVC_FINALIZER} from PersistentVolumeClaim {:?}: \
                     volguard could not list the pods of namespace {:?} to prove it unused ({err})",
                    pvc.metadata.name, pvc.metadata.namespace
                ),
            );
        }
    };
    let blocking = blocking_pods(pvc, pods);
    if blocking.is_empty() {
        return Decision::allow("strip-pvc-finalizer");
    }
    // A claim not being deleted gets its finalizer back from volguard's backfill within seconds:
    // the override would buy nothing there, so it is offered only for a claim being deleted.
    let remedy = match pvc.metadata.deletion_timestamp {
        Some(_) => format!(
            "Delete those pods and the claim goes away by itself; to override, a person granted volguard's \
             break-glass role (ClusterRole volguard-break-glass) annotates the claim {ALLOW_FINALIZER_REMOVAL}=true"
        ),
        None => "The claim is not being deleted, so the finalizer stops nothing yet: leave it (volguard's \
                 controller adds it back to any claim without it). To delete the claim, `kubectl delete pvc`; it \
                 goes once those pods end"
            .to_string(),
    };
    Decision::deny(
        "strip-pvc-finalizer",
        format!(
            "refusing to remove {PVC_FINALIZER} from PersistentVolumeClaim {:?}: it is in use by pod(s) {}. \
             Removing it would delete the volume under them. {remedy}",
            pvc.metadata.name,
            describe_pods(&blocking)
        ),
    )
}

/// PV UPDATE that strips `kubernetes.io/pv-protection`, no exemption applying (`Strip::judge`).
/// `claim`: the claim the stored PV's `spec.claimRef` names, read live (`Missing` when it names
/// none): a PV is in use while Bound **or** while that claim is bound to it, whatever the phase.
pub fn pv_finalizer_removal(old: &Pv, new: &Pv, claim: Fact<&Pvc>) -> Decision {
    let claimed = pv_claimed(old, claim);
    if !(pv_in_use(old) || pv_in_use(new) || claimed) {
        return Decision::allow("strip-pv-finalizer");
    }
    let to = old
        .spec
        .claim_ref
        .as_ref()
        .map(|c| format!(" to PersistentVolumeClaim {}/{}", c.namespace, c.name))
        .unwrap_or_default();
    let state = match pv_in_use(old) || pv_in_use(new) {
        true => format!("it is Bound{to}"),
        // The phase says otherwise: say what proves the binding.
        false => format!(
            "its claimRef names PersistentVolumeClaim {}, which is bound to it (status.phase {:?} \
             is not proof: a phase is written through /status)",
            to.trim_start_matches(" to PersistentVolumeClaim "),
            old.status.phase.as_deref().unwrap_or("")
        ),
    };
    Decision::deny(
        "strip-pv-finalizer",
        format!(
            "refusing to remove {PV_FINALIZER} from PersistentVolume {:?}: {state}. \
             Delete the claim first; to override, a person granted volguard's break-glass role (ClusterRole \
             volguard-break-glass) annotates the volume {ALLOW_FINALIZER_REMOVAL}=true",
            old.metadata.name
        ),
    )
}

#[cfg(test)]
#[path = "finalizer_guard_tests.rs"]
mod tests;
