//! Unit tests of `src/rules/node_delete.rs`: one per row.

use super::*;
use crate::model::fence::Phase;
use crate::model::testing::{self, user};
use crate::rules::decision::ReadError;
use crate::rules::proof;

fn node(confirmed: bool) -> Node {
    let mut n = testing::node("n1");
    if confirmed {
        n.metadata.annotations = Some(
            [(
                Key::ConfirmNodeDown.annotation().to_string(),
                "true".to_string(),
            )]
            .into(),
        );
    }
    n
}
fn users() -> Vec<Pod> {
    vec![
        testing::pod("shop", "db-0")
            .on(Some("n1"))
            .in_phase("Running")
            .mounting("data-db-0"),
    ]
}
fn fence(phase: Phase, release: bool) -> Arc<NodeFence> {
    Arc::new(crate::model::testing::incident(phase, release))
}
fn capi() -> Remediators {
    Remediators(vec![
        "system:serviceaccount:capi-system:capi-manager=delete-node"
            .parse()
            .expect("remediator"),
    ])
}
fn decide(
    u: &UserInfo,
    n: &Node,
    pods: &[Pod],
    fences: &[Arc<NodeFence>],
    alive: Fact<&str>,
) -> NodeDelete {
    node_delete(
        u,
        n,
        Fact::Found(pods),
        Fact::Found(fences),
        &capi(),
        alive,
        &proof::assumed_read(&n.metadata, Key::ConfirmNodeDown),
    )
}

#[test]
fn row1_a_drained_node_deletes_freely() {
    let d = decide(
        &user("system:serviceaccount:capi-system:other", &[]),
        &node(false),
        &[],
        &[],
        Fact::Missing,
    );
    assert_eq!(
        (d.decision.allowed, d.decision.row, d.record),
        (true, "node-delete-drained", None::<(String, Vec<String>)>)
    );
    let d = node_delete(
        &user("bob", &[]),
        &node(false),
        Fact::Unknown(ReadError::Timeout {
            what: "the fact".into(),
        }),
        Fact::Found(&[]),
        &capi(),
        Fact::Missing,
        &proof::assumed_read(&node(false).metadata, Key::ConfirmNodeDown),
    );
    assert_eq!(
        (d.decision.allowed, d.decision.row),
        (false, "node-delete-unknown")
    );
}

#[test]
fn row2_a_fence_that_held_or_a_record_is_proof_and_needs_no_new_record() {
    for f in [
        fence(Phase::Fenced, false),
        fence(Phase::Released, false),
        fence(Phase::Detected, true),
    ] {
        let d = decide(
            &user("bob", &[]),
            &node(false),
            &users(),
            std::slice::from_ref(&f),
            Fact::Missing,
        );
        assert_eq!(
            (d.decision.allowed, d.decision.row, d.record),
            (true, "node-delete-fenced", None::<(String, Vec<String>)>)
        );
        // rules.md §8: no record proves a node down once it heartbeats again.
        let healed = decide(
            &user("bob", &[]),
            &node(false),
            &users(),
            &[f],
            Fact::Found("it reports Ready"),
        );
        assert_eq!(
            (healed.decision.allowed, healed.decision.row),
            (false, "node-delete-unproven")
        );
    }
    // A fence that failed, aborted or recovered proves nothing.
    for p in [Phase::Failed, Phase::Aborted, Phase::Done, Phase::Fencing] {
        let d = decide(
            &user("bob", &[]),
            &node(false),
            &users(),
            &[fence(p, false)],
            Fact::Missing,
        );
        assert_eq!(d.decision.row, "node-delete-unproven", "{p:?}");
    }
}

#[test]
fn row3_a_persons_stored_confirmation_is_proof_and_is_recorded() {
    let d = decide(
        &user("alice", &["system:authenticated"]),
        &node(true),
        &users(),
        &[],
        Fact::Missing,
    );
    assert_eq!(
        (d.decision.allowed, d.decision.row),
        (true, "node-delete-proven")
    );
    let (proof, pods) = d.record.expect("recorded");
    assert!(
        proof.contains("alice") && proof.contains(Key::ConfirmNodeDown.annotation()),
        "{proof}"
    );
    assert_eq!(pods, vec!["shop/db-0".to_string()]);
    // A service account is not a person confirming.
    let sa = user(
        "system:serviceaccount:ops:reaper",
        &["system:serviceaccounts"],
    );
    let d = decide(&sa, &node(true), &users(), &[], Fact::Missing);
    assert_eq!(d.decision.row, "node-delete-unproven");
}

#[test]
fn row4_a_trusted_remediator_only_for_what_it_is_named() {
    let capi_sa = user(
        "system:serviceaccount:capi-system:capi-manager",
        &["system:serviceaccounts"],
    );
    let d = decide(&capi_sa, &node(false), &users(), &[], Fact::Missing);
    assert_eq!(
        (d.decision.allowed, d.decision.row),
        (true, "node-delete-proven")
    );
    assert!(d.record.expect("recorded").0.contains("trusted remediator"));
    let none = node_delete(
        &capi_sa,
        &node(false),
        Fact::Found(&users()),
        Fact::Found(&[]),
        &Remediators::default(),
        Fact::Missing,
        &proof::assumed_read(&node(false).metadata, Key::ConfirmNodeDown),
    );
    assert_eq!(none.decision.row, "node-delete-unproven");
}

#[test]
fn a_node_that_heartbeats_is_not_down_whoever_says_so() {
    let capi_sa = user("system:serviceaccount:capi-system:capi-manager", &[]);
    for (u, n) in [(capi_sa, node(false)), (user("alice", &[]), node(true))] {
        let d = decide(&u, &n, &users(), &[], Fact::Found("it reports Ready"));
        assert_eq!(
            (d.decision.allowed, d.decision.row),
            (false, "node-delete-unproven")
        );
        let m = d.decision.message.unwrap_or_default();
        assert!(m.contains("the node is not down: it reports Ready"), "{m}");
    }
}

#[test]
fn row5_unproven_says_what_to_do() {
    let d = decide(
        &user("bob", &[]),
        &node(false),
        &users(),
        &[],
        Fact::Missing,
    );
    assert_eq!(
        (d.decision.allowed, d.decision.row),
        (false, "node-delete-unproven")
    );
    let m = d.decision.message.unwrap_or_default();
    for s in [
        "shop/db-0",
        "kubectl drain n1",
        "kubectl volguard fence confirm n1",
        "--trusted-remediator",
    ] {
        assert!(m.contains(s), "{s}: {m}");
    }
}
