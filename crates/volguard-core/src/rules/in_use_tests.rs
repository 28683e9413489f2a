//! Unit tests of `src/rules/in_use.rs`.

use super::*;
use crate::model::{OwnerReference, Present, Volume, testing};

fn pvc(ns: &str, name: &str, owner: Option<&str>) -> Pvc {
    let mut p = testing::pvc(ns, name);
    p.metadata.owner_references = owner.map(|uid| {
        vec![OwnerReference {
            kind: "Pod".into(),
            name: "x".into(),
            uid: uid.into(),
            controller: Some(true),
        }]
    });
    p
}

fn pod(name: &str, node: Option<&str>, phase: &str, claim: &str, ephemeral: bool) -> Pod {
    let p = testing::pod("ns", name)
        .with_uid(&format!("uid-{name}"))
        .on(node)
        .in_phase(phase);
    if !ephemeral {
        return p.mounting(claim);
    }
    let mut p = p;
    p.spec.volumes.push(Volume {
        name: claim.into(),
        ephemeral: Some(Present {}),
        ..Default::default()
    });
    p
}

#[test]
fn scheduled_pod_blocks_in_every_phase() {
    let c = pvc("ns", "data", None);
    for phase in ["Pending", "Running", "Succeeded", "Failed", "Unknown"] {
        assert!(
            pod_blocks_deletion(&pod("a", Some("n1"), phase, "data", false), &c),
            "{phase}"
        );
    }
}

#[test]
fn unscheduled_pod_never_blocks() {
    let c = pvc("ns", "data", None);
    assert!(!pod_blocks_deletion(
        &pod("a", None, "Pending", "data", false),
        &c
    ));
    assert!(!pod_blocks_deletion(
        &pod("a", Some(""), "Pending", "data", false),
        &c
    ));
}

#[test]
fn other_namespace_or_claim_does_not_block() {
    assert!(!pod_blocks_deletion(
        &pod("a", Some("n1"), "Running", "data", false),
        &pvc("other", "data", None)
    ));
    assert!(!pod_blocks_deletion(
        &pod("a", Some("n1"), "Running", "logs", false),
        &pvc("ns", "data", None)
    ));
}

#[test]
fn ephemeral_claim_counts_whatever_its_owner_says_and_stops_at_shutdown() {
    // Point 12 of the trust review: an owner re-pointed by a patch that kept the finalizer must
    // not free a claim the running pod of that name mounts (rules.md §3).
    let mut p = pod("web", Some("n1"), "Running", "scratch", true);
    assert!(pod_blocks_deletion(
        &p,
        &pvc("ns", "web-scratch", Some("someone-else"))
    ));
    let owned = pvc("ns", "web-scratch", Some("uid-web"));
    assert!(pod_blocks_deletion(&p, &owned));
    p.metadata.deletion_timestamp = Some("t".into());
    assert!(
        pod_blocks_deletion(&p, &owned),
        "graceful deletion still blocks"
    );
    p.metadata.deletion_grace_period_seconds = Some(0);
    assert!(
        !pod_blocks_deletion(&p, &owned),
        "shut-down pod releases (#99604)"
    );
}

/// rules.md §3: a claim orphaned by `--cascade=orphan` or a patch that dropped its
/// ownerReference may still be mounted by the pod of that name: unsure means in use.
#[test]
fn orphaned_ephemeral_claim_counts_for_the_pod_of_that_name() {
    let orphan = pvc("ns", "web-scratch", None);
    let mut p = pod("web", Some("n1"), "Running", "scratch", true);
    assert!(pod_blocks_deletion(&p, &orphan));
    assert!(pod_uses_for_unused_since(&p, &orphan));
    assert!(names_claim(&p, &orphan));
    // Unscheduled: never blocks deletion (it mounts nothing yet).
    let pending = pod("web", None, "Pending", "scratch", true);
    assert!(!pod_blocks_deletion(&pending, &orphan));
    // Shut down: released, as an owned one is (#99604).
    p.metadata.deletion_timestamp = Some("t".into());
    p.metadata.deletion_grace_period_seconds = Some(0);
    assert!(!pod_blocks_deletion(&p, &orphan));
    // Owned by another UID: for deletion it still counts (a re-pointed owner proves nothing);
    // for "unused since" it is an earlier pod's claim.
    let p = pod("web", Some("n1"), "Running", "scratch", true);
    assert!(pod_blocks_deletion(
        &p,
        &pvc("ns", "web-scratch", Some("uid-old"))
    ));
    assert!(!names_claim(&p, &pvc("ns", "web-scratch", Some("uid-old"))));
}

#[test]
fn plain_claim_of_shut_down_pod_still_blocks() {
    let mut p = pod("a", Some("n1"), "Running", "data", false);
    p.metadata.deletion_timestamp = Some("t".into());
    p.metadata.deletion_grace_period_seconds = Some(0);
    assert!(pod_blocks_deletion(&p, &pvc("ns", "data", None)));
}

#[test]
fn unused_since_counts_non_terminal_pods_scheduled_or_not() {
    let c = pvc("ns", "data", None);
    assert!(pod_uses_for_unused_since(
        &pod("a", None, "Pending", "data", false),
        &c
    ));
    assert!(pod_uses_for_unused_since(
        &pod("a", Some("n"), "Running", "data", false),
        &c
    ));
    assert!(!pod_uses_for_unused_since(
        &pod("a", Some("n"), "Succeeded", "data", false),
        &c
    ));
    assert!(!pod_uses_for_unused_since(
        &pod("a", Some("n"), "Failed", "data", false),
        &c
    ));
    let pods = vec![
        pod("a", Some("n"), "Failed", "data", false),
        pod("b", Some("n"), "Running", "other", false),
    ];
    assert!(unused_for_since(&c, &pods));
}

#[test]
fn blocking_pods_and_description() {
    let c = pvc("ns", "data", None);
    let pods = vec![
        pod("a", Some("n1"), "Running", "data", false),
        pod("b", None, "Pending", "data", false),
        pod("c", Some("n2"), "Failed", "data", false),
    ];
    let b = blocking_pods(&c, &pods);
    assert_eq!(
        describe_pods(&b),
        "a (phase Running, node n1), c (phase Failed, node n2)"
    );
}

#[test]
fn pv_bound_is_in_use() {
    let mut pv = Pv::default();
    assert!(!pv_in_use(&pv));
    pv.status.phase = Some("Bound".into());
    assert!(pv_in_use(&pv));
    pv.status.phase = Some("Released".into());
    assert!(!pv_in_use(&pv));
}
