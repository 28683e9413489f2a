//! Unit tests of `src/rules/release.rs`.

use super::*;
use crate::model::{Volume, testing};
use std::time::Duration;

fn pvc(terminating: bool, fins: Option<Vec<&str>>) -> Pvc {
    let mut p = testing::pvc("ns", "data");
    p.metadata.resource_version = Some("7".into());
    if terminating {
        p.metadata.deletion_timestamp = Some("t".into());
    }
    p.metadata.finalizers = fins.map(|f| f.into_iter().map(Into::into).collect());
    p
}

fn pod(name: &str, node: Option<&str>, phase: &str) -> Pod {
    testing::pod("ns", name)
        .with_uid(&format!("uid-{name}"))
        .on(node)
        .in_phase(phase)
        .mounting("data")
}

fn plan(p: &Pvc, pods: &[Pod]) -> PvcPlan {
    pvc_plan(p, pods)
}

#[test]
fn upstream_table() {
    let t = pvc(true, Some(vec![PVC_FINALIZER]));
    // A scheduled Pending pod blocks; a Failed pod still blocks; an unscheduled pod does not.
    assert!(matches!(
        plan(&t, &[pod("a", Some("n"), "Pending")]),
        PvcPlan::Blocked(_)
    ));
    assert!(matches!(
        plan(&t, &[pod("a", Some("n"), "Failed")]),
        PvcPlan::Blocked(_)
    ));
    assert_eq!(
        plan(&t, &[pod("a", None, "Pending")]),
        PvcPlan::ConfirmUnused
    );
    assert_eq!(plan(&t, &[]), PvcPlan::ConfirmUnused);
    // Unrelated and emptyDir volumes do not count.
    let mut other = testing::pod("ns", "b")
        .on(Some("n"))
        .in_phase("Running")
        .mounting("other");
    other.spec.volumes.push(Volume {
        name: "tmp".into(),
        ..Default::default()
    });
    assert_eq!(plan(&t, &[other]), PvcPlan::ConfirmUnused);
    // Live PVC without the finalizer gets it; terminating without it is left alone.
    assert_eq!(plan(&pvc(false, None), &[]), PvcPlan::AddFinalizer);
    assert_eq!(
        plan(&pvc(false, Some(vec![PVC_FINALIZER])), &[]),
        PvcPlan::Keep
    );
    assert_eq!(plan(&pvc(true, Some(vec!["x"])), &[]), PvcPlan::Keep);
}

#[test]
fn postponed_message_names_pods_phase_node_and_terminal_hint() {
    let t = pvc(true, Some(vec![PVC_FINALIZER]));
    let b = blockers(
        &t,
        &[
            pod("web", Some("n1"), "Running"),
            pod("job", Some("n2"), "Succeeded"),
        ],
    );
    let m = postponed_message(&t, &b);
    assert!(m.contains("web (Running on node n1)"), "{m}");
    assert!(
        m.contains("job (Succeeded on node n2; it has finished: delete pod job to release it)"),
        "{m}"
    );
}

#[test]
fn removal_patch_tests_whole_list_and_conflicts_fail() {
    let meta = pvc(true, Some(vec!["a/b", PVC_FINALIZER])).metadata;
    let patch = finalizer_removal_patch(&meta, PVC_FINALIZER).expect("patch");
    let mut doc = serde_json::json!({"metadata": {"finalizers": ["a/b", PVC_FINALIZER]}});
    json_patch::patch(&mut doc, &patch).expect("applies");
    assert_eq!(doc["metadata"]["finalizers"], serde_json::json!(["a/b"]));
    // Someone else already changed the list: the test fails, nothing is clobbered.
    let mut changed = serde_json::json!({"metadata": {"finalizers": [PVC_FINALIZER]}});
    assert!(json_patch::patch(&mut changed, &patch).is_err());
    assert_eq!(
        changed["metadata"]["finalizers"],
        serde_json::json!([PVC_FINALIZER])
    );
    assert!(finalizer_removal_patch(&pvc(true, None).metadata, PVC_FINALIZER).is_none());
}

#[test]
fn add_patch_guards_resource_version() {
    let meta = pvc(false, None).metadata;
    let patch = finalizer_add_patch(&meta, PVC_FINALIZER).expect("patch");
    let mut doc = serde_json::json!({"metadata": {"resourceVersion": "7"}});
    json_patch::patch(&mut doc, &patch).expect("applies");
    assert_eq!(
        doc["metadata"]["finalizers"],
        serde_json::json!([PVC_FINALIZER])
    );
    let mut newer = serde_json::json!({"metadata": {"resourceVersion": "8"}});
    assert!(json_patch::patch(&mut newer, &patch).is_err());
}

#[test]
fn pv_plans() {
    let mut pv = Pv::default();
    assert_eq!(pv_plan(&pv, Fact::Missing), PvPlan::AddFinalizer);
    pv.metadata.finalizers = Some(vec![PV_FINALIZER.into()]);
    assert_eq!(pv_plan(&pv, Fact::Missing), PvPlan::Keep);
    pv.metadata.deletion_timestamp = Some("t".into());
    pv.status.phase = Some("Bound".into());
    assert_eq!(pv_plan(&pv, Fact::Missing), PvPlan::Keep);
    pv.status.phase = Some("Released".into());
    assert_eq!(pv_plan(&pv, Fact::Missing), PvPlan::Release);
}

#[test]
fn unused_since_transitions() {
    let mut c = pvc(false, Some(vec![PVC_FINALIZER]));
    assert_eq!(
        unused_since(&c, &[] as &[Pod], Duration::ZERO),
        UnusedSince::Keep,
        "not Bound"
    );
    c.status.phase = Some("Bound".into());
    assert_eq!(
        unused_since(&c, &[] as &[Pod], Duration::ZERO),
        UnusedSince::Set { ended: None }
    );
    assert_eq!(
        unused_since(&c, &[pod("a", None, "Pending")], Duration::ZERO),
        UnusedSince::Keep,
        "pending pod uses it"
    );
    c.metadata.annotations =
        Some([(UNUSED_SINCE.to_string(), "2026-01-01T00:00:00Z".to_string())].into());
    assert_eq!(
        unused_since(&c, &[pod("a", Some("n"), "Running")], Duration::ZERO),
        UnusedSince::Clear
    );
    // A terminal pod that ended before the mark leaves it; one that ended after moves it forward
    // (the reported time may be later than the truth, never earlier).
    let finished = |t: &str| {
        let mut p = pod("a", Some("n"), "Succeeded");
        p.status.finished_at = Some(t.into());
        p
    };
    assert_eq!(
        unused_since(&c, &[finished("2025-12-31T00:00:00Z")], Duration::ZERO),
        UnusedSince::Keep
    );
    assert_eq!(
        unused_since(&c, &[pod("a", Some("n"), "Succeeded")], Duration::ZERO),
        UnusedSince::Keep,
        "no recorded end"
    );
    assert_eq!(
        unused_since(&c, &[finished("2026-03-01T10:00:00Z")], Duration::ZERO),
        UnusedSince::MoveTo("2026-03-01T10:00:00Z".parse().unwrap())
    );
    // The latest of several ends wins.
    assert_eq!(
        unused_since(
            &c,
            &[
                finished("2026-03-01T10:00:00Z"),
                finished("2026-04-01T10:00:00Z")
            ],
            Duration::ZERO
        ),
        UnusedSince::MoveTo("2026-04-01T10:00:00Z".parse().unwrap())
    );
    c.metadata.annotations = None;
    assert_eq!(
        unused_since(&c, &[finished("2026-03-01T10:00:00Z")], Duration::ZERO),
        UnusedSince::Set {
            ended: Some("2026-03-01T10:00:00Z".parse().unwrap())
        }
    );
    c.metadata.annotations = Some([(UNUSED_SINCE.to_string(), "yesterday".to_string())].into());
    assert_eq!(
        unused_since(&c, &[] as &[Pod], Duration::ZERO),
        UnusedSince::Set { ended: None },
        "a mark that is not a time is replaced"
    );
    c.metadata.deletion_timestamp = Some("t".into());
    assert_eq!(
        unused_since(&c, &[pod("a", Some("n"), "Running")], Duration::ZERO),
        UnusedSince::Keep,
        "terminating"
    );
}

#[test]
fn unused_since_never_predates_the_claim() {
    // A claim restored from a backup: created today, carrying a mark from years ago.
    let mut c = pvc(false, Some(vec![PVC_FINALIZER]));
    c.status.phase = Some("Bound".into());
    c.metadata.creation_timestamp = "2026-11-23T09:00:00Z".parse().ok();
    c.metadata.annotations =
        Some([(UNUSED_SINCE.to_string(), "2023-12-31T00:00:00Z".to_string())].into());
    assert_eq!(
        unused_since(&c, &[] as &[Pod], Duration::ZERO),
        UnusedSince::MoveTo("2026-11-23T09:00:00Z".parse().unwrap())
    );
    // A pod that ended after the creation still wins.
    let mut done = pod("a", Some("n"), "Succeeded");
    done.status.finished_at = Some("2026-11-23T10:00:00Z".into());
    assert_eq!(
        unused_since(&c, &[done], Duration::ZERO),
        UnusedSince::MoveTo("2026-11-23T10:00:00Z".parse().unwrap())
    );
    // A mark at or after the creation stays.
    c.metadata.annotations =
        Some([(UNUSED_SINCE.to_string(), "2026-11-23T09:30:00Z".to_string())].into());
    assert_eq!(
        unused_since(&c, &[] as &[Pod], Duration::ZERO),
        UnusedSince::Keep
    );
}

#[test]
fn requeue_on_relevant_pod_changes_only() {
    let a = pod("a", Some("n"), "Running");
    assert_eq!(
        claims_to_requeue(None, Some(&a)),
        vec![("ns".to_string(), "data".to_string())]
    );
    assert_eq!(claims_to_requeue(Some(&a), None).len(), 1);
    let mut b = a.clone();
    b.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    assert!(
        claims_to_requeue(Some(&a), Some(&b)).is_empty(),
        "label change is irrelevant"
    );
    b.status.phase = Some("Succeeded".into());
    assert_eq!(
        claims_to_requeue(Some(&a), Some(&b)).len(),
        1,
        "became terminal"
    );
    // Delete+recreate with the same name and a different claim: both claims re-examined.
    let c = testing::pod("ns", "a")
        .with_uid("uid-new")
        .on(Some("n"))
        .in_phase("Running")
        .mounting("other");
    assert_eq!(claims_to_requeue(Some(&a), Some(&c)).len(), 2);
}

#[test]
fn removal_patch_tests_uid_then_list() {
    let mut c = pvc(true, Some(vec!["a", PVC_FINALIZER]));
    c.metadata.uid = "uid-1".into();
    let p =
        serde_json::to_value(finalizer_removal_patch(&c.metadata, PVC_FINALIZER).unwrap()).unwrap();
    assert_eq!(
        p,
        serde_json::json!([
            {"op": "test", "path": "/metadata/uid", "value": "uid-1"},
            {"op": "test", "path": "/metadata/finalizers", "value": ["a", PVC_FINALIZER]},
            {"op": "replace", "path": "/metadata/finalizers", "value": ["a"]},
        ])
    );
    // The patch fails on a recreated object with the same name and finalizers (new UID).
    let mut recreated =
        serde_json::json!({"metadata": {"uid": "uid-2", "finalizers": ["a", PVC_FINALIZER]}});
    let patch: json_patch::Patch = serde_json::from_value(p).unwrap();
    assert!(json_patch::patch(&mut recreated, &patch).is_err());
    assert_eq!(recreated["metadata"]["finalizers"][1], PVC_FINALIZER);
}

#[test]
fn a_claim_is_marked_unused_only_once_seen_so_for_its_grace() {
    let mut c = pvc(false, Some(vec![PVC_FINALIZER]));
    c.status.phase = Some("Bound".into());
    let none: &[Pod] = &[];
    assert_eq!(
        unused_since(&c, none, Duration::from_secs(120)),
        UnusedSince::Wait(Duration::from_secs(120)),
        "first seen unused: no write yet"
    );
    assert_eq!(
        unused_since(&c, none, Duration::from_secs(20)),
        UnusedSince::Wait(Duration::from_secs(20))
    );
    assert_eq!(
        unused_since(&c, none, Duration::ZERO),
        UnusedSince::Set { ended: None }
    );
    assert!(unmarked_and_unused(&c, none), "the grace's clock runs");
    // A mark already written is kept or moved as before, whatever this process's clock says.
    c.metadata.annotations =
        Some([(UNUSED_SINCE.to_string(), "2026-01-01T00:00:00Z".to_string())].into());
    assert_eq!(
        unused_since(&c, none, Duration::from_secs(120)),
        UnusedSince::Keep
    );
    assert!(!unmarked_and_unused(&c, none), "marked: no clock");
    // In use: nothing to wait for.
    c.metadata.annotations = None;
    assert_eq!(
        unused_since(
            &c,
            &[pod("a", Some("n"), "Running")],
            Duration::from_secs(120)
        ),
        UnusedSince::Keep
    );
}
