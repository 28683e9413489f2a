//! Unit tests of `src/rules/upstream/pv_controller.rs`.

use super::*;
use crate::model::from_json;

fn pv(policy: &str, uid: &str) -> Pv {
    from_json(&format!(
        r#"{{"metadata":{{"name":"pv1"}},"spec":{{"persistentVolumeReclaimPolicy":"{policy}",
            "claimRef":{{"namespace":"ns","name":"data","uid":"{uid}"}}}}}}"#
    ))
    .expect("pv")
}
fn claim(uid: &str, volume: &str) -> Pvc {
    from_json(&format!(
        r#"{{"metadata":{{"namespace":"ns","name":"data","uid":"{uid}"}},"spec":{{"volumeName":"{volume}"}}}}"#
    ))
    .expect("claim")
}

#[test]
fn released_when_the_claim_is_gone_replaced_or_bound_elsewhere() {
    let v = pv("Delete", "u1");
    assert!(is_volume_released(&v, None));
    assert!(is_volume_released(&v, Some(&claim("u2", "pv1"))));
    assert!(is_volume_released(&v, Some(&claim("u1", "pv2"))));
    assert!(!is_volume_released(&v, Some(&claim("u1", "pv1"))));
    assert!(!is_volume_released(&v, Some(&claim("u1", ""))));
    // Pre-bound by a user, or never bound: never released.
    assert!(!is_volume_released(&pv("Delete", ""), None));
    assert!(!is_volume_released(&Pv::default(), None));
}

#[test]
fn reclaim_by_policy_once_released() {
    assert_eq!(reclaim(&pv("Delete", "u1"), None), Reclaim::Delete);
    assert_eq!(reclaim(&pv("Recycle", "u1"), None), Reclaim::Recycle);
    assert_eq!(reclaim(&pv("Retain", "u1"), None), Reclaim::Keep);
    assert_eq!(reclaim(&pv("delete", "u1"), None), Reclaim::Keep);
    assert_eq!(
        reclaim(&pv("Delete", "u1"), Some(&claim("u1", "pv1"))),
        Reclaim::Keep
    );
    let mut migrated = pv("Delete", "u1");
    migrated.metadata = crate::model::testing::annotated(&[(MIGRATED_TO, "ebs.csi.aws.com")]);
    assert_eq!(reclaim(&migrated, None), Reclaim::Keep);
}

#[test]
fn the_migrated_to_annotation_survives_decoding() {
    let v: Pv = from_json(
        r#"{"metadata":{"annotations":{"pv.kubernetes.io/migrated-to":"x","other":"y"}}}"#,
    )
    .expect("pv");
    assert_eq!(v.metadata.annotation(MIGRATED_TO), Some("x"));
    assert_eq!(v.metadata.annotation("other"), None);
}
