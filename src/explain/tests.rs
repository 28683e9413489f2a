//! Unit tests of `src/explain/mod.rs`: every case of rules.md §6 over plain objects.

use super::*;
use crate::model::{ClaimRef, UNUSED_SINCE, testing};

fn pvc(terminating: bool, finalizers: &[&str]) -> Pvc {
    let mut p = testing::pvc("shop", "data");
    p.spec.volume_name = Some("pv-1".into());
    p.status.phase = Some("Bound".into());
    p.metadata.set_finalizers(finalizers);
    if terminating {
        p.metadata.deleted_at("2026-11-01T00:00:00Z");
    }
    p
}

fn pod(name: &str, node: Option<&str>, phase: &str) -> Pod {
    testing::pod("shop", name)
        .on(node)
        .in_phase(phase)
        .mounting("data")
}

fn pv(terminating: bool, bound: bool, finalizers: &[&str]) -> Pv {
    let mut v = Pv::default();
    v.metadata.name = "pv-1".into();
    v.metadata.set_finalizers(finalizers);
    if terminating {
        v.metadata.deleted_at("2026-11-01T00:00:00Z");
    }
    v.status.phase = Some(if bound { "Bound" } else { "Released" }.into());
    v.spec.claim_ref = Some(ClaimRef {
        namespace: "shop".into(),
        name: "data".into(),
        uid: None,
    });
    v
}

#[test]
fn terminating_claim_names_blockers_and_what_to_do() {
    let c = pvc(true, &[PVC_FINALIZER]);
    let pods = [
        pod("web-0", Some("n1"), "Running"),
        pod("job-1", Some("n2"), "Succeeded"),
        pod("pending", None, "Pending"),
    ];
    let e = build_pvc(&c, None, &pods, &[], &[]);
    assert_eq!(e.deleting_since.as_deref(), Some("2026-11-01T00:00:00Z"));
    assert_eq!(
        e.blocking_pods
            .iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>(),
        vec!["web-0", "job-1"],
        "unscheduled pods never block"
    );
    assert!(
        e.next
            .contains("delete finished pod(s) job-1 (kubectl delete pod -n shop job-1)"),
        "{}",
        e.next
    );
    assert!(e.next.contains("stop pod(s) web-0"), "{}", e.next);
    assert!(
        e.next
            .contains("Do not remove kubernetes.io/pvc-protection by hand"),
        "{}",
        e.next
    );
    let b = e.bound_to.as_ref().expect("bound");
    assert_eq!((b.name.as_str(), b.state), ("pv-1", BoundState::NotFound));
    assert_eq!(b.to_string(), "pv-1 (not found)");
    // In JSON, data and no prose.
    assert_eq!(
        serde_json::to_value(b).expect("json"),
        serde_json::json!({"name": "pv-1", "state": "notFound"})
    );
    assert!(e.finalizers[0].owner.contains("volguard controller"));
    let t = table(&e);
    assert!(
        t.contains("used by:\n    web-0 (Running on node n1)\n"),
        "{t}"
    );
    assert!(
        t.contains("finished pods still naming it (they hold a deletion):\n    job-1 (Succeeded on node n2): delete pod job-1 to release it\n"),
        "{t}"
    );
}

/// Finished pods only: unused, in `report unused`'s sense, and said in its words.
#[test]
fn claim_named_only_by_finished_pods_is_unused_in_reports_words() {
    let mut claim = pvc(false, &[PVC_FINALIZER]);
    claim.metadata.annotations =
        Some([(UNUSED_SINCE.to_string(), "2026-11-02T00:00:00Z".to_string())].into());
    let done = pod("report-7", Some("n2"), "Succeeded");
    let e = build_pvc(&claim, None, &[done], &[], &[]);
    assert!(
        e.next.starts_with("unused since 2026-11-02T00:00:00Z (no running pod); finished pod(s) report-7 still name it"),
        "{}",
        e.next
    );
    let t = table(&e);
    assert!(t.contains("used by:\n    (no running pod)\n"), "{t}");
    assert!(
        t.contains("unused since: 2026-11-02T00:00:00Z (volguard.io/unused-since)"),
        "{t}"
    );
}

#[test]
fn terminating_claim_without_users_or_with_foreign_finalizers() {
    let e = build_pvc(&pvc(true, &[PVC_FINALIZER]), None, &[], &[], &[]);
    assert!(e.next.contains("removed within seconds"), "{}", e.next);
    let e = build_pvc(&pvc(true, &["example.com/backup"]), None, &[], &[], &[]);
    assert!(
        e.next.starts_with("waiting for example.com/backup: other"),
        "{}",
        e.next
    );
    let e = build_pvc(&pvc(true, &[]), None, &[], &[], &[]);
    assert!(e.next.contains("disappears at once"));
}

#[test]
fn live_claim_in_use_or_unused() {
    let mut c = pvc(false, &[PVC_FINALIZER]);
    let e = build_pvc(&c, None, &[pod("web-0", Some("n1"), "Running")], &[], &[]);
    assert!(e.next.starts_with("in use by pod(s) web-0"), "{}", e.next);
    c.metadata.annotations =
        Some([(UNUSED_SINCE.to_string(), "2026-10-01T00:00:00Z".to_string())].into());
    let e = build_pvc(&c, None, &[], &[], &[]);
    assert_eq!(e.unused_since.as_deref(), Some("2026-10-01T00:00:00Z"));
    assert_eq!(e.unused_since_source, SinceSource::Annotation);
    assert!(
        e.next
            .contains("not used by any pod since 2026-10-01T00:00:00Z"),
        "{}",
        e.next
    );
    assert!(table(&e).contains("(volguard.io/unused-since)"));
}

#[test]
fn volume_bound_attached_or_waiting_for_a_driver() {
    let claim = pvc(false, &[PVC_FINALIZER]);
    let e = build_pv(&pv(true, true, &[PV_FINALIZER]), Some(&claim), &[]);
    assert!(
        e.next
            .contains("delete the claim first (volguard explain pvc data -n shop)"),
        "{}",
        e.next
    );
    let e = build_pv(&pv(true, true, &[PV_FINALIZER]), None, &[]);
    assert!(e.next.contains("no longer exists"), "{}", e.next);
    let va = Attachment {
        name: "csi-123".into(),
        node: "n1".into(),
        attached: true,
        terminating: false,
    };
    let attacher = "external-attacher/ebs-csi-aws-com";
    let e = build_pv(
        &pv(true, false, &[attacher]),
        None,
        std::slice::from_ref(&va),
    );
    assert!(
        e.next
            .contains("still attached to node n1 (VolumeAttachment csi-123)"),
        "{}",
        e.next
    );
    assert!(
        e.finalizers[0]
            .owner
            .contains("external-attacher of driver ebs.csi.aws.com")
    );
    let e = build_pv(&pv(true, false, &[attacher]), None, &[]);
    assert!(
        e.next
            .starts_with("waiting for external-attacher/ebs-csi-aws-com"),
        "{}",
        e.next
    );
    let e = build_pv(&pv(false, true, &[PV_FINALIZER]), None, &[]);
    assert!(e.next.starts_with("Bound to shop/data"), "{}", e.next);
    assert!(table(&e).contains("volume attachments:\n    (none)"));
}

#[test]
fn finalizer_owners() {
    assert!(
        finalizer_owner("external-provisioner.volume.kubernetes.io/finalizer")
            .contains("external-provisioner")
    );
    assert!(
        finalizer_owner("snapshot.storage.kubernetes.io/pvc-as-source-protection")
            .contains("snapshot")
    );
    assert!(finalizer_owner("foo.csi.example.com/x").contains("CSI driver"));
    assert!(finalizer_owner("x/y").starts_with("other"));
}

#[test]
fn a_pod_on_a_partitioned_node_names_its_incident() {
    use crate::model::fence::{NodeFence, NodeFenceSpec, Phase};
    let c = pvc(true, &[PVC_FINALIZER]);
    let mut f = NodeFence {
        spec: NodeFenceSpec {
            node: "n1".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    f.metadata.name = "n1-1795458593".into();
    f.status.phase = Phase::Fencing;
    f.status.message = Some("waiting for a person".into());
    let mut done = f.clone();
    done.metadata.name = "n1-1".into();
    done.status.phase = Phase::Done;
    let pods = [pod("web-0", Some("n1"), "Running")];
    let e = build_pvc(&c, None, &pods, &[], &[done, f]);
    assert_eq!(e.partitions.len(), 1);
    assert_eq!(e.partitions[0].incident, "n1-1795458593");
    assert!(
        e.next.starts_with(
            "pod web-0 waits on partitioned node n1: fencing incident n1-1795458593 (Fencing)"
        ),
        "{}",
        e.next
    );
    assert!(table(&e).contains("partition:    pod web-0 waits on node n1: incident n1-1795458593 (Fencing): waiting for a person"));
    // Another node's incident says nothing about this claim.
    let e = build_pvc(
        &c,
        None,
        &[pod("web-0", Some("n2"), "Running")],
        &[],
        &[e_fence("n1")],
    );
    assert!(e.partitions.is_empty());
}

fn e_fence(node: &str) -> crate::model::fence::NodeFence {
    let mut f = crate::model::fence::NodeFence::default();
    f.spec.node = node.into();
    f.metadata.name = format!("{node}-1");
    f.status.phase = crate::model::fence::Phase::Fencing;
    f
}

mod node {
    use crate::explain::node::{Facts, build, table};
    use crate::model::fence::{NodeFence, NodeFenceSpec, Phase, Release};
    use crate::model::testing;

    fn incident(phase: Phase, release: bool) -> NodeFence {
        let mut f = NodeFence {
            spec: NodeFenceSpec {
                node: "n1".into(),
                release: release.then(|| Release {
                    by: "alice".into(),
                    proof: "confirmed".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        f.metadata.name = "n1-1".into();
        f.status.phase = phase;
        f.status.message = Some("the message".into());
        f
    }
    fn pods() -> Vec<crate::model::Pod> {
        vec![
            testing::pod("shop", "db-0")
                .on(Some("n1"))
                .in_phase("Running")
                .mounting("data-db-0"),
        ]
    }
    fn facts<'a>(
        node: Option<&'a crate::model::Node>,
        fences: &'a [NodeFence],
        pods: &'a [crate::model::Pod],
        alive: Option<&str>,
    ) -> Facts<'a> {
        Facts {
            name: "n1",
            node,
            lease_renewed: None,
            alive: alive.map(str::to_string),
            fences,
            pods,
        }
    }

    #[test]
    fn a_deleted_node_with_and_without_a_record() {
        let p = pods();
        let rec = [incident(Phase::Detected, true)];
        let e = build(&facts(None, &rec, &p, None));
        assert!(!e.exists);
        assert!(
            e.next.contains("release recorded in nodefence n1-1"),
            "{}",
            e.next
        );
        assert_eq!(e.incidents[0].phase, "Recorded");
        let e = build(&facts(None, &[], &p, None));
        assert!(
            e.next.contains("nothing records")
                && e.next.contains("kubectl volguard fence confirm n1"),
            "{}",
            e.next
        );
        let t = table(&e);
        assert!(
            t.contains("exists:       no (deleted)")
                && t.contains("shop/db-0 (Running): data-db-0"),
            "{t}"
        );
    }

    #[test]
    fn an_incident_says_what_holds_the_node() {
        let n = testing::node("n1");
        let p = pods();
        for (phase, want) in [
            (Phase::Fencing, "is fencing it"),
            (Phase::Released, "repair the machine"),
            (Phase::Recovering, "holds the taint: the message"),
        ] {
            let f = [incident(phase, false)];
            let e = build(&facts(Some(&n), &f, &p, None));
            assert!(e.next.contains(want), "{phase:?}: {}", e.next);
        }
        let mut held = incident(Phase::Fenced, false);
        held.status.uncovered = vec!["nfs volumes".into()];
        let e = build(&facts(Some(&n), &[held], &p, None));
        assert!(e.next.contains("holds: the message"), "{}", e.next);
        let e = build(&facts(
            Some(&n),
            &[incident(Phase::Failed, false)],
            &p,
            None,
        ));
        assert!(
            e.next.contains("failed") && e.next.contains("kubectl delete nodefence n1-1"),
            "{}",
            e.next
        );
    }

    #[test]
    fn a_healthy_node_says_so_and_a_taint_names_its_proof() {
        let n = testing::node("n1");
        let p = pods();
        let e = build(&facts(Some(&n), &[], &p, Some("it reports Ready")));
        assert_eq!(e.next, "healthy (it reports Ready): nothing to do");
        let mut t = testing::node("n1").out_of_service();
        t.metadata.annotations = Some(
            [
                (
                    crate::rules::proof::Key::ConfirmNodeDown
                        .annotation()
                        .to_string(),
                    "true".to_string(),
                ),
                (
                    crate::rules::proof::CONFIRMED_BY.to_string(),
                    "alice".to_string(),
                ),
            ]
            .into(),
        );
        let e = build(&facts(Some(&t), &[], &p, None));
        assert_eq!(
            e.tainted_on.as_deref(),
            Some("a person's confirmation (alice)")
        );
        assert!(e.next.starts_with("out of service"), "{}", e.next);
    }
}

mod pod {
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
}
