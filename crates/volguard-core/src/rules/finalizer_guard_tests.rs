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

#[test]
fn the_first_look_decides_what_needs_no_read() {
    let own = vec!["system:serviceaccount:volguard-system:volguard-controller".to_string()];
    let alice = testing::user("alice", &["system:authenticated"]);
    let proofs = proof::Reader::new(proof::BreakGlass::Anyone);
    let mut stored = testing::pvc("ns", "data");
    stored.metadata.set_finalizers(&[PVC_FINALIZER, "x"]);
    let mut kept = stored.clone();
    kept.metadata.set_finalizers(&[PVC_FINALIZER]);
    let mut stripped = stored.clone();
    stripped.metadata.set_finalizers(&["x"]);
    let row = |l: Look<'_, Pvc>| match l {
        Look::Decided(d) | Look::Exempt(_, d) => Some(d.row),
        Look::Strip(_) => None,
    };
    assert_eq!(
        row(look(&alice, &own, &proofs, &stored, &kept)),
        Some("keeps-pvc-finalizer")
    );
    let controller = testing::user(&own[0], &[]);
    assert_eq!(
        row(look(&controller, &own, &proofs, &stored, &stripped)),
        Some("finalizer-removal-volguard-controller")
    );
    // A person's stored override, stamped: decided, and recorded.
    let mut glass = stored.clone();
    glass.metadata = testing::annotated(&[
        (ALLOW_FINALIZER_REMOVAL.annotation(), "true"),
        (crate::rules::proof::CONFIRMED_BY, "bob"),
    ]);
    glass.metadata.name = "data".into();
    glass.metadata.namespace = "ns".into();
    glass.metadata.set_finalizers(&[PVC_FINALIZER, "x"]);
    match look(&alice, &own, &proofs, &glass, &stripped) {
        Look::Exempt(why, d) => {
            assert_eq!(why, Exemption::BreakGlass);
            assert_eq!(d.row, "finalizer-removal-break-glass");
            assert!(d.effect.is_some(), "a break glass is recorded");
        }
        Look::Decided(_) | Look::Strip(_) => panic!("a stamped override is an exemption"),
    }
    // Anyone else's strip is judged on the users, which the strip names.
    let Look::Strip(strip) = look(&alice, &own, &proofs, &stored, &stripped) else {
        panic!("a person's strip needs the users");
    };
    let user = using_pod(Some("n1"));
    assert!(strip.blocks(&user));
    assert!(!strip.blocks(&using_pod(None)));
    assert!(!strip.judge(Fact::Found(&[user][..])).allowed);
}

#[test]
fn an_override_that_does_not_count_warns_on_the_judgement() {
    let proofs = proof::Reader::new(proof::BreakGlass::Off);
    let alice = testing::user("alice", &["system:authenticated"]);
    let mut stored = testing::pvc("ns", "data");
    stored.metadata = testing::annotated(&[
        (ALLOW_FINALIZER_REMOVAL.annotation(), "true"),
        (crate::rules::proof::CONFIRMED_BY, "bob"),
    ]);
    stored.metadata.set_finalizers(&[PVC_FINALIZER]);
    let stripped = testing::pvc("ns", "data");
    let Look::Strip(strip) = look(&alice, &[], &proofs, &stored, &stripped) else {
        panic!("break glass off: no exemption");
    };
    let d = strip.judge(Fact::Found(&[][..]));
    assert!(d.allowed, "unused: allowed");
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
}

#[test]
fn a_volume_strip_reads_the_claim_its_ref_names() {
    let proofs = proof::Reader::new(proof::BreakGlass::Rbac);
    let alice = testing::user("alice", &["system:authenticated"]);
    let mut stored = Pv::default();
    stored.metadata.name = "pv1".into();
    stored.metadata.finalizers = Some(vec![PV_FINALIZER.into()]);
    let new = Pv::default();
    stored.spec.claim_ref = Some(ClaimRef {
        namespace: "ns".into(),
        name: String::new(),
        uid: None,
    });
    let Look::Strip(strip) = look(&alice, &[], &proofs, &stored, &new) else {
        panic!("a person's strip needs the claim");
    };
    assert!(strip.claim_ref().is_none(), "an empty name names nothing");
    assert!(strip.judge(Fact::Missing).allowed);
}
