//! Unit tests of `src/rules/pod_status.rs`: one per row.

use super::*;
use crate::model::testing::{self, user};
use crate::rules::proof;

fn pod(phase: &str) -> Pod {
    testing::pod("ns", "db-0").on(Some("n1")).in_phase(phase)
}
fn node(out_of_service: bool) -> Node {
    let n = testing::node("n1");
    if out_of_service {
        n.out_of_service()
    } else {
        n
    }
}
fn admin() -> UserInfo {
    user("admin", &["system:masters"])
}

#[test]
fn row1_not_an_ending_passes() {
    let n = node(false);
    let d = pod_status_update(
        &admin(),
        &pod("Pending"),
        &pod("Running"),
        Fact::Found(&n),
        None,
        false,
        proof::assumed(&pod("Pending").metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert_eq!(d.row, "pod-status-not-ending");
    let d = pod_status_update(
        &admin(),
        &pod("Failed"),
        &pod("Failed"),
        Fact::Found(&n),
        None,
        false,
        proof::assumed(&pod("Failed").metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert_eq!(d.row, "pod-status-not-ending");
}

#[test]
fn row2_unscheduled_passes() {
    let mut old = pod("Pending");
    old.spec.node_name = None;
    let d = pod_status_update(
        &admin(),
        &old,
        &pod("Failed"),
        Fact::Found(&node(false)),
        None,
        false,
        proof::assumed(&old.metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert_eq!(d.row, "pod-status-not-scheduled");
}

#[test]
fn row3_own_kubelet_only() {
    let n = node(false);
    let own = user("system:node:n1", &["system:nodes"]);
    let d = pod_status_update(
        &own,
        &pod("Running"),
        &pod("Succeeded"),
        Fact::Found(&n),
        None,
        false,
        proof::assumed(&pod("Running").metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert_eq!(d.row, "pod-status-own-kubelet");
    let other = user("system:node:n2", &["system:nodes"]);
    let d = pod_status_update(
        &other,
        &pod("Running"),
        &pod("Succeeded"),
        Fact::Found(&n),
        None,
        false,
        proof::assumed(&pod("Running").metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert!(!d.allowed);
}

#[test]
fn rows4_5_podgc_cases_pass() {
    let podgc = user(
        "system:serviceaccount:kube-system:pod-garbage-collector",
        &[],
    );
    let d = pod_status_update(
        &podgc,
        &pod("Running"),
        &pod("Failed"),
        Fact::Missing,
        Some("n1-deleted-1"),
        false,
        proof::assumed(&pod("Running").metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert_eq!(d.row, "pod-status-node-gone");
    // Issue 40 point 6: gone without a record of proof, PodGC's marking of a pod that uses a
    // claim waits for one; a pod without claims has nothing to protect.
    let claimed = pod("Running").mounting("data");
    let d = pod_status_update(
        &podgc,
        &claimed,
        &pod("Failed"),
        Fact::Missing,
        None,
        false,
        proof::assumed(&claimed.metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert_eq!((d.allowed, d.row), (false, "pod-status-forged-end"));
    assert!(d.message.unwrap_or_default().contains("fence confirm n1"));
    let d = pod_status_update(
        &podgc,
        &pod("Running"),
        &pod("Failed"),
        Fact::Missing,
        None,
        false,
        proof::assumed(&pod("Running").metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert_eq!(d.row, "pod-status-node-gone");
    let n = node(true);
    let d = pod_status_update(
        &podgc,
        &pod("Running"),
        &pod("Failed"),
        Fact::Found(&n),
        None,
        false,
        proof::assumed(&pod("Running").metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert_eq!(d.row, "pod-status-node-out-of-service");
}

#[test]
fn row6_confirmed_passes_with_warning() {
    let mut old = pod("Running");
    old.metadata.annotations = Some(
        [(
            CONFIRM_FORCE_DELETE.annotation().to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let d = pod_status_update(
        &admin(),
        &old,
        &pod("Failed"),
        Fact::Found(&node(false)),
        None,
        false,
        proof::assumed(&old.metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert_eq!(d.row, "pod-status-confirmed");
    assert_eq!(d.warnings.len(), 1);
    // Point 8 of the trust review: a service account ending a running pod is not a person
    // accepting the risk, whatever the pod carries.
    let sa = crate::model::testing::user(
        "system:serviceaccount:ops:reaper",
        &["system:serviceaccounts"],
    );
    let d = pod_status_update(
        &sa,
        &old,
        &pod("Failed"),
        Fact::Found(&node(false)),
        None,
        false,
        proof::assumed(&old.metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert_eq!((d.allowed, d.row), (false, "pod-status-forged-end"));
}

#[test]
fn row7_forged_end_refused_even_when_the_node_is_unknown() {
    let n = node(false);
    let d = pod_status_update(
        &admin(),
        &pod("Running"),
        &pod("Failed"),
        Fact::Found(&n),
        None,
        false,
        proof::assumed(&pod("Running").metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert!(!d.allowed);
    assert_eq!(d.row, "pod-status-forged-end");
    let m = d.message.unwrap_or_default();
    assert!(
        m.contains("\"db-0\"") && m.contains("only its kubelet"),
        "{m}"
    );
    let d = pod_status_update(
        &admin(),
        &pod("Running"),
        &pod("Failed"),
        Fact::Unknown(crate::rules::decision::ReadError::Timeout {
            what: "node n1".into(),
        }),
        None,
        false,
        proof::assumed(&pod("Running").metadata, CONFIRM_FORCE_DELETE).as_ref(),
    );
    assert!(!d.allowed);
    assert!(d.message.unwrap_or_default().contains("could not be read"));
}

#[test]
fn row1_container_states_ended_by_someone_else_are_a_forged_end() {
    // Phase unchanged, every container rewritten to terminated: the attach/detach controller
    // would detach the volumes of a terminating pod whose containers still run.
    let running = pod("Running");
    let by = |who: &str, group: &str, stops: bool| {
        let user = crate::model::testing::user(who, &[group]);
        pod_status_update(
            &user,
            &running,
            &running,
            Fact::Found(&node(false)),
            None,
            stops,
            proof::assumed(&running.metadata, CONFIRM_FORCE_DELETE).as_ref(),
        )
    };
    let d = by(
        "system:serviceaccount:ns:ci",
        "system:serviceaccounts",
        true,
    );
    assert_eq!((d.allowed, d.row), (false, "pod-status-forged-end"));
    let message = d.message.unwrap_or_default();
    assert!(
        message.contains("containers to terminated or waiting"),
        "{message}"
    );
    // Its own kubelet reports what it saw.
    assert!(by("system:node:n1", "system:nodes", true).allowed);
    // States that keep a container running are not an end.
    let d = by(
        "system:serviceaccount:ns:ci",
        "system:serviceaccounts",
        false,
    );
    assert_eq!(d.row, "pod-status-not-ending");
}
