//! Unit tests of `src/explain/pod.rs`: why a pod will not start, from its claims, placement and node.

use crate::explain::Attachment;
use crate::explain::pod::{ClaimFacts, build, build_with_nodes, table};
use crate::model::fence::{NodeFence, NodeFenceSpec, Phase};
use crate::model::testing;

fn me() -> crate::model::Pod {
    testing::pod("shop", "db-1")
        .on(Some("n2"))
        .in_phase("Pending")
        .mounting("data")
}
fn claim(rwo: bool) -> crate::model::Pvc {
    let mut c = testing::pvc("shop", "data");
    if rwo {
        c = c.with_modes(&["ReadWriteOnce"]);
    }
    c.spec.volume_name = Some("pv-1".into());
    c.status.phase = Some("Bound".into());
    c
}
fn facts(pvc: Option<&crate::model::Pvc>, attachments: Vec<Attachment>) -> Vec<ClaimFacts<'_>> {
    vec![ClaimFacts {
        name: "data".into(),
        pvc,
        pv: None,
        attachments,
    }]
}

#[test]
fn a_pod_without_a_storage_problem_says_so_in_one_line() {
    let c = claim(true);
    let e = build(&me(), &facts(Some(&c), vec![]), &[], &[]);
    assert!(e.blocked.is_empty());
    assert!(e.next.starts_with("no storage problem found"), "{}", e.next);
    let bare = testing::pod("shop", "web").on(Some("n1"));
    let e = build(&bare, &[], &[], &[]);
    assert_eq!(e.next, "the pod uses no claim: no storage problem");
}

#[test]
fn missing_and_terminating_claims_say_what_to_do() {
    let e = build(&me(), &facts(None, vec![]), &[], &[]);
    assert!(e.next.contains("create claim data"), "{}", e.next);
    let mut c = claim(true);
    c.metadata.deleted_at("2026-11-25T10:00:00Z");
    // An unplaced pod waits for it; a placed one is not blocked (the claim waits for it).
    let pending = testing::pod("shop", "db-1")
        .in_phase("Pending")
        .mounting("data");
    let e = build(&pending, &facts(Some(&c), vec![]), &[], &[]);
    assert_eq!(e.claims[0].state, "terminating");
    assert!(
        e.next.contains("kubectl volguard explain pvc data"),
        "{}",
        e.next
    );
    let e = build(&me(), &facts(Some(&c), vec![]), &[], &[]);
    assert!(e.blocked.is_empty(), "{:?}", e.blocked);
    assert!(e.next.contains("waits for this pod to end"), "{}", e.next);
}

#[test]
fn the_holder_on_another_node_and_the_multi_attach_are_named_never_a_manual_va_delete() {
    let c = claim(true);
    let holder = testing::pod("shop", "db-0")
        .on(Some("n1"))
        .in_phase("Running")
        .mounting("data");
    let va = Attachment {
        name: "csi-123".into(),
        node: "n1".into(),
        attached: true,
        terminating: false,
    };
    let e = build(
        &me(),
        &facts(Some(&c), vec![va]),
        std::slice::from_ref(&holder),
        &[],
    );
    let all = e.blocked.join("\n");
    assert!(all.contains("pod db-0 holds it on node n1"), "{all}");
    assert!(all.contains("still attached to node n1"), "{all}");
    assert!(
        e.next.contains("do not delete VolumeAttachment csi-123"),
        "{}",
        e.next
    );
    let t = table(&e);
    assert!(
        t.contains("used by:  db-0 on n1") && t.contains("attached: csi-123 on node n1"),
        "{t}"
    );
    // A partitioned holder's node: the incident that releases it.
    let mut f = NodeFence {
        spec: NodeFenceSpec {
            node: "n1".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    f.metadata.name = "n1-7".into();
    f.status.phase = Phase::Fencing;
    let e = build(&me(), &facts(Some(&c), vec![]), &[holder], &[f]);
    assert!(
        e.next.contains("fencing incident n1-7 (Fencing)"),
        "{}",
        e.next
    );
}

#[test]
fn the_holder_named_is_the_one_the_lock_names_as_the_refusal_does() {
    use crate::rules::rwo_lock::{RWO_LOCK, RwoLock, Via};
    let on_n1 = |name: &str| {
        testing::pod("shop", name)
            .on(Some("n1"))
            .in_phase("Running")
            .mounting("data")
    };
    let (a, b) = (on_n1("db-a"), on_n1("db-b"));
    let lock = RwoLock::new(&b, "n1", Via::Bind, jiff::Timestamp::UNIX_EPOCH);
    let mut c = claim(true);
    c.metadata.annotations = Some([(RWO_LOCK.to_string(), lock.encode())].into());
    for users in [[a.clone(), b.clone()], [b.clone(), a.clone()]] {
        let e = build(&me(), &facts(Some(&c), vec![]), &users, &[]);
        let all = e.blocked.join("\n");
        assert!(all.contains("pod db-b holds it on node n1"), "{all}");
    }
    // Without a lock: the first by node and name, whatever the order.
    let bare = claim(true);
    for users in [[a.clone(), b.clone()], [b.clone(), a.clone()]] {
        let e = build(&me(), &facts(Some(&bare), vec![]), &users, &[]);
        let all = e.blocked.join("\n");
        assert!(all.contains("pod db-a holds it on node n1"), "{all}");
    }
}

/// A pod whose nodeSelector or required node affinity excludes the holder's node is never
/// told it "runs on" that node: it waits for the holder, or its constraints must change.
#[test]
fn the_advice_never_names_a_node_the_pod_cannot_land_on() {
    let c = claim(true);
    let holder = testing::pod("shop", "db-0")
        .on(Some("n1"))
        .in_phase("Running")
        .mounting("data");
    let pending = || {
        testing::pod("shop", "db-1")
            .in_phase("Pending")
            .mounting("data")
    };
    let mut n1 = testing::node("n1");
    n1.metadata.labels = Some(
        [
            ("disk".to_string(), "hdd".to_string()),
            ("zone".to_string(), "a".to_string()),
        ]
        .into_iter()
        .collect(),
    );
    let nodes = std::slice::from_ref(&n1);
    let by_selector = {
        let mut p = pending();
        p.spec.node_selector = Some(Box::new(
            [("disk".to_string(), "ssd".to_string())]
                .into_iter()
                .collect(),
        ));
        p
    };
    let by_affinity: crate::model::Pod = {
        let mut p = pending();
        let spec: crate::model::AffinityShape = serde_json::from_value(serde_json::json!({
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}
            ]}}
        }))
        .expect("affinity");
        p.spec.affinity = Some(Box::new(spec));
        p
    };
    for p in [&by_selector, &by_affinity] {
        let e = build_with_nodes(
            p,
            &facts(Some(&c), vec![]),
            std::slice::from_ref(&holder),
            &[],
            nodes,
        );
        let all = e.blocked.join("\n");
        assert!(all.contains("does not let it run"), "{all}");
        assert!(!e.next.contains("runs on n1"), "{}", e.next);
        assert!(e.next.contains("waits until db-0 ends"), "{}", e.next);
    }
    // Constraints the node meets: the old advice.
    let mut fits = pending();
    fits.spec.node_selector = Some(Box::new(
        [("disk".to_string(), "hdd".to_string())]
            .into_iter()
            .collect(),
    ));
    let e = build_with_nodes(
        &fits,
        &facts(Some(&c), vec![]),
        std::slice::from_ref(&holder),
        &[],
        nodes,
    );
    assert!(
        e.next.contains("it runs on n1 if it fits there"),
        "{}",
        e.next
    );
    // The node's labels not read: the advice is conditional on them.
    let e = build_with_nodes(
        &by_selector,
        &facts(Some(&c), vec![]),
        std::slice::from_ref(&holder),
        &[],
        &[],
    );
    assert!(
        e.next
            .contains("if its nodeSelector and node affinity allow that node"),
        "{}",
        e.next
    );
}

/// A lock written for a bind whose pod is gone (nobody on its node) no longer holds for the
/// webhook, and the controller leaves it for 10 minutes: explain calls it no block, and says so
/// (found by an adversary review).
#[test]
fn a_binds_lock_whose_pod_is_gone_is_not_a_block() {
    use crate::rules::rwo_lock::{RWO_LOCK, RwoLock, Via};
    let gone = testing::pod("shop", "db-0").on(Some("n1")).mounting("data");
    let lock = RwoLock::new(&gone, "n1", Via::Bind, jiff::Timestamp::UNIX_EPOCH);
    let mut c = claim(true);
    c.metadata.annotations = Some([(RWO_LOCK.to_string(), lock.encode())].into());
    let pending = testing::pod("shop", "db-1")
        .in_phase("Pending")
        .mounting("data");
    // db-0 is deleted: no other pod is passed.
    let e = build(&pending, &facts(Some(&c), vec![]), &[], &[]);
    assert!(
        e.blocked.is_empty(),
        "a stale lock reported as a block: {:?}",
        e.blocked
    );
    assert!(
        e.next.contains("takes the lock over"),
        "the stale lock is not explained: {}",
        e.next
    );
    // Its pod still there, unbound (its bind may land): the lock holds.
    let waiting = testing::pod("shop", "db-0")
        .in_phase("Pending")
        .mounting("data");
    let e = build(&pending, &facts(Some(&c), vec![]), &[waiting], &[]);
    assert!(
        !e.blocked.is_empty(),
        "a lock whose bind may land is no block"
    );
}
