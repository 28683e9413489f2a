//! rules.md §2d: only the kubelet may force-delete a running pod.
//!
//! A force delete (grace period 0) removes the pod from the API at once while its containers may
//! keep running on the node, writing to volumes that a replacement pod is about to mount. The
//! rows below are evaluated in order; the first that matches decides.

use super::proof::{Key, Proof};
use super::{Decision, Effect, Fact, Recorded};
use crate::model::{Node, OUT_OF_SERVICE_TAINT, Pod, UserInfo};

const CONFIRM_FORCE_DELETE: Key = Key::ConfirmForceDelete;
const CONFIRM_NODE_DOWN: Key = Key::ConfirmNodeDown;

/// `--human-force-delete`: what row 8 does for humans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HumanForceDelete {
    /// Humans must confirm on the pod first (its force-delete confirmation, rules.md §8).
    #[default]
    Confirm,
    /// Humans are always allowed, with a warning.
    Warn,
}

impl super::Choices for HumanForceDelete {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (
            HumanForceDelete::Confirm,
            "confirm",
            "humans must confirm on the pod first (its force-delete confirmation)",
        ),
        (
            HumanForceDelete::Warn,
            "warn",
            "humans are always allowed, with a warning",
        ),
    ];
}

#[derive(Debug, Clone, Default)]
pub struct ForceDeletePolicy {
    pub human: HumanForceDelete,
    pub allow_users: Vec<String>,
    pub allow_groups: Vec<String>,
    /// `--trusted-remediator`: the remediators an operator runs, each with what it may do (rules.md
    /// §7); `force-delete` ones pass row 7, the others are read by the Node guards.
    pub remediators: super::remediators::Remediators,
}

/// The warning kubectl prints for `--force --grace-period=0`.
pub const KUBECTL_WARNING: &str = "Immediate deletion does not wait for confirmation that the running \
resource has been terminated. The resource may continue to run on the cluster indefinitely.";

/// Whether the DELETE is a force delete: a grace period of exactly 0. A negative one is not: the
/// apiserver turns it into 1 s before the pod is deleted (`rest.BeforeDelete`, the pod strategy's
/// `CheckGracefulDelete`), so the kubelet still stops the containers first.
pub fn is_force(grace_period_seconds: Option<i64>) -> bool {
    grace_period_seconds == Some(0)
}

/// Humans: neither `system:*` identities (nodes, controllers, service accounts) nor service accounts.
pub fn is_human(user: &UserInfo) -> bool {
    !user.username.starts_with("system:") && !user.in_group("system:serviceaccounts")
}

/// The pod's own kubelet: exactly `system:node:<its node>` in group `system:nodes`.
pub fn is_own_kubelet(user: &UserInfo, pod: &Pod) -> bool {
    pod.node_name().is_some_and(|n| {
        user.username.strip_prefix("system:node:") == Some(n) && user.in_group("system:nodes")
    })
}

/// Decide a pod DELETE. `node` is the pod's node as read from the cluster (only consulted when
/// the earlier rows did not decide); `gone_record`, when the node is gone, the NodeFence that
/// records its deletion on proof (a node gone without one proves nothing: rules.md §7).
/// `confirmed`: the stored pod's proof, when one counts (`proof::Reader::read`).
pub fn pod_delete(
    user: &UserInfo,
    pod: &Pod,
    grace_period_seconds: Option<i64>,
    node: Fact<&Node>,
    gone_record: Option<&str>,
    policy: &ForceDeletePolicy,
    confirmed: Option<&Proof>,
) -> Decision {
    judge(
        user,
        pod,
        grace_period_seconds,
        (node, gone_record),
        policy,
        confirmed,
        Via::Delete,
    )
}

/// Decide a `pods/eviction` with its `deleteOptions`: the same rows as a DELETE; the refusal
/// speaks of draining (in `kubectl drain`, `--force` means something else).
pub fn pod_eviction(
    user: &UserInfo,
    pod: &Pod,
    grace_period_seconds: Option<i64>,
    node: Fact<&Node>,
    gone_record: Option<&str>,
    policy: &ForceDeletePolicy,
    confirmed: Option<&Proof>,
) -> Decision {
    judge(
        user,
        pod,
        grace_period_seconds,
        (node, gone_record),
        policy,
        confirmed,
        Via::Eviction,
    )
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Delete,
    Eviction,
}

fn judge(
    user: &UserInfo,
    pod: &Pod,
    grace_period_seconds: Option<i64>,
    (node, gone_record): (Fact<&Node>, Option<&str>),
    policy: &ForceDeletePolicy,
    confirmed: Option<&Proof>,
    via: Via,
) -> Decision {
    // 1: graceful deletion; the kubelet stops the containers first.
    if !is_force(grace_period_seconds) {
        return Decision::allow("graceful-delete");
    }
    // 2: the pod's own kubelet confirms its containers are gone.
    if is_own_kubelet(user, pod) {
        return Decision::allow("force-delete-own-kubelet");
    }
    // 3: no process can be running.
    if !pod.is_scheduled() || pod.is_terminal() {
        return Decision::allow("force-delete-not-running");
    }
    let node_name = pod.node_name().unwrap_or_default();
    match node {
        // 4: the node's deletion, allowed on proof and recorded, confirms the machine is down.
        // A pod whose volumes all end with it (emptyDir, configMap, secret, projected, downwardAPI)
        // has nothing to protect; any other volume — a claim, inline NFS, iSCSI, CSI — needs the record.
        Fact::Missing if gone_record.is_some() || !super::claims::has_lasting_volumes(pod) => {
            return Decision::allow("force-delete-node-gone");
        }
        // 5: non-graceful node shutdown (KEP-2268).
        Fact::Found(n) if n.is_out_of_service() => {
            return Decision::allow("force-delete-node-out-of-service");
        }
        Fact::Found(_) | Fact::Missing | Fact::Unknown(_) => {}
    }
    // 6: the owner opted in to immediate termination.
    if pod.spec.termination_grace_period_seconds == Some(0) {
        return Decision::allow("force-delete-pod-opted-in").with_warning(format!(
            "pod {:?} has terminationGracePeriodSeconds 0: its containers may still run on node {node_name:?}",
            pod.metadata.name
        ));
    }
    // 7: configured allow-list, and trusted remediators named for force deletes.
    if policy.allow_users.contains(&user.username)
        || user.groups.iter().any(|g| policy.allow_groups.contains(g))
    {
        return Decision::allow("force-delete-allow-listed");
    }
    if let Some(r) = policy
        .remediators
        .may(user, super::remediators::Action::ForceDelete)
    {
        return Decision::allow("force-delete-remediator").with_warning(format!(
            "pod {:?} force-deleted by trusted remediator {:?} (--trusted-remediator) while it may still run on node \
             {node_name:?}",
            pod.metadata.name, r.identity
        ));
    }
    // 8: a human who confirmed (or any human in `warn` mode).
    if is_human(user)
        && (policy.human == HumanForceDelete::Warn
            || confirmed.is_some_and(|p| p.is(CONFIRM_FORCE_DELETE)))
    {
        // volguard's own account first: the break-glass Event carries the first warning, and
        // kubectl's generic text says neither who accepted the risk nor how.
        let how = if let Some(p) = confirmed.filter(|p| p.is(CONFIRM_FORCE_DELETE)) {
            format!(
                "by {:?} on {:?}'s confirmation ({CONFIRM_FORCE_DELETE}=true)",
                user.username,
                p.by()
            )
        } else {
            format!(
                "by {:?} without a confirmation (--human-force-delete=warn)",
                user.username
            )
        };
        return Decision::allow("force-delete-confirmed")
            .with_effect(Effect::Record(Recorded::BreakGlass))
            .with_warning(format!(
                "pod {:?} force-deleted {how} while it is {} on node {node_name:?}: the risk accepted is that its \
                 containers keep running there, writing to its volumes, after a replacement mounts them",
                pod.metadata.name,
                pod.phase()
            ))
            .with_warning(KUBECTL_WARNING);
    }
    // 9: deny, and say how to proceed.
    refuse(pod, node_name, node, via)
}

/// Row 9: the refusal, saying how to proceed by the way the pod was to be removed.
fn refuse(pod: &Pod, node_name: &str, node: Fact<&Node>, via: Via) -> Decision {
    let unknown = match node {
        Fact::Unknown(e) => format!(" (node {node_name:?} could not be read: {e})"),
        Fact::Missing => gone_unrecorded(node_name),
        Fact::Found(_) => String::new(),
    };
    let (what, graceful) = match via {
        Via::Delete => (
            "force delete",
            "Delete it without --force and let the kubelet stop it",
        ),
        Via::Eviction => (
            "eviction with gracePeriodSeconds 0",
            "Evict it gracefully (kubectl drain without --grace-period=0): the kubelet stops it within its \
             termination grace period",
        ),
    };
    Decision::deny(
        "force-delete-running-pod",
        format!(
            "{what} of pod {:?} refused: it is {} on node {node_name:?}{unknown} and may keep running there, \
             writing to its volumes, after it is removed from the API. {graceful}. If the node is really down, in this \
             order: confirm it (`kubectl volguard fence confirm {node_name}`, or annotate the node \
             {CONFIRM_NODE_DOWN}=true), then taint it {OUT_OF_SERVICE_TAINT}=nodeshutdown:NoExecute (PodGC \
             then removes its pods). A person granted volguard's break-glass role (ClusterRole \
             volguard-break-glass) who accepts the risk can annotate the pod {CONFIRM_FORCE_DELETE}=true and retry",
            pod.metadata.name,
            pod.phase()
        ),
    )
}

/// Why a node that no longer exists proves nothing, and what to do (rules.md §7).
pub fn gone_unrecorded(node: &str) -> String {
    format!(
        " (node {node:?} no longer exists, but no NodeFence records its deletion on proof: a Node deleted \
         without one may still run on its machine; once you know the machine is off, \
         `kubectl volguard fence confirm {node}` records it)"
    )
}

#[cfg(test)]
#[path = "force_delete_tests.rs"]
mod tests;
