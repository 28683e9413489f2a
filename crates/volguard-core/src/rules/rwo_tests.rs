//! Unit tests of `src/rules/rwo.rs`: every case of rules.md §2f.

use super::*;
use crate::model::testing;
use crate::rules::decision::ReadError;

fn pod(name: &str, node: Option<&str>, phase: &str) -> Pod {
    testing::pod("ns", name).on(node).in_phase(phase)
}

fn pvc(modes: &[&str]) -> Pvc {
    testing::pvc("ns", "data").with_modes(modes)
}

fn claim() -> Claim {
    Claim {
        name: "data".into(),
        ephemeral: false,
        read_only: false,
    }
}

fn node(out_of_service: bool) -> Node {
    let n = testing::node("n1");
    if out_of_service {
        n.out_of_service()
    } else {
        n
    }
}

fn place_with(pvc: Fact<&Pvc>, others: Vec<(&Pod, Fact<&Node>)>) -> Decision {
    let me = pod("web-1", None, "Pending");
    place(
        &me,
        "n2",
        &[ClaimFacts {
            claim: claim(),
            pvc,
            others,
        }],
    )
}

#[test]
fn holder_on_other_node_denied_with_names_and_advice() {
    let rwo = pvc(&["ReadWriteOnce"]);
    let holder = pod("web-0", Some("n1"), "Running");
    let n = node(false);
    let d = place_with(Fact::Found(&rwo), vec![(&holder, Fact::Found(&n))]);
    assert!(!d.allowed);
    assert_eq!((d.code, d.row), (403, "rwo-held-on-other-node"));
    let m = d.message.unwrap();
    assert!(m.starts_with(r#"pod "web-1" cannot run on node "n2": PersistentVolumeClaim "data" is ReadWriteOnce and pod "web-0" uses it on node "n1""#), "{m}");
    assert!(m.contains("strategy: Recreate"), "{m}");
}

#[test]
fn shared_modes_and_same_node_allowed() {
    let holder = pod("web-0", Some("n1"), "Running");
    let n = node(false);
    for modes in [
        &["ReadWriteMany"][..],
        &["ReadOnlyMany"],
        &["ReadWriteOnce", "ReadWriteMany"],
        &["ReadWriteOncePod", "ReadWriteMany"],
        &[],
    ] {
        let c = pvc(modes);
        let d = place_with(Fact::Found(&c), vec![(&holder, Fact::Found(&n))]);
        assert!(d.allowed, "{modes:?}");
    }
    // Same node: one node, one writer set; the kubelet shares the mount.
    let rwo = pvc(&["ReadWriteOnce"]);
    let same = pod("web-0", Some("n2"), "Running");
    assert!(place_with(Fact::Found(&rwo), vec![(&same, Fact::Found(&n))]).allowed);
}

#[test]
fn terminal_unscheduled_and_self_are_not_holders() {
    let rwo = pvc(&["ReadWriteOnce"]);
    let n = node(false);
    for p in [
        pod("old", Some("n1"), "Succeeded"),
        pod("old", Some("n1"), "Failed"),
        pod("pending", None, "Pending"),
        pod("web-1", Some("n1"), "Running"),
    ] {
        assert!(
            place_with(Fact::Found(&rwo), vec![(&p, Fact::Found(&n))]).allowed,
            "{}",
            p.metadata.name
        );
    }
}

#[test]
fn holder_on_gone_or_out_of_service_node_does_not_count() {
    let rwo = pvc(&["ReadWriteOnce"]);
    let holder = pod("web-0", Some("n1"), "Running");
    assert!(place_with(Fact::Found(&rwo), vec![(&holder, Fact::Missing)]).allowed);
    let oos = node(true);
    assert!(place_with(Fact::Found(&rwo), vec![(&holder, Fact::Found(&oos))]).allowed);
    // A node that could not be read: unsure means it still runs.
    let d = place_with(
        Fact::Found(&rwo),
        vec![(
            &holder,
            Fact::Unknown(ReadError::Timeout {
                what: "the fact".into(),
            }),
        )],
    );
    assert!(!d.allowed);
}

#[test]
fn terminating_holder_still_counts() {
    let rwo = pvc(&["ReadWriteOnce"]);
    let mut holder = pod("web-0", Some("n1"), "Running");
    holder.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into());
    holder.metadata.deletion_grace_period_seconds = Some(30);
    let n = node(false);
    assert!(!place_with(Fact::Found(&rwo), vec![(&holder, Fact::Found(&n))]).allowed);
}

#[test]
fn mixed_modes_with_a_read_write_once_mode_are_locked() {
    // Point 2 of the trust review: ReadOnlyMany beside ReadWriteOnce does not make a read-write
    // mount shareable; ReadWriteOncePod is once-only too.
    let holder = pod("web-0", Some("n1"), "Running");
    let n = node(false);
    for modes in [
        &["ReadWriteOnce", "ReadOnlyMany"][..],
        &["ReadWriteOncePod"],
        &["ReadWriteOncePod", "ReadOnlyMany"],
    ] {
        let c = pvc(modes);
        let d = place_with(Fact::Found(&c), vec![(&holder, Fact::Found(&n))]);
        assert_eq!(
            (d.allowed, d.row),
            (false, "rwo-held-on-other-node"),
            "{modes:?}"
        );
    }
}

#[test]
fn a_read_only_mount_takes_no_lock() {
    let holder = pod("web-0", Some("n1"), "Running");
    let n = node(false);
    let rwo = pvc(&["ReadWriteOnce"]);
    let me = pod("web-1", None, "Pending");
    let read_only = Claim {
        read_only: true,
        ..claim()
    };
    let d = place(
        &me,
        "n2",
        &[ClaimFacts {
            claim: read_only,
            pvc: Fact::Found(&rwo),
            others: vec![(&holder, Fact::Found(&n))],
        }],
    );
    assert!(d.allowed, "{d:?}");
}

#[test]
fn a_missing_claim_is_refused_and_an_unknown_claim_warns() {
    // Point 1 of the trust review: a missing claim (read live by the caller) cannot carry a lock,
    // so two pods placed on two nodes would both pass.
    let d = place_with(Fact::Missing, vec![]);
    assert_eq!((d.allowed, d.row), (false, "rwo-claim-missing"));
    let m = d.message.unwrap_or_default();
    assert!(m.contains("Create the claim first"), "{m}");
    let d = place_with(
        Fact::Unknown(ReadError::Timeout {
            what: "the fact".into(),
        }),
        vec![],
    );
    assert!(d.allowed);
    assert!(
        d.warnings[0].contains("could not check"),
        "{:?}",
        d.warnings
    );
}

#[test]
fn nodes_using_detects_two_nodes_on_rwo_only() {
    use crate::model::ClaimSource;
    let named = |name: &str, node: &str, phase: &str| {
        let mut p = pod(name, Some(node), phase);
        p.spec.volumes.push(crate::model::Volume {
            name: "d".into(),
            persistent_volume_claim: Some(ClaimSource {
                claim_name: "data".into(),
                read_only: false,
            }),
            ..Default::default()
        });
        p
    };
    let pods = [
        named("a", "n1", "Running"),
        named("b", "n2", "Running"),
        named("c", "n2", "Running"),
        named("d", "n3", "Succeeded"),
    ];
    let rwo = pvc(&["ReadWriteOnce"]);
    assert_eq!(nodes_using(&rwo, &pods), vec!["n1", "n2"]);
    let m = multi_node_message(&rwo, &nodes_using(&rwo, &pods));
    assert!(m.contains("2 nodes at once (n1, n2)"), "{m}");
    assert!(nodes_using(&pvc(&["ReadWriteMany"]), &pods).is_empty());
    assert_eq!(nodes_using(&rwo, &pods[..1]), vec!["n1"]);
}

#[test]
fn a_missing_ephemeral_claim_is_judged_as_rwo() {
    // Its controller creates it after the pod: not refused for being missing, but a holder of
    // the same name elsewhere still counts (unknown mode means ReadWriteOnce).
    let holder = pod("web-0", Some("n1"), "Running");
    let n = node(false);
    let me = pod("web-1", None, "Pending");
    let eph = Claim {
        ephemeral: true,
        ..claim()
    };
    let facts = |others| ClaimFacts {
        claim: eph.clone(),
        pvc: Fact::Missing,
        others,
    };
    let d = place(&me, "n2", &[facts(vec![(&holder, Fact::Found(&n))])]);
    assert_eq!((d.allowed, d.row), (false, "rwo-held-on-other-node"));
    let m = d.message.unwrap_or_default();
    assert!(
        m.contains("does not exist yet (its access mode is unknown"),
        "{m}"
    );
    assert!(place(&me, "n2", &[facts(vec![])]).allowed);
}

#[test]
fn a_holder_on_a_node_gone_without_record_names_the_proof_as_the_next_step() {
    let rwo = pvc(&["ReadWriteOnce"]);
    let holder = pod("web-0", Some("n1"), "Running");
    let gone = Fact::Unknown(ReadError::GoneUnrecorded { node: "n1".into() });
    let d = place_with(Fact::Found(&rwo), vec![(&holder, gone)]);
    assert_eq!((d.allowed, d.row), (false, "rwo-held-on-other-node"));
    let m = d.message.unwrap();
    assert!(m.contains("kubectl volguard fence confirm n1"), "{m}");
    assert!(!m.contains("has ended"), "never ends by itself: {m}");
}

#[test]
fn the_refusal_names_the_holder_the_lock_names_else_the_first_by_node_and_name() {
    let n = node(false);
    let (a, b) = (
        pod("web-a", Some("n1"), "Running"),
        pod("web-b", Some("n1"), "Running"),
    );
    let named = |pvc: &Pvc, others: Vec<(&Pod, Fact<&Node>)>| {
        let d = place_with(Fact::Found(pvc), others);
        assert_eq!(d.row, "rwo-held-on-other-node");
        let m = d.message.unwrap_or_default();
        ["web-a", "web-b"]
            .into_iter()
            .find(|p| m.contains(&format!("and pod {p:?} uses it")))
            .map(str::to_string)
    };
    // No lock: the first by node and name, whatever order the index gave.
    let unlocked = pvc(&["ReadWriteOnce"]);
    for others in [
        vec![(&a, Fact::Found(&n)), (&b, Fact::Found(&n))],
        vec![(&b, Fact::Found(&n)), (&a, Fact::Found(&n))],
    ] {
        assert_eq!(named(&unlocked, others).as_deref(), Some("web-a"));
    }
    // The lock names web-b on n1: the refusal names web-b too, as the lock and `explain` do.
    let lock = crate::rules::rwo_lock::RwoLock::new(
        &b,
        "n1",
        crate::rules::rwo_lock::Via::Bind,
        jiff::Timestamp::UNIX_EPOCH,
    );
    let mut locked = unlocked.clone();
    locked.metadata = testing::annotated(&[(crate::rules::rwo_lock::RWO_LOCK, &lock.encode())]);
    locked.metadata.name = "data".into();
    locked.metadata.namespace = "ns".into();
    let others = vec![(&a, Fact::Found(&n)), (&b, Fact::Found(&n))];
    assert_eq!(named(&locked, others).as_deref(), Some("web-b"));
    // named_holder itself: a lock naming a pod that is no candidate changes nothing.
    let other_lock = crate::rules::rwo_lock::RwoLock {
        pod: "gone".into(),
        ..lock
    };
    assert_eq!(
        named_holder([("web-b", "n1"), ("web-a", "n1")], Some(&other_lock)),
        Some(("web-a", "n1"))
    );
    assert_eq!(named_holder([], None), None);
}
