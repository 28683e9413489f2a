//! Unit tests of `src/explain/mod.rs` and `claim.rs`: every case of rules.md §6 over claims and volumes (nodes and pods: `node_tests.rs`, `pod_tests.rs`).

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
