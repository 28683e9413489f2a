//! rules.md §7 "Guards": the out-of-service taint releases a node's volumes (PodGC force-deletes
//! its pods, the attach/detach controller force-detaches), so adding it needs proof that the node
//! is down: a `Fenced` incident for volguard's controller, or the Node's confirm annotation for a
//! person (who then owns the claim; volguard records it as a manual incident).

use super::force_delete::is_human;
use super::proof::{self, Key, Read};
use super::remediators::{Action, Remediators};
use super::{Decision, Effect, Fact, Recorded};
use crate::model::fence::{FENCE_INCIDENT, NodeFence, Phase};
use crate::model::{Node, OUT_OF_SERVICE_TAINT, UserInfo};

const CONFIRM_NODE_DOWN: Key = Key::ConfirmNodeDown;

/// Decide a Node UPDATE from `old` to `new` (rules.md §7 "Guards"): the confirmation and the
/// taint. `alive`: why a live read shows the node alive (Ready, or its Lease renewed within
/// `--partition-after`) — `Found(why)` — or `Missing` when it does not; a node that heartbeats is
/// not down, whoever says so. A trusted remediator's taint counts as its own proof (the caller
/// records it). `confirmed`: the stored Node's confirmation as `proof::Reader::read` found it.
/// The rest is `out_of_service_taint`.
#[allow(clippy::too_many_arguments)]
pub fn node_update(
    user: &UserInfo,
    own_controllers: &[String],
    remediators: &Remediators,
    old: &Node,
    new: &Node,
    incident: Fact<&NodeFence>,
    alive: Fact<&str>,
    confirmed: &Read,
) -> Decision {
    let node = &new.metadata.name;
    let adds_taint = !old.is_out_of_service() && new.is_out_of_service();
    let confirms = proof::sets(Some(&old.metadata), &new.metadata, CONFIRM_NODE_DOWN);
    if !adds_taint && !confirms {
        return Decision::allow("out-of-service-not-added");
    }
    let alive_why = match &alive {
        Fact::Found(why) => Some(why.to_string()),
        Fact::Unknown(e) => Some(format!("volguard could not read its heartbeat ({e})")),
        Fact::Missing => None,
    };
    if let Some(why) = alive_why {
        let what = match adds_taint {
            true => format!("adding taint {OUT_OF_SERVICE_TAINT} to"),
            false => format!("confirming ({CONFIRM_NODE_DOWN}=true)"),
        };
        return Decision::deny(
            if adds_taint {
                "out-of-service-node-alive"
            } else {
                "confirm-node-alive"
            },
            format!(
                "{what} node {node:?} refused: the node is not down: {why}. A node that heartbeats may run its pods and \
                 write to their volumes, whoever says it is down. If the machine is really gone, stop its kubelet or \
                 power it off first; once its Lease stops and it is NotReady (kubectl get node {node}; kubectl -n \
                 kube-node-lease get lease {node}), confirm again"
            ),
        );
    }
    if !adds_taint {
        return Decision::allow("confirm-node-down-recorded");
    }
    if let Some(r) = remediators.may(user, Action::Taint) {
        return Decision::allow("out-of-service-remediator")
            .with_effect(Effect::RecordRelease)
            .with_warning(format!(
            "node {node:?} taken out of service by trusted remediator {:?} (--trusted-remediator): volguard records \
             it as a release incident",
            r.identity
        ));
    }
    out_of_service_taint(user, own_controllers, old, new, incident, confirmed)
}

/// Decide a Node UPDATE from `old` to `new`. `incident` is the NodeFence the new object's
/// `volguard.io/fence-incident` annotation names (only read for volguard's own controller);
/// `confirmed`, the stored Node's confirmation as read.
pub fn out_of_service_taint(
    user: &UserInfo,
    own_controllers: &[String],
    old: &Node,
    new: &Node,
    incident: Fact<&NodeFence>,
    confirmed: &Read,
) -> Decision {
    // 1: only adding the taint concerns this rule (keeping or removing it does not).
    if old.is_out_of_service() || !new.is_out_of_service() {
        return Decision::allow("out-of-service-not-added");
    }
    let node = &new.metadata.name;
    // 2: a person confirmed the machine is down, in an earlier request: the confirmation is read
    // from the stored Node, never from this update (which would let any caller confirm its own
    // taint), and the caller adding the taint is a person (rules.md §8).
    if confirmed.proof().is_some_and(|p| p.is(CONFIRM_NODE_DOWN)) && is_human(user) {
        return Decision::allow("out-of-service-confirmed")
            .with_effect(Effect::Record(Recorded::BreakGlass))
            .with_warning(format!(
            "node {node:?} taken out of service on your confirmation ({CONFIRM_NODE_DOWN}): its pods will be \
             force-deleted and its volumes detached; volguard records this as a manual fencing incident"
        ));
    }
    // 3: volguard's controller, with the incident that proved the fence.
    let own = own_controllers.contains(&user.username);
    let why = match (&incident, own) {
        (Fact::Found(i), true) if i.spec.node == *node && i.status.phase == Phase::Fenced => {
            return Decision::allow("out-of-service-fenced");
        }
        (Fact::Found(i), true) => format!(
            " (incident {:?} is for node {:?} in phase {})",
            i.metadata.name,
            i.spec.node,
            i.status.phase.as_str()
        ),
        (Fact::Unknown(e), true) => format!(" (its incident could not be read: {e})"),
        (Fact::Missing, true) => format!(" (no incident named by {FENCE_INCIDENT})"),
        (_, false) => String::new(),
    };
    // 4: deny, and say how to proceed (and why a confirmation present did not count).
    let why = match (
        proof::sets(Some(&old.metadata), &new.metadata, CONFIRM_NODE_DOWN),
        confirmed,
    ) {
        (_, Read::Valid(_)) if !own => format!(
            "{why} ({CONFIRM_NODE_DOWN} counts for a person; {:?} is a service account or system identity)",
            user.username
        ),
        (_, Read::Ignored(w)) => format!("{why} ({w})"),
        (true, Read::Absent) => format!(
            "{why} ({CONFIRM_NODE_DOWN} set in the same request does not count: set it first, then add the taint)"
        ),
        _ => why,
    };
    Decision::deny(
        "out-of-service-unproven",
        format!(
            "adding taint {OUT_OF_SERVICE_TAINT} to node {node:?} refused: nothing proves the node is down{why}. \
             The taint makes PodGC force-delete its pods and the attach/detach controller detach its volumes while \
             the machine may still write to them. Once you have confirmed the machine is off (or cut from its \
             storage), annotate the node {CONFIRM_NODE_DOWN}=true, then add the taint in a second step; or let volguard fence it \
             (StorageClass annotation volguard.io/fencing=auto, see `kubectl volguard fence`)"
        ),
    )
}

#[cfg(test)]
#[path = "node_taint_tests.rs"]
mod tests;
