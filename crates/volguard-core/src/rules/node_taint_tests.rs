//! Unit tests of `src/rules/node_taint.rs`: one per row.

use super::*;
use crate::model::fence::NodeFenceSpec;
use crate::model::testing;
use crate::rules::proof;

fn node(tainted: bool, confirmed: bool) -> Node {
    let mut n = testing::node("n1");
    if tainted {
        n = n.out_of_service();
    }
    if confirmed {
        n.metadata.annotations = Some(
            [(
                CONFIRM_NODE_DOWN.annotation().to_string(),
                "true".to_string(),
            )]
            .into(),
        );
    }
    n
}
fn user(name: &str) -> UserInfo {
    testing::user(name, &[])
}
const CTL: &str = "system:serviceaccount:volguard-system:volguard-controller";
fn own() -> Vec<String> {
    vec![CTL.to_string()]
}
fn incident(node: &str, phase: Phase) -> NodeFence {
    let mut i = NodeFence {
        spec: NodeFenceSpec {
            node: node.into(),
            ..Default::default()
        },
        ..Default::default()
    };
    i.metadata.name = format!("{node}-1");
    i.status.phase = phase;
    i
}

#[test]
fn row1_keeping_or_removing_passes() {
    let d = out_of_service_taint(
        &user("admin"),
        &own(),
        &node(true, false),
        &node(true, false),
        Fact::Missing,
        &proof::assumed_read(&node(true, false).metadata, CONFIRM_NODE_DOWN),
    );
    assert_eq!(d.row, "out-of-service-not-added");
    let d = out_of_service_taint(
        &user("admin"),
        &own(),
        &node(true, false),
        &node(false, false),
        Fact::Missing,
        &proof::assumed_read(&node(true, false).metadata, CONFIRM_NODE_DOWN),
    );
    assert_eq!(d.row, "out-of-service-not-added");
}

#[test]
fn row2_person_with_a_stored_confirmation_passes_with_warning() {
    let d = out_of_service_taint(
        &user("admin"),
        &own(),
        &node(false, true),
        &node(true, true),
        Fact::Missing,
        &proof::assumed_read(&node(false, true).metadata, CONFIRM_NODE_DOWN),
    );
    assert_eq!(d.row, "out-of-service-confirmed");
    assert!(d.warnings[0].contains("manual fencing incident"));
}

#[test]
fn row2_a_confirmation_in_the_same_request_or_by_a_service_account_does_not_count() {
    // Point 8 of the trust review: any caller could add the taint and its own confirmation in
    // one update.
    let d = out_of_service_taint(
        &user("admin"),
        &own(),
        &node(false, false),
        &node(true, true),
        Fact::Missing,
        &proof::assumed_read(&node(false, false).metadata, CONFIRM_NODE_DOWN),
    );
    assert_eq!((d.allowed, d.row), (false, "out-of-service-unproven"));
    let m = d.message.unwrap_or_default();
    assert!(m.contains("set in the same request does not count"), "{m}");
    let sa = testing::user(
        "system:serviceaccount:ops:healer",
        &["system:serviceaccounts"],
    );
    let d = out_of_service_taint(
        &sa,
        &own(),
        &node(false, true),
        &node(true, true),
        Fact::Missing,
        &proof::assumed_read(&node(false, true).metadata, CONFIRM_NODE_DOWN),
    );
    assert_eq!((d.allowed, d.row), (false, "out-of-service-unproven"));
    let m = d.message.unwrap_or_default();
    assert!(m.contains("counts for a person"), "{m}");
}

#[test]
fn row3_controller_needs_a_fenced_incident_for_this_node() {
    let (old, new) = (node(false, false), node(true, false));
    let fenced = incident("n1", Phase::Fenced);
    let d = out_of_service_taint(
        &user(CTL),
        &own(),
        &old,
        &new,
        Fact::Found(&fenced),
        &proof::assumed_read(&old.metadata, CONFIRM_NODE_DOWN),
    );
    assert_eq!(d.row, "out-of-service-fenced");
    let other = incident("n2", Phase::Fenced);
    let d = out_of_service_taint(
        &user(CTL),
        &own(),
        &old,
        &new,
        Fact::Found(&other),
        &proof::assumed_read(&old.metadata, CONFIRM_NODE_DOWN),
    );
    assert!(!d.allowed);
    assert!(d.message.unwrap_or_default().contains("is for node \"n2\""));
    let fencing = incident("n1", Phase::Fencing);
    let d = out_of_service_taint(
        &user(CTL),
        &own(),
        &old,
        &new,
        Fact::Found(&fencing),
        &proof::assumed_read(&old.metadata, CONFIRM_NODE_DOWN),
    );
    assert!(!d.allowed);
    assert!(d.message.unwrap_or_default().contains("phase Fencing"));
    // Anyone else naming a fenced incident is still a person without confirmation.
    let d = out_of_service_taint(
        &user("admin"),
        &own(),
        &old,
        &new,
        Fact::Found(&fenced),
        &proof::assumed_read(&old.metadata, CONFIRM_NODE_DOWN),
    );
    assert!(!d.allowed);
}

#[test]
fn row4_unproven_refused_with_what_to_do() {
    let d = out_of_service_taint(
        &user("admin"),
        &own(),
        &node(false, false),
        &node(true, false),
        Fact::Missing,
        &proof::assumed_read(&node(false, false).metadata, CONFIRM_NODE_DOWN),
    );
    assert!(!d.allowed);
    assert_eq!(d.row, "out-of-service-unproven");
    assert!(
        d.message
            .unwrap_or_default()
            .contains(CONFIRM_NODE_DOWN.annotation())
    );
}
