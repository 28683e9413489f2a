//! rules.md §2h: only the kubelet ends a running pod.
//!
//! A pod whose phase is `Failed` or `Succeeded` counts as stopped everywhere: PodGC deletes it,
//! the attach/detach controller detaches its volumes, and §2d row 3 lets anyone force-delete it.
//! So a terminal phase written through `pods/status` by anyone but the pod's kubelet would free
//! its volumes while its containers may still run. The same holds for the containers' states: the
//! attach/detach controller treats a terminating pod none of whose containers runs as stopped, so
//! container states rewritten to `terminated` (phase unchanged) are judged as a forged end. The
//! rows below are evaluated in order.

use super::force_delete::{is_human, is_own_kubelet};
use super::proof::{Key, Proof};
use super::{Decision, Effect, Fact, Recorded};
use crate::model::{Node, OUT_OF_SERVICE_TAINT, Pod, UserInfo};

const CONFIRM_FORCE_DELETE: Key = Key::ConfirmForceDelete;

/// Decide an `UPDATE pods/status` from `old` to `new`. `node` is the pod's node as the apiserver
/// has it now (only read when the earlier rows did not decide); `gone_record`, when it is gone,
/// the NodeFence that records its deletion on proof. `stops_containers`: a container ran before
/// this write and none runs after it (`ContainerStates::any_running`). `confirmed`: the stored
/// pod's proof, when one counts (`proof::Reader::read`).
pub fn pod_status_update(
    user: &UserInfo,
    old: &Pod,
    new: &Pod,
    node: Fact<&Node>,
    gone_record: Option<&str>,
    stops_containers: bool,
    confirmed: Option<&Proof>,
) -> Decision {
    // 1: only a running pod turned terminal, or its running containers all ended, concerns
    // this rule.
    if old.is_terminal() || (!new.is_terminal() && !stops_containers) {
        return Decision::allow("pod-status-not-ending");
    }
    // 2: an unscheduled pod runs nowhere.
    if !old.is_scheduled() {
        return Decision::allow("pod-status-not-scheduled");
    }
    // 3: the pod's own kubelet reports what it saw.
    if is_own_kubelet(user, old) {
        return Decision::allow("pod-status-own-kubelet");
    }
    let node_name = old.node_name().unwrap_or_default();
    match node {
        // 4: PodGC's orphaned pods: the node is gone, its deletion recorded on proof (a pod
        // whose volumes all end with it has nothing to protect; rules.md §2d row 4).
        Fact::Missing if gone_record.is_some() || !super::claims::has_lasting_volumes(old) => {
            return Decision::allow("pod-status-node-gone");
        }
        // 5: PodGC's terminating pods on an out-of-service node (KEP-2268).
        Fact::Found(n) if n.is_out_of_service() => {
            return Decision::allow("pod-status-node-out-of-service");
        }
        Fact::Found(_) | Fact::Missing | Fact::Unknown(_) => {}
    }
    // 6: a person accepted the risk on the stored pod (a service account's confirmation does not
    // count: rules.md §8).
    if confirmed.is_some_and(|p| p.is(CONFIRM_FORCE_DELETE)) && is_human(user) {
        return Decision::allow("pod-status-confirmed")
            .with_effect(Effect::Record(Recorded::BreakGlass))
            .with_warning(format!(
            "pod {:?} marked {} while it may still run on node {node_name:?}: its volumes can be detached under it",
            old.metadata.name,
            new.phase()
        ));
    }
    // 7: deny, and say how to proceed.
    let unknown = match node {
        Fact::Unknown(e) => format!(" (node {node_name:?} could not be read: {e})"),
        Fact::Missing => super::force_delete::gone_unrecorded(node_name),
        Fact::Found(_) => String::new(),
    };
    let what = match new.is_terminal() {
        true => format!("to phase {}", new.phase()),
        false => "containers to terminated or waiting (none running)".to_string(),
    };
    Decision::deny(
        "pod-status-forged-end",
        format!(
            "setting pod {:?} {what} refused: it is {} on node {node_name:?}{unknown}, and only its kubelet may \
             end it there. A terminal phase lets PodGC delete the pod and the attach/detach controller detach its \
             volumes while its containers may still write to them. Delete the pod gracefully instead; if the node \
             is really down, taint it {OUT_OF_SERVICE_TAINT}=nodeshutdown:NoExecute (see `kubectl volguard fence`), \
             or, as a person granted volguard's break-glass role (ClusterRole volguard-break-glass), annotate \
             the pod {CONFIRM_FORCE_DELETE}=true to accept the risk",
            old.metadata.name,
            old.phase()
        ),
    )
}

#[cfg(test)]
#[path = "pod_status_tests.rs"]
mod tests;
