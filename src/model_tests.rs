//! Unit tests of `src/model.rs`.

use super::*;

#[test]
fn finalizers_null_and_absent_decode_as_none() {
    let p: Pvc =
        serde_json::from_str(r#"{"metadata":{"name":"a","finalizers":null}}"#).expect("decode");
    assert_eq!(p.metadata.finalizers, None);
    let p: Pvc = serde_json::from_str(r#"{"metadata":{"name":"a"}}"#).expect("decode");
    assert_eq!(p.metadata.finalizers, None);
    let p: Pvc =
        serde_json::from_str(r#"{"metadata":{"name":"a","finalizers":[]}}"#).expect("decode");
    assert_eq!(p.metadata.finalizers, Some(vec![]));
}

#[test]
fn wrong_field_type_is_an_error() {
    let r: Result<Pod, _> = serde_json::from_str(r#"{"spec":{"volumes":"nope"}}"#);
    assert!(r.is_err());
}

#[test]
fn pod_states() {
    let mut p = Pod::default();
    assert!(!p.is_scheduled());
    p.spec.node_name = Some(String::new());
    assert!(!p.is_scheduled(), "empty nodeName is unscheduled");
    p.spec.node_name = Some("n1".into());
    assert!(p.is_scheduled());
    p.status.phase = Some("Failed".into());
    assert!(p.is_terminal());
    p.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into());
    assert!(!p.is_shut_down(), "graceful deletion is not shut down");
    p.metadata.deletion_grace_period_seconds = Some(0);
    assert!(p.is_shut_down());
}

#[test]
fn prune_keeps_only_volguard_annotations() {
    let mut m = Meta {
        annotations: Some(
            [
                ("a".to_string(), "1".to_string()),
                (UNUSED_SINCE.to_string(), "x".to_string()),
            ]
            .into(),
        ),
        ..Default::default()
    };
    m.prune(false);
    assert_eq!(m.annotation(UNUSED_SINCE), Some("x"));
    assert_eq!(m.annotation("a"), None);
}
