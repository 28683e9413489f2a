//! rules.md §2i: deletion protection for storage. `volguard.io/delete-protection: "true"` on a
//! PVC, a PV or a Namespace refuses its DELETE; a Namespace's DELETE is refused too while it holds
//! a protected claim (the namespace controller would otherwise delete the claim with it, or hang
//! Terminating on the claim's refusal). Lifting the protection (the annotation removed or set to
//! anything but "true") is a person's update, recorded; a controller or a service account cannot
//! lift it. The rows below are evaluated in order.

use super::force_delete::is_human;
use super::{Decision, Fact};
use crate::model::{DELETE_PROTECTION, Meta, UserInfo};

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
                && pv.spec.persistent_volume_reclaim_policy.as_deref() == Some("Delete") =>
        {
            return Some(Decision::deny(
                "delete-protection-volume-behind",
                format!(
                    "deleting PersistentVolumeClaim {claim:?} refused: it is bound to PersistentVolume {:?}, which \
                     carries {DELETE_PROTECTION}=true and whose reclaim policy is Delete, so deleting the claim would \
                     make the provisioner delete the protected data. Set the volume's reclaim policy to Retain \
                     (kubectl patch pv {} -p '{{\"spec\":{{\"persistentVolumeReclaimPolicy\":\"Retain\"}}}}'), or, if \
                     its data may really go, a person lifts its protection first ({})",
                    pv.metadata.name,
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

/// An UPDATE from `old` to `new`: does it lift the protection, and may this caller?
pub fn update(user: &UserInfo, kind: Kind, old: &Meta, new: &Meta) -> Decision {
    // 4: nothing lifted.
    if !protected(old) || protected(new) {
        return Decision::allow("delete-protection-unchanged");
    }
    // 5: a person lifts it: allowed, recorded (an Event names who).
    if is_human(user) {
        return Decision::allow("delete-protection-lifted").with_warning(format!(
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
