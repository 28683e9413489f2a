//! SPEC 2d (seed 004): only the kubelet may force-delete a running pod.
//!
//! A force delete (grace period 0) removes the pod from the API at once while its containers may
//! keep running on the node, writing to volumes that a replacement pod is about to mount. The
//! rows below are evaluated in order; the first that matches decides.

use super::{Decision, Fact};
use crate::model::{CONFIRM_FORCE_DELETE, Node, OUT_OF_SERVICE_TAINT, Pod, UserInfo};

/// `--human-force-delete`: what row 8 does for humans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum HumanForceDelete {
    /// Humans must annotate the pod `volguard.io/confirm-force-delete=true` first.
    #[default]
    Confirm,
    /// Humans are always allowed, with a warning.
    Warn,
}

#[derive(Debug, Clone, Default)]
pub struct ForceDeletePolicy {
    pub human: HumanForceDelete,
    pub allow_users: Vec<String>,
    pub allow_groups: Vec<String>,
}

/// The warning kubectl prints for `--force --grace-period=0`.
pub const KUBECTL_WARNING: &str = "Immediate deletion does not wait for confirmation that the running \
resource has been terminated. The resource may continue to run on the cluster indefinitely.";

/// Whether the DELETE is a force delete: grace period given and not positive.
pub fn is_force(grace_period_seconds: Option<i64>) -> bool {
    grace_period_seconds.is_some_and(|g| g <= 0)
}

/// Humans: neither `system:*` identities (nodes, controllers, service accounts) nor service accounts.
pub fn is_human(user: &UserInfo) -> bool {
    !user.username.starts_with("system:") && !user.in_group("system:serviceaccounts")
}

/// Decide a pod DELETE. `node` is the pod's node as read from the cluster (only consulted when
/// the earlier rows did not decide).
pub fn pod_delete(
    user: &UserInfo,
    pod: &Pod,
    grace_period_seconds: Option<i64>,
    node: Fact<&Node>,
    policy: &ForceDeletePolicy,
) -> Decision {
    // 1: graceful deletion; the kubelet stops the containers first.
    if !is_force(grace_period_seconds) {
        return Decision::allow("graceful-delete");
    }
    // 2: the pod's own kubelet confirms its containers are gone.
    if let Some(node_name) = pod.node_name()
        && user.username.strip_prefix("system:node:") == Some(node_name)
        && user.in_group("system:nodes")
    {
        return Decision::allow("force-delete-own-kubelet");
    }
    // 3: no process can be running.
    if !pod.is_scheduled() || pod.is_terminal() {
        return Decision::allow("force-delete-not-running");
    }
    let node_name = pod.node_name().unwrap_or_default();
    match node {
        // 4: node deletion confirms the partition is permanent (seed 004).
        Fact::Missing => return Decision::allow("force-delete-node-gone"),
        // 5: non-graceful node shutdown (KEP-2268).
        Fact::Found(n) if n.is_out_of_service() => {
            return Decision::allow("force-delete-node-out-of-service");
        }
        Fact::Found(_) | Fact::Unknown(_) => {}
    }
    // 6: the owner opted in to immediate termination.
    if pod.spec.termination_grace_period_seconds == Some(0) {
        return Decision::allow("force-delete-pod-opted-in").with_warning(format!(
            "pod {:?} has terminationGracePeriodSeconds 0: its containers may still run on node {node_name:?}",
            pod.metadata.name
        ));
    }
    // 7: configured allow-list.
    if policy.allow_users.contains(&user.username)
        || user.groups.iter().any(|g| policy.allow_groups.contains(g))
    {
        return Decision::allow("force-delete-allow-listed");
    }
    // 8: a human who confirmed (or any human in `warn` mode).
    if is_human(user)
        && (policy.human == HumanForceDelete::Warn
            || pod.metadata.annotation_true(CONFIRM_FORCE_DELETE))
    {
        return Decision::allow("force-delete-confirmed").with_warning(KUBECTL_WARNING);
    }
    // 9: deny, and say how to proceed.
    let unknown = match node {
        Fact::Unknown(e) => format!(" (node {node_name:?} could not be read: {e})"),
        _ => String::new(),
    };
    Decision::deny(
        "force-delete-running-pod",
        format!(
            "force delete of pod {:?} refused: it is {} on node {node_name:?}{unknown} and may keep running there, \
             writing to its volumes, after it is removed from the API. Delete it without --force and let the \
             kubelet stop it. If the node is really down, taint it {OUT_OF_SERVICE_TAINT}=nodeshutdown:NoExecute \
             (or delete the Node). A person who accepts the risk can annotate the pod \
             {CONFIRM_FORCE_DELETE}=true and retry",
            pod.metadata.name,
            pod.phase()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Taint;

    fn pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.name = "db-0".into();
        p.metadata.namespace = "ns".into();
        p.spec.node_name = Some("n1".into());
        p.status.phase = Some("Running".into());
        p
    }
    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            username: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }
    fn node() -> Node {
        let mut n = Node::default();
        n.metadata.name = "n1".into();
        n
    }
    fn decide(u: &UserInfo, p: &Pod, grace: Option<i64>, n: Fact<&Node>) -> Decision {
        pod_delete(u, p, grace, n, &ForceDeletePolicy::default())
    }

    #[test]
    fn row1_graceful_allowed() {
        let admin = user("admin", &["system:masters"]);
        let n = node();
        assert_eq!(
            decide(&admin, &pod(), None, Fact::Found(&n)).rule,
            "graceful-delete"
        );
        assert_eq!(
            decide(&admin, &pod(), Some(30), Fact::Found(&n)).rule,
            "graceful-delete"
        );
        assert!(!decide(&admin, &pod(), Some(0), Fact::Found(&n)).allowed);
        assert!(
            !decide(&admin, &pod(), Some(-1), Fact::Found(&n)).allowed,
            "negative is force"
        );
    }

    #[test]
    fn row2_own_kubelet_only() {
        let n = node();
        let own = user("system:node:n1", &["system:nodes", "system:authenticated"]);
        assert!(decide(&own, &pod(), Some(0), Fact::Found(&n)).allowed);
        let other = user("system:node:n2", &["system:nodes"]);
        assert!(!decide(&other, &pod(), Some(0), Fact::Found(&n)).allowed);
        let no_group = user("system:node:n1", &[]);
        assert!(!decide(&no_group, &pod(), Some(0), Fact::Found(&n)).allowed);
    }

    #[test]
    fn row3_unscheduled_or_terminal() {
        let ctl = user(
            "system:serviceaccount:kube-system:pod-garbage-collector",
            &["system:serviceaccounts"],
        );
        let mut p = pod();
        p.spec.node_name = None;
        assert!(decide(&ctl, &p, Some(0), Fact::Missing).allowed);
        for phase in ["Succeeded", "Failed"] {
            let mut p = pod();
            p.status.phase = Some(phase.into());
            assert_eq!(
                decide(&ctl, &p, Some(0), Fact::Found(&node())).rule,
                "force-delete-not-running"
            );
        }
    }

    #[test]
    fn row4_and_5_node_gone_or_out_of_service() {
        let ctl = user(
            "system:serviceaccount:kube-system:pod-garbage-collector",
            &[],
        );
        assert_eq!(
            decide(&ctl, &pod(), Some(0), Fact::Missing).rule,
            "force-delete-node-gone"
        );
        let mut n = node();
        n.spec.taints.push(Taint {
            key: OUT_OF_SERVICE_TAINT.into(),
            value: Some("nodeshutdown".into()),
            effect: "NoExecute".into(),
        });
        assert!(decide(&ctl, &pod(), Some(0), Fact::Found(&n)).allowed);
        // Unknown node is not a confirmed partition.
        assert!(!decide(&ctl, &pod(), Some(0), Fact::Unknown("timeout".into())).allowed);
    }

    #[test]
    fn row6_pod_opted_in_warns() {
        let mut p = pod();
        p.spec.termination_grace_period_seconds = Some(0);
        let d = decide(
            &user("system:serviceaccount:x:y", &[]),
            &p,
            Some(0),
            Fact::Found(&node()),
        );
        assert!(d.allowed);
        assert_eq!(d.warnings.len(), 1);
    }

    #[test]
    fn row7_allow_list() {
        let policy = ForceDeletePolicy {
            allow_users: vec!["system:serviceaccount:ops:fencer".into()],
            allow_groups: vec!["storage-admins".into()],
            ..Default::default()
        };
        let n = node();
        assert!(
            pod_delete(
                &user("system:serviceaccount:ops:fencer", &[]),
                &pod(),
                Some(0),
                Fact::Found(&n),
                &policy
            )
            .allowed
        );
        assert!(
            pod_delete(
                &user("bob", &["storage-admins"]),
                &pod(),
                Some(0),
                Fact::Found(&n),
                &policy
            )
            .allowed
        );
        assert!(
            !pod_delete(
                &user("bob", &["devs"]),
                &pod(),
                Some(0),
                Fact::Found(&n),
                &policy
            )
            .allowed
        );
    }

    #[test]
    fn row8_humans_confirm_or_warn_mode() {
        let n = node();
        let alice = user("alice", &["system:authenticated"]);
        let d = decide(&alice, &pod(), Some(0), Fact::Found(&n));
        assert!(!d.allowed);
        let msg = d.message.unwrap_or_default();
        assert!(msg.contains("may keep running"));
        assert!(msg.contains(OUT_OF_SERVICE_TAINT) && msg.contains(CONFIRM_FORCE_DELETE));
        let mut p = pod();
        p.metadata.annotations =
            Some([(CONFIRM_FORCE_DELETE.to_string(), "true".to_string())].into());
        let d = decide(&alice, &p, Some(0), Fact::Found(&n));
        assert!(d.allowed);
        assert_eq!(d.warnings, vec![KUBECTL_WARNING.to_string()]);
        // Controllers cannot use the human confirmation.
        let sa = user(
            "system:serviceaccount:kube-system:statefulset-controller",
            &["system:serviceaccounts"],
        );
        assert!(!decide(&sa, &p, Some(0), Fact::Found(&n)).allowed);
        let sa_no_prefix = user("robot", &["system:serviceaccounts"]);
        assert!(!decide(&sa_no_prefix, &p, Some(0), Fact::Found(&n)).allowed);
        let warn = ForceDeletePolicy {
            human: HumanForceDelete::Warn,
            ..Default::default()
        };
        assert!(pod_delete(&alice, &pod(), Some(0), Fact::Found(&n), &warn).allowed);
        assert!(!pod_delete(&sa, &pod(), Some(0), Fact::Found(&n), &warn).allowed);
    }
}
