//! rules.md §8 "a proof is valid because of how it was written".
//!
//! A confirmation or override (`volguard.io/confirm-*`, `volguard.io/allow-*`) is judged once,
//! on the write that sets it, on every path that can carry it: only a person (not `system:*`,
//! not a service account, not a node) who may use the break-glass verb, asked with that
//! person's own groups, may set one, and the write must carry the setter's username in
//! `volguard.io/confirmed-by` (volguard's mutating stamp writes it; a person may type their own
//! name while it is down). Nobody else writes the stamp. A stored override then counts when its
//! stamp names a person ([`Reader::read`]), with no second question at use time: whoever uses it later
//! (a force delete by a script, a taint by a remediator) cannot lend it authority it lacked.
//!
//! A NodeFence's `confirmed-by` annotation is itself a confirmation (`kubectl volguard fence
//! confirm`): setting or changing it is judged the same way.

mod keys;
mod lift;
mod read;

pub use keys::proof_key;
pub use keys::{CONFIRMED_AT, CONFIRMED_BY, Key};
pub use lift::{Lift, lift};
pub use read::{Expiry, Proof, Read, Reader};
#[cfg(any(test, feature = "testing"))]
pub use read::{assumed, assumed_read};

use super::force_delete::is_human;
use super::{Decision, Effect, Recorded};
use crate::model::fence::NodeFence;
use crate::model::{Meta, UserInfo};

/// Who may set an override (`--break-glass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BreakGlass {
    /// A person whom RBAC allows `use` on `breakglass.volguard.io`, named after the override's
    /// rule (offline: `system:masters` only, the one group every RBAC authorizer allows).
    #[default]
    Rbac,
    /// Any person who may write the annotation (no RBAC question; still never a service
    /// account, node or system identity).
    Anyone,
    /// Nobody: overrides count for nothing and setting one is refused.
    Off,
}

impl super::Choices for BreakGlass {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (
            BreakGlass::Rbac,
            "rbac",
            "a person whom RBAC allows `use` on `breakglass.volguard.io`, named after the override's rule",
        ),
        (
            BreakGlass::Anyone,
            "anyone",
            "any person who may write the annotation (never a service account, node or system identity)",
        ),
        (
            BreakGlass::Off,
            "off",
            "nobody: overrides count for nothing and setting one is refused",
        ),
    ];
}

/// One override annotation and the rule whose break glass it is (the SubjectAccessReview's
/// `name`, and the `rule` label of `volguard_break_glass_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Override {
    pub key: &'static str,
    pub rule: &'static str,
}

/// Every override, on whatever kind it is written (an override on the wrong kind is judged like
/// any other: nobody learns which kinds go unwatched).
pub const OVERRIDES: [Override; Key::ALL.len()] = {
    let mut out = [Override { key: "", rule: "" }; Key::ALL.len()];
    let mut i = 0;
    while i < Key::ALL.len() {
        out[i] = Override {
            key: Key::ALL[i].annotation(),
            rule: Key::ALL[i].rule(),
        };
        i += 1;
    }
    out
};

/// The break glass of a NodeFence confirmation (its `confirmed-by`, set by `fence confirm`).
pub const FENCE_CONFIRMATION: Override = Override {
    key: CONFIRMED_BY,
    rule: "fence-confirm",
};

/// A stamp that names a person: not a `system:` identity (service accounts, nodes, the control
/// plane) and not empty.
pub fn stamp_is_person(stamp: &str) -> bool {
    !stamp.is_empty() && !stamp.starts_with("system:")
}

/// The confirmations this write sets: `"true"` now and not before (`old` is `None` on CREATE).
/// On a NodeFence (`fence`), writing a new `confirmed-by` is the confirmation.
pub fn newly_set(old: Option<&Meta>, new: &Meta, fence: bool) -> Vec<Override> {
    if fence {
        let before = old.and_then(|m| m.annotation(CONFIRMED_BY));
        return match new.annotation(CONFIRMED_BY) {
            Some(after) if !after.is_empty() && Some(after) != before => vec![FENCE_CONFIRMATION],
            _ => Vec::new(),
        };
    }
    OVERRIDES
        .into_iter()
        .filter(|o| new.annotation_true(o.key) && !old.is_some_and(|m| m.annotation_true(o.key)))
        .collect()
}

/// Who confirmed a NodeFence (`kubectl volguard fence confirm`): its stamp, when it names a
/// person (judged when written, like every confirmation: `judge` with `fence`).
pub fn fence_confirmed_by(incident: &NodeFence) -> Option<&str> {
    incident
        .metadata
        .annotation(CONFIRMED_BY)
        .filter(|w| stamp_is_person(w))
}

/// Whether this write sets the proof `key` (`"true"` now and not before; `old` is `None` on
/// CREATE): how a guard that judges the act of confirming (not its use) asks.
pub fn sets(old: Option<&Meta>, new: &Meta, key: Key) -> bool {
    newly_set(old, new, false)
        .iter()
        .any(|o| o.key == key.annotation())
}

/// What the authorizer said of the setter for one override's rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authority {
    Allowed,
    Denied,
    /// It could not be asked (the message says why): unsure is no.
    Unknown(String),
}

/// Decide a CREATE or UPDATE (of any kind, any subresource) that may set a confirmation or touch
/// its stamp. `own`: volguard's identities. `asked`: the authorizer's answer for each override of
/// `newly_set` (in `BreakGlass::Rbac`; empty otherwise).
pub fn judge(
    user: &UserInfo,
    own: &[String],
    old: Option<&Meta>,
    new: &Meta,
    fence: bool,
    mode: BreakGlass,
    asked: &[(Override, Authority)],
) -> Decision {
    if own.contains(&user.username) {
        return Decision::allow("proof-volguard");
    }
    let who = &user.username;
    let set = newly_set(old, new, fence);
    let before = old.and_then(|m| m.annotation(CONFIRMED_BY));
    let stamp = new.annotation(CONFIRMED_BY);
    if set.is_empty() {
        let at_before = old.and_then(|m| m.annotation(CONFIRMED_AT));
        return match (stamp, new.annotation(CONFIRMED_AT)) {
            // Dropping the stamp only makes the confirmations beside it count for nothing.
            (Some(s), _) if Some(s) != before => Decision::deny(
                "proof-stamp-forged",
                format!(
                    "writing {CONFIRMED_BY}={s:?} refused: volguard writes it with the name of the person who sets a \
                     confirmation, in the same request; nobody writes it by hand"
                ),
            ),
            // Nor its time: moved by hand, an expired proof would count again.
            (_, Some(t)) if Some(t) != at_before => Decision::deny(
                "proof-stamp-forged",
                format!(
                    "writing {CONFIRMED_AT}={t:?} refused: volguard writes it with the time a person sets a \
                     confirmation, in the same request; nobody writes it by hand"
                ),
            ),
            _ => Decision::allow("proof-unchanged"),
        };
    }
    let keys: Vec<&str> = set.iter().map(|o| o.key).collect();
    let keys = keys.join(", ");
    if mode == BreakGlass::Off {
        return Decision::deny(
            "proof-break-glass-off",
            format!("setting {keys} refused: break glass is off (--break-glass=off)"),
        );
    }
    if !is_human(user) {
        return Decision::deny(
            "proof-not-a-person",
            format!(
                "setting {keys} refused: a confirmation is a person's word, and {who:?} is a service account, node or \
                 system identity. A person with volguard's break-glass role sets it (kubectl annotate ...)"
            ),
        );
    }
    if mode == BreakGlass::Rbac
        && let Some(refused) = unauthorized(who, &set, asked)
    {
        return refused;
    }
    if stamp != Some(who.as_str()) {
        return Decision::deny(
            "proof-unstamped",
            format!(
                "setting {keys} refused: a confirmation carries its setter's name in {CONFIRMED_BY}, written by \
                 volguard's mutating webhook, which did not run on this request. Set {CONFIRMED_BY}={who} in the \
                 same request"
            ),
        );
    }
    Decision::allow("proof-set").with_effect(Effect::Record(Recorded::ConfirmationSet))
}

/// In `BreakGlass::Rbac`: the refusal of the first override `who` may not use (or whose
/// authority could not be asked: unsure is no).
fn unauthorized(who: &str, set: &[Override], asked: &[(Override, Authority)]) -> Option<Decision> {
    for o in set {
        match asked.iter().find(|(a, _)| a == o).map(|(_, r)| r) {
            Some(Authority::Allowed) => {}
            Some(Authority::Unknown(e)) => {
                return Some(Decision::unavailable(
                    "proof-authority-unknown",
                    format!(
                        "setting {} refused: volguard could not ask whether {who:?} may use \
                         breakglass.volguard.io ({e}); retry",
                        o.key
                    ),
                ));
            }
            Some(Authority::Denied) | None => {
                return Some(Decision::deny(
                    "proof-not-authorized",
                    format!(
                        "setting {} refused: {who:?} may not use breakglass.volguard.io (verb use, name {}): ask an \
                         administrator to bind the ClusterRole volguard-break-glass",
                        o.key, o.rule
                    ),
                ));
            }
        }
    }
    None
}

/// rules.md §8 "Records": a NodeFence's release record (`spec.release`) and its status are
/// written only by volguard (the caller checks who). `None`: this write leaves both as stored
/// (`old` is `None` on CREATE: then neither may be there).
pub fn fence_record(user: &UserInfo, old: Option<&NodeFence>, new: &NodeFence) -> Option<Decision> {
    let (release, status) = match old {
        Some(o) => (o.spec.release != new.spec.release, o.status != new.status),
        None => (new.spec.release.is_some(), new.status != Default::default()),
    };
    let what = match (release, status) {
        (false, false) => return None,
        (true, _) => "its release record (spec.release)",
        (false, true) => "its status",
    };
    Some(Decision::deny(
        "fence-record-not-volguard",
        format!(
            "writing {what} of NodeFence {:?} refused: {:?} is not volguard. A NodeFence's record is written by \
             volguard alone, from what it verified; a person's word goes in through `kubectl volguard fence \
             confirm NODE`, which volguard checks before it counts",
            new.metadata.name, user.username
        ),
    ))
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
