//! Unit tests of `src/rules/finalizer_guard.rs`.

use super::*;
use crate::model::testing;

fn meta(fins: Option<Vec<&str>>) -> Meta {
    Meta {
        finalizers: fins.map(|f| f.into_iter().map(Into::into).collect()),
        ..Default::default()
    }
}

#[test]
fn strip_detection_null_empty_and_partial() {
    let old = meta(Some(vec![PVC_FINALIZER, "x"]));
    assert!(strips(&old, &meta(None), PVC_FINALIZER), "finalizers: null");
    assert!(strips(&old, &meta(Some(vec![])), PVC_FINALIZER));
    assert!(strips(&old, &meta(Some(vec!["x"])), PVC_FINALIZER));
    assert!(!strips(
        &old,
        &meta(Some(vec![PVC_FINALIZER])),
        PVC_FINALIZER
    ));
    assert!(!strips(&meta(None), &meta(None), PVC_FINALIZER));
}

#[test]
fn exemptions() {
    let m = meta(None);
    let own = vec!["system:serviceaccount:volguard-system:volguard-controller".to_string()];
    let user = |n: &str| UserInfo {
        username: n.into(),
        ..Default::default()
    };
    assert!(exempt(&user(&own[0]), &own, &m, &m).is_some());
    for u in UPSTREAM_CONTROLLERS {
        assert!(exempt(&user(u), &own, &m, &m).is_some(), "{u}");
    }
    assert!(exempt(&user("alice"), &own, &m, &m).is_none());
    let mut glass = meta(None);
    glass.annotations = Some([(ALLOW_FINALIZER_REMOVAL.to_string(), "true".to_string())].into());
    assert!(exempt(&user("alice"), &own, &m, &glass).is_some());
    assert!(exempt(&user("alice"), &own, &glass, &m).is_some());
    glass.annotations = Some([(ALLOW_FINALIZER_REMOVAL.to_string(), "yes".to_string())].into());
    assert!(
        exempt(&user("alice"), &own, &m, &glass).is_none(),
        "only \"true\""
    );
}

fn using_pod(node: Option<&str>) -> Pod {
    testing::pod("ns", "app")
        .on(node)
        .in_phase("Running")
        .mounting("data")
}

#[test]
fn pvc_in_use_denied_listing_pods() {
    let pvc = testing::pvc("ns", "data");
    let pods = vec![using_pod(Some("n1"))];
    let d = pvc_finalizer_removal(&pvc, Fact::Found(&pods));
    assert!(!d.allowed);
    assert!(
        d.message
            .is_some_and(|m| m.contains("app (phase Running, node n1)"))
    );
    let pods = vec![using_pod(None)];
    assert!(pvc_finalizer_removal(&pvc, Fact::Found(&pods)).allowed);
    let d = pvc_finalizer_removal(
        &pvc,
        Fact::Unknown(crate::rules::decision::ReadError::Timeout {
            what: "listing pods".into(),
        }),
    );
    assert_eq!((d.allowed, d.code), (false, 500));
}

#[test]
fn pv_bound_denied() {
    let mut pv = Pv::default();
    pv.metadata.name = "pv1".into();
    assert!(pv_finalizer_removal(&pv, &pv).allowed);
    pv.status.phase = Some("Bound".into());
    let d = pv_finalizer_removal(&pv, &pv);
    assert!(!d.allowed);
    assert!(d.message.is_some_and(|m| m.contains("it is Bound")));
}
