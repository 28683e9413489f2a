//! PodGC (kube-controller-manager): the pods it force-deletes (grace period 0) whatever their
//! kubelet says, which frees their volumes for the attach/detach controller.

use crate::model::{Node, OUT_OF_SERVICE_TAINT, Pod};

/// Which pass of `gc()` force-deletes a pod (the controller's metric reason names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodGcReason {
    /// `gcTerminating`: deleted, on a node that is not Ready and carries the out-of-service taint.
    TerminatingOutOfService,
    /// `gcOrphaned`: on a node that does not exist.
    Orphaned,
    /// `gcUnscheduledTerminating`: deleted and never scheduled.
    TerminatingUnscheduled,
}

impl PodGcReason {
    pub fn as_str(self) -> &'static str {
        match self {
            PodGcReason::TerminatingOutOfService => "TerminatingOutOfService",
            PodGcReason::Orphaned => "Orphaned",
            PodGcReason::TerminatingUnscheduled => "TerminatingUnscheduled",
        }
    }
}

/// Ports `pkg/controller/podgc/gc_controller.go: func isPodTerminated` (v1.37.2): any phase but
/// `Pending`, `Running` and `Unknown`, so an empty or unrecognised phase counts as terminated.
/// `gcTerminated` deletes the oldest of these pods beyond `--terminated-pod-gc-threshold`.
pub fn podgc_is_pod_terminated(pod: &Pod) -> bool {
    !matches!(
        pod.status.phase.as_deref().unwrap_or_default(),
        "Pending" | "Running" | "Unknown"
    )
}

/// Ports `pkg/controller/podgc/gc_controller.go: func isPodTerminating` (v1.37.2): a deletion
/// timestamp is set.
pub fn podgc_is_pod_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Ports the per-pod passes of `pkg/controller/podgc/gc_controller.go: func (*PodGCController)
/// gc` (v1.37.2), in its order: `gcTerminating`, `gcOrphaned`, `gcUnscheduledTerminating`.
/// `node` is the Node named by `spec.nodeName`, `None` when none exists (the orphan pass also
/// waits out a quarantine and asks the apiserver before it deletes). Not ported: `gcTerminated`,
/// which depends on how many terminated pods the cluster holds (`podgc_is_pod_terminated`).
pub fn podgc_deletes(pod: &Pod, node: Option<&Node>) -> Option<PodGcReason> {
    // gcTerminating: `nodeutil.IsNodeReady` (the first Ready condition is True) and
    // `taints.TaintKeyExists` (any effect). The phase is not read: a Succeeded pod qualifies.
    if podgc_is_pod_terminating(pod)
        && node.is_some_and(|n| n.ready() != Some(true) && has_taint_key(n, OUT_OF_SERVICE_TAINT))
    {
        return Some(PodGcReason::TerminatingOutOfService);
    }
    // gcOrphaned: a node name no Node has, whatever the pod's phase or deletion.
    if pod.node_name().is_some() && node.is_none() {
        return Some(PodGcReason::Orphaned);
    }
    // gcUnscheduledTerminating.
    if podgc_is_pod_terminating(pod) && pod.node_name().is_none() {
        return Some(PodGcReason::TerminatingUnscheduled);
    }
    None
}

/// Ports `pkg/util/taints/taints.go: func TaintKeyExists`.
fn has_taint_key(node: &Node, key: &str) -> bool {
    node.spec.taints.iter().any(|t| t.key == key)
}

#[cfg(test)]
#[path = "podgc_tests.rs"]
mod tests;
