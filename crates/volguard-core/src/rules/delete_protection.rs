//! rules.md §2i: deletion protection for storage. `volguard.io/delete-protection: "true"` on a
//! PVC, a PV or a Namespace refuses its DELETE; a Namespace's DELETE is refused too while it holds
//! a protected claim (the namespace controller would otherwise delete the claim with it, or hang
//! Terminating on the claim's refusal). Lifting the protection (the annotation removed or set to
//! anything but "true") is a person's update, recorded; a controller or a service account cannot
//! lift it. The rows below are evaluated in order.

use super::force_delete::is_human;
use super::{Decision, Effect, Fact, Recorded};
use crate::model::{DELETE_PROTECTION, Meta, Pod, Pv, Pvc, UserInfo};

/// What carries the protection: the kind as messages name it, and kubectl's noun.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Claim,
    Volume,
    Namespace,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Claim => "PersistentVolumeClaim",
            Kind::Volume => "PersistentVolume",
            Kind::Namespace => "Namespace",
        }
    }

    /// `kubectl annotate …` that lifts the protection.
    fn lift(self, meta: &Meta) -> String {
        match self {
            Kind::Claim => format!(
                "kubectl annotate pvc {} -n {} {DELETE_PROTECTION}-",
                meta.name, meta.namespace
            ),
            Kind::Volume => format!("kubectl annotate pv {} {DELETE_PROTECTION}-", meta.name),
            Kind::Namespace => {
                format!(
                    "kubectl annotate namespace {} {DELETE_PROTECTION}-",
                    meta.name
                )
            }
        }
    }

    fn target(self, meta: &Meta) -> String {
        match self {
            Kind::Claim => format!("{}/{}", meta.namespace, meta.name),
            Kind::Volume | Kind::Namespace => meta.name.clone(),
        }
    }
}

pub fn protected(meta: &Meta) -> bool {
    meta.annotation_true(DELETE_PROTECTION)
}

/// What stands behind a claim whose DELETE is judged (rules.md §2i): the volume it is bound to
/// and its namespace, as read (`Missing`: unbound, or not there).
pub struct Behind<'a> {
    pub volume: Fact<&'a crate::model::Pv>,
    pub namespace: Fact<&'a Meta>,
}

/// A claim's DELETE refused for what stands behind it, before its own mark is looked at: a
/// claim bound to a protected volume whose reclaim policy is `Delete` (the PV controller and the
/// provisioner delete the backing volume when the claim goes, before the PV object's own DELETE is
/// ever judged), or a claim in a protected namespace. Unsure is protected: a fact that could not
/// be read refuses (retry). `None`: nothing behind it is protected.
pub fn claim_behind(old: &Meta, behind: &Behind<'_>) -> Option<Decision> {
    let claim = format!("{}/{}", old.namespace, old.name);
    match &behind.volume {
        Fact::Found(pv)
            if protected(&pv.metadata)
                && matches!(
                    pv.spec.persistent_volume_reclaim_policy.as_deref(),
                    Some("Delete" | "Recycle")
                ) =>
        {
            return Some(Decision::deny(
                "delete-protection-volume-behind",
                format!(
                    "deleting PersistentVolumeClaim {claim:?} refused: it is bound to PersistentVolume {:?}, which \
                     carries {DELETE_PROTECTION}=true and whose reclaim policy is {}, so deleting the claim would \
                     make the provisioner delete (or the recycler wipe) the protected data. Set the volume's reclaim policy to Retain \
                     (kubectl patch pv {} -p '{{\"spec\":{{\"persistentVolumeReclaimPolicy\":\"Retain\"}}}}'), or, if \
                     its data may really go, a person lifts its protection first ({})",
                    pv.metadata.name,
                    pv.spec
                        .persistent_volume_reclaim_policy
                        .as_deref()
                        .unwrap_or_default(),
                    pv.metadata.name,
                    Kind::Volume.lift(&pv.metadata)
                ),
            ));
        }
        Fact::Unknown(e) => {
            return Some(Decision::unavailable(
                "delete-protection-unknown",
                format!(
                    "deleting PersistentVolumeClaim {claim:?} refused: volguard could not read its volume ({e}), which \
                     may carry {DELETE_PROTECTION}=true; retry"
                ),
            ));
        }
        Fact::Found(_) | Fact::Missing => {}
    }
    match &behind.namespace {
        Fact::Found(ns) if protected(ns) => Some(Decision::deny(
            "delete-protection-namespace-behind",
            format!(
                "deleting PersistentVolumeClaim {claim:?} refused: its namespace {:?} carries {DELETE_PROTECTION}=true, \
                 which protects every claim in it. If this claim's data may really go, a person lifts the \
                 namespace's protection first ({})",
                ns.name,
                Kind::Namespace.lift(ns)
            ),
        )),
        Fact::Unknown(e) => Some(Decision::unavailable(
            "delete-protection-unknown",
            format!(
                "deleting PersistentVolumeClaim {claim:?} refused: volguard could not read its namespace ({e}), which \
                 may carry {DELETE_PROTECTION}=true; retry"
            ),
        )),
        Fact::Found(_) | Fact::Missing => None,
    }
}

/// A DELETE of `old` (a claim, a volume or a namespace). `claims`: for a namespace, the
/// protected claims it holds (names; never read for the others).
pub fn delete(kind: Kind, old: &Meta, claims: Fact<&[String]>) -> Decision {
    // 1: the object itself carries the protection.
    if protected(old) {
        return Decision::deny(
            "delete-protection-protected",
            format!(
                "deleting {} {:?} refused: it carries {DELETE_PROTECTION}=true. If its data may really go, \
                 a person lifts the protection first ({}; the update is recorded), then deletes it",
                kind.name(),
                kind.target(old),
                kind.lift(old)
            ),
        );
    }
    if kind != Kind::Namespace {
        return Decision::allow("delete-protection-not-protected");
    }
    match claims {
        // 2: a namespace holding a protected claim.
        Fact::Found(c) if !c.is_empty() => {
            const SHOWN: usize = 5;
            let mut names: Vec<&str> = c.iter().take(SHOWN).map(String::as_str).collect();
            names.sort_unstable();
            let more = match c.len().saturating_sub(SHOWN) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            Decision::deny(
                "delete-protection-namespace-holds",
                format!(
                    "deleting Namespace {:?} refused: it holds PersistentVolumeClaim(s) {}{more} carrying \
                     {DELETE_PROTECTION}=true, which deleting the namespace would delete with it. If their data \
                     may really go, a person lifts each claim's protection first (kubectl annotate pvc NAME -n {} \
                     {DELETE_PROTECTION}-), then deletes the namespace",
                    old.name,
                    names.join(", "),
                    old.name
                ),
            )
        }
        Fact::Found(_) | Fact::Missing => Decision::allow("delete-protection-not-protected"),
        // 3: when unsure whether a claim is protected, it is.
        Fact::Unknown(e) => Decision::deny(
            "delete-protection-unknown",
            format!(
                "deleting Namespace {:?} refused: volguard could not read its claims ({e}), and a protected \
                 claim would be deleted with it. Retry in a moment",
                old.name
            ),
        ),
    }
}

/// rules.md §2i "judged by outcome": whether the volume's data goes once the PV controller (or
/// the external provisioner, which deletes a Released volume of policy `Delete` the same way)
/// acts on `pv`: its own predicate says released (`upstream::is_volume_released`, with the
/// claim its `claimRef` names) and the policy is `Delete`, or `Recycle` (the recycler wipes the
/// volume: it counts as a delete).
pub fn destroys(pv: &Pv, claim: Option<&Pvc>) -> bool {
    matches!(
        pv.spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete" | "Recycle")
    ) && super::upstream::is_volume_released(pv, claim)
}

/// Whether an update of a volume touches what `destroys` reads of it (its policy or claimRef).
pub fn touches_release(old: &Pv, new: &Pv) -> bool {
    old.spec.persistent_volume_reclaim_policy != new.spec.persistent_volume_reclaim_policy
        || old.spec.claim_ref != new.spec.claim_ref
}

/// What a volume's data means to someone, read for an update that would destroy it: the claims
/// its `claimRef` names before and after (live), the pods that use the one bound to it, and that
/// claim's namespace.
pub struct Stake<'a> {
    pub claim_before: Fact<&'a Pvc>,
    pub claim_after: Fact<&'a Pvc>,
    /// The pods that use the claim bound to this volume (`in_use::pod_blocks_deletion`, a
    /// consistent read); `Missing` when no claim is bound to it.
    pub users: Fact<&'a [Pod]>,
    pub namespace: Fact<&'a Meta>,
}

/// A volume UPDATE judged by what the PV controller will do after it (rules.md §2i): a write
/// after which `destroys` turns true — a reclaim policy flipped to `Delete`/`Recycle` on a
/// Released volume, a `claimRef` rewritten to another UID or a missing claim — is refused like
/// the DELETE it amounts to when the volume, its claim or the claim's namespace is marked, or a
/// pod uses it. Unsure is at stake (retry). `None`: this write destroys nothing new.
pub fn volume_update(old: &Pv, new: &Pv, stake: &Stake<'_>) -> Option<Decision> {
    let name = &new.metadata.name;
    // A marked volume whose policy turns to Delete/Recycle is released some day (its claim
    // deleted once unused, its namespace deleted): the mark refuses the flip itself.
    let reclaims = |pv: &Pv| {
        matches!(
            pv.spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Delete" | "Recycle")
        )
    };
    if reclaims(new) && !reclaims(old) && (protected(&old.metadata) || protected(&new.metadata)) {
        return Some(Decision::deny(
            "delete-protection-volume-policy",
            format!(
                "setting the reclaim policy of PersistentVolume {name:?} to {} refused: it carries \
                 {DELETE_PROTECTION}=true, and with that policy the PV controller deletes (or wipes) its data as soon \
                 as its claim goes. If its data may really go, a person lifts the protection first ({})",
                new.spec
                    .persistent_volume_reclaim_policy
                    .as_deref()
                    .unwrap_or_default(),
                Kind::Volume.lift(&new.metadata)
            ),
        ));
    }
    let before = match &stake.claim_before {
        Fact::Found(c) => destroys(old, Some(c)),
        Fact::Missing => destroys(old, None),
        Fact::Unknown(_) => false,
    };
    let after = match &stake.claim_after {
        Fact::Found(c) => destroys(new, Some(c)),
        Fact::Missing => destroys(new, None),
        Fact::Unknown(e) => {
            return Some(Decision::unavailable(
                "delete-protection-unknown",
                format!(
                    "updating PersistentVolume {name:?} refused: volguard could not read the claim its claimRef names \
                     ({e}), so it cannot tell whether the PV controller would then delete or recycle its data; retry"
                ),
            ));
        }
    };
    if before || !after {
        return None;
    }
    let claim = match &stake.claim_before {
        Fact::Found(c) => Some(format!("{}/{}", c.metadata.namespace, c.metadata.name)),
        _ => None,
    };
    let why = if protected(&new.metadata) || protected(&old.metadata) {
        format!("it carries {DELETE_PROTECTION}=true")
    } else if let (Fact::Found(c), Some(claim)) = (&stake.claim_before, &claim)
        && protected(&c.metadata)
    {
        format!("its claim {claim} carries {DELETE_PROTECTION}=true")
    } else if let Fact::Found(ns) = &stake.namespace
        && protected(ns)
    {
        format!(
            "its claim's namespace {:?} carries {DELETE_PROTECTION}=true",
            ns.name
        )
    } else {
        match &stake.users {
            Fact::Found([]) | Fact::Missing => return None,
            Fact::Found(pods) => format!(
                "pods still use it ({})",
                pods.iter()
                    .take(5)
                    .map(|p| format!("{}/{}", p.metadata.namespace, p.metadata.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Fact::Unknown(e) => format!("volguard could not tell whether pods use it ({e})"),
        }
    };
    let policy = new
        .spec
        .persistent_volume_reclaim_policy
        .as_deref()
        .unwrap_or_default();
    Some(Decision::deny(
        "delete-protection-volume-released",
        format!(
            "updating PersistentVolume {name:?} refused: after this write the PV controller would see it released (its \
             claim gone, or claimRef naming another claim) with reclaim policy {policy}, and {} its data, while {why}. \
             Keep persistentVolumeReclaimPolicy Retain and claimRef as they are; if the data may really go, a person \
             lifts the protection first and the pods stop using it",
            if policy == "Recycle" {
                "wipe"
            } else {
                "delete"
            }
        ),
    ))
}

/// An UPDATE from `old` to `new`: does it lift the protection, and may this caller?
pub fn update(user: &UserInfo, kind: Kind, old: &Meta, new: &Meta) -> Decision {
    // 4: nothing lifted.
    if !protected(old) || protected(new) {
        return Decision::allow("delete-protection-unchanged");
    }
    // 5: a person lifts it: allowed, recorded (an Event names who).
    if is_human(user) {
        return Decision::allow("delete-protection-lifted")
            .with_effect(Effect::Record(Recorded::DeleteProtectionLifted))
            .with_warning(format!(
            "{} {:?} is no longer protected from deletion ({DELETE_PROTECTION} lifted by {}; recorded)",
            kind.name(),
            kind.target(old),
            user.username
        ));
    }
    // 6: a controller or service account (a GitOps sync, an operator) may not lift it.
    Decision::deny(
        "delete-protection-lift-refused",
        format!(
            "removing {DELETE_PROTECTION} from {} {:?} refused: lifting deletion protection is a person's decision, \
             and {:?} is not a person (a service account or system identity). Ask a person to run: {}",
            kind.name(),
            kind.target(old),
            user.username,
            kind.lift(old)
        ),
    )
}

#[cfg(test)]
#[path = "delete_protection_tests.rs"]
mod tests;
