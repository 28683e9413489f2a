//! Unit tests of `src/rules/finalizer_guard.rs`.

use super::*;
use crate::model::testing;
use crate::rules::proof;

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
    assert!(exempt(&user(&own[0]), &own, None).is_some());
    for u in UPSTREAM_CONTROLLERS {
        assert!(exempt(&user(u), &own, None).is_some(), "{u}");
    }
    assert!(exempt(&user("alice"), &own, None).is_none());
    let _ = m;
    let mut glass = meta(None);
    glass.annotations = Some(
        [(
            ALLOW_FINALIZER_REMOVAL.annotation().to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    // Only the stored object's (set in an earlier request, judged then): one set in the
    // same update is not yet a proof.
    assert!(
        exempt(
            &user("alice"),
            &own,
            proof::assumed(&glass, ALLOW_FINALIZER_REMOVAL).as_ref(),
        )
        .is_some()
    );
    // A proof of another kind is not this rule's break glass.
    let other = proof::Proof::for_test(proof::Key::ConfirmForceDelete, "alice");
    assert!(exempt(&user("alice"), &own, Some(&other)).is_none());
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
    assert!(pv_finalizer_removal(&pv, &pv, Fact::Missing).allowed);
    pv.status.phase = Some("Bound".into());
    let d = pv_finalizer_removal(&pv, &pv, Fact::Missing);
    assert!(!d.allowed);
    assert!(d.message.is_some_and(|m| m.contains("it is Bound")));
}

#[test]
fn a_pv_forged_available_while_its_claim_points_at_it_is_in_use() {
    // Point 11 of the trust review: the phase is written through /status and proves nothing.
    let mut pv = Pv::default();
    pv.metadata.name = "pv1".into();
    pv.status.phase = Some("Available".into());
    pv.spec.claim_ref = Some(crate::model::ClaimRef {
        namespace: "ns".into(),
        name: "data".into(),
        uid: Some("u-data".into()),
    });
    let mut claim = testing::pvc("ns", "data");
    claim.metadata.uid = "u-data".into();
    claim.spec.volume_name = Some("pv1".into());
    let d = pv_finalizer_removal(&pv, &pv, Fact::Found(&claim));
    assert_eq!((d.allowed, d.code), (false, 403));
    let m = d.message.unwrap_or_default();
    assert!(
        m.contains("claimRef names PersistentVolumeClaim ns/data, which is bound to it"),
        "{m}"
    );
    // Unsure means in use.
    let late = Fact::Unknown(crate::rules::decision::ReadError::Timeout {
        what: "the fact".into(),
    });
    assert!(!pv_finalizer_removal(&pv, &pv, late).allowed);
    // The claim is bound elsewhere, was replaced (another UID), or is gone: not this PV's user.
    let mut elsewhere = claim.clone();
    elsewhere.spec.volume_name = Some("pv2".into());
    assert!(pv_finalizer_removal(&pv, &pv, Fact::Found(&elsewhere)).allowed);
    let mut replaced = claim.clone();
    replaced.metadata.uid = "u-other".into();
    assert!(pv_finalizer_removal(&pv, &pv, Fact::Found(&replaced)).allowed);
    assert!(pv_finalizer_removal(&pv, &pv, Fact::Missing).allowed);
    // The controller's own release follows the same rule.
    pv.metadata.deletion_timestamp = Some("2026-11-25T00:00:00Z".into());
    pv.metadata.finalizers = Some(vec![PV_FINALIZER.into()]);
    assert_eq!(
        crate::rules::release::pv_plan(&pv, Fact::Found(&claim)),
        crate::rules::release::PvPlan::Keep
    );
    assert_eq!(
        crate::rules::release::pv_plan(&pv, Fact::Missing),
        crate::rules::release::PvPlan::Release
    );
}
