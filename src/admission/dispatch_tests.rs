//! Unit tests of `src/admission/dispatch.rs`: routing by path, and bounded unknown kinds.

use super::*;
use crate::rules::force_delete::ForceDeletePolicy;
use crate::rules::rule::On;
use crate::state::{Store, View};
use std::sync::Arc;

fn admission() -> Admission {
    Admission::new(
        View::file(Arc::new(Store::default())),
        ForceDeletePolicy::default(),
        vec![],
    )
}

fn review(group: &str, kind: &str, op: &str) -> String {
    serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": group, "version": "v1", "kind": kind}, "operation": op,
        "userInfo": {"username": "alice"}, "object": {"metadata": {"name": "x", "namespace": "ns"}}}})
    .to_string()
}

#[tokio::test]
async fn unknown_kinds_are_bounded_in_logs_and_labels() {
    let a = admission();
    for i in 0..(MAX_UNKNOWN_KINDS + 8) {
        let body = review("example.com", &format!("Kind{i}"), "CREATE");
        let req = crate::admission::decode(body.as_bytes()).expect("review");
        let v = a
            .decide(Endpoint::Validate, &req, Duration::from_secs(1))
            .await;
        assert!(v.unknown_kind && v.decision.allowed && v.rule.is_none());
        let label = a.unknown_kind_label(&req);
        if i < MAX_UNKNOWN_KINDS {
            assert_eq!(label, format!("Kind{i}"));
        } else {
            assert_eq!(label, "other", "kind {i} past the bound");
        }
    }
}

#[tokio::test]
async fn a_rule_path_judges_only_its_rule() {
    let a = admission();
    let body = review("", "PersistentVolumeClaim", "CREATE");
    let req = crate::admission::decode(body.as_bytes()).expect("review");
    // The mutating rule on its own path patches; the force-delete path is not its business.
    let v = a
        .decide(
            Endpoint::Rule(Rule::PvcFinalizer),
            &req,
            Duration::from_secs(1),
        )
        .await;
    assert_eq!(v.rule, Some(Rule::PvcFinalizer));
    assert!(v.decision.patch.is_some());
    let v = a
        .decide(
            Endpoint::Rule(Rule::ForceDelete),
            &req,
            Duration::from_secs(1),
        )
        .await;
    assert_eq!((v.rule, v.decision.row), (None, "not-this-rule"));
    // /validate runs the validating rules of a PVC CREATE, never the mutating one.
    let v = a
        .decide(Endpoint::Validate, &req, Duration::from_secs(1))
        .await;
    assert_eq!(v.rule, Some(Rule::BindingToTerminatingVolume));
    assert!(v.decision.patch.is_none());
}

/// Every review moves the decision's future (into axum's box, through the timeouts), and a rule's
/// future is as large as the largest rule's: one inline live write (the RWO lock's PATCH, ~2.5 KB)
/// made every pod review touch 60% more cache lines. Rules that write or read live box that part.
#[test]
fn a_decision_future_stays_small_whatever_the_rule() {
    let a = admission();
    let body = review("", "Pod", "CREATE");
    let req = crate::admission::decode(body.as_bytes()).expect("review");
    let judge = std::mem::size_of_val(&crate::admission::facts::judge(
        &a,
        Rule::PodOnTerminatingClaim,
        On::PodCreate,
        &req,
        soon(),
    ));
    let decide = std::mem::size_of_val(&a.decide(Endpoint::Validate, &req, Duration::from_secs(1)));
    assert!(
        judge <= 1024,
        "a rule's future is {judge} bytes (at most 1 KiB)"
    );
    assert!(
        decide <= 1536,
        "the decision's future is {decide} bytes (at most 1.5 KiB)"
    );
}

/// Routing never hands a rule a request its row does not name; should it ever, a Fail rule
/// refuses (500) and an Ignore rule allows with a warning, as if volguard were down.
#[tokio::test]
async fn a_rule_asked_outside_its_row_answers_by_its_failure_policy() {
    let a = admission();
    let body = review("", "PersistentVolumeClaim", "CREATE");
    let req = crate::admission::decode(body.as_bytes()).expect("review");
    let target = target(&req);
    assert!(!target.rules().contains(&Rule::ForceDelete));
    let d =
        crate::admission::facts::judge(&a, Rule::ForceDelete, On::PvcCreate, &req, soon()).await;
    let d = d.expect_err("answered before the rule ran");
    assert_eq!((d.allowed, d.code, d.row), (false, 500, "unrouted"));
    let message = d.message.unwrap_or_default();
    assert!(message.contains("force-delete"), "{message}");
    assert!(!target.rules().contains(&Rule::PodStatus));
    let d = crate::admission::facts::judge(&a, Rule::PodStatus, On::PvcCreate, &req, soon()).await;
    let d = d.expect_err("answered before the rule ran");
    assert_eq!((d.allowed, d.row), (true, "unrouted"));
    assert!(d.warnings[0].contains("pod-status"), "{:?}", d.warnings);
}

/// `judge` routes by the rule table's `on` column and nothing else: every (rule, request) pair
/// of the table reaches its facts function, every other pair is "unrouted".
#[tokio::test]
async fn judge_s_arms_are_the_table_s_on_column() {
    use crate::rules::rule::TABLE;
    let a = admission();
    let body = review("", "Pod", "CREATE");
    let req = crate::admission::decode(body.as_bytes()).expect("review");
    for d in TABLE.iter() {
        for on in On::ALL {
            let row = match crate::admission::facts::judge(&a, d.rule, on, &req, soon()).await {
                Ok(x) | Err(x) => x.row,
            };
            assert_eq!(
                row == "unrouted",
                !d.on.contains(&on),
                "{} for {on:?}: row {row}",
                d.name
            );
        }
    }
}

/// The default budget from now (a rule judged directly, outside a decision).
fn soon() -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_millis(2500)
}

/// A binding that names no pod UID (the legacy `bindings` resource, a hand-made one) binds
/// whichever pod holds the name when it lands: its lock names no UID and is written as a create's
/// (a pod of that name missing proves nothing until the grace has passed); the scheduler's, naming
/// the UID, writes a bind's lock for that UID (found by an adversary review).
#[tokio::test]
async fn a_binding_without_a_uid_writes_a_lock_naming_no_uid() {
    use crate::rules::rwo_lock::{RWO_LOCK, RwoLock, Via};
    for (uid, via, named) in [("", Via::Create, ""), ("u-1", Via::Bind, "u-1")] {
        let store = Arc::new(Store::default());
        let mut pvc = crate::model::testing::pvc("ns", "data").with_modes(&["ReadWriteOnce"]);
        pvc.spec.volume_name = Some("pv-1".into());
        pvc.status.phase = Some("Bound".into());
        store.pvcs.apply(pvc);
        let pod = crate::model::testing::pod("ns", "db-0")
            .with_uid("u-1")
            .mounting("data");
        store.claims.add(&pod);
        store.pods.apply(pod);
        store.nodes.apply(crate::model::testing::node("n1"));
        let a = Admission::new(
            View::file(store.clone()),
            ForceDeletePolicy::default(),
            vec![],
        );
        let body = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "r", "kind": {"group": "", "version": "v1", "kind": "Binding"},
                "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "binding",
                "name": "db-0", "namespace": "ns", "operation": "CREATE",
                "userInfo": {"username": "system:kube-scheduler"},
                "object": {"apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": "db-0", "namespace": "ns", "uid": uid},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}}})
        .to_string();
        let req = crate::admission::decode(body.as_bytes()).expect("review");
        let v = a
            .decide(Endpoint::Validate, &req, Duration::from_secs(2))
            .await;
        assert!(v.decision.allowed, "uid {uid:?}: {:?}", v.decision);
        let stored = store.pvcs.get("ns", "data").expect("claim");
        let lock = stored
            .metadata
            .annotation(RWO_LOCK)
            .and_then(RwoLock::parse)
            .expect("a lock written");
        assert_eq!(
            (lock.via, &*lock.uid, lock.node.as_str()),
            (Some(via), named, "n1"),
            "uid {uid:?}"
        );
    }
}
