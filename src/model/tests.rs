//! Unit tests of `src/model/mod.rs` and `src/model/wire.rs`.

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
    p.spec.node_name = Some("".into());
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

#[test]
fn small_map_decodes_sorts_and_encodes_as_an_object() {
    let m: SmallMap = serde_json::from_str(r#"{"b":"2","a":"1"}"#).expect("decode");
    assert_eq!(m.get("a"), Some("1"));
    assert_eq!(m.get("b"), Some("2"));
    assert_eq!(m.get("c"), None);
    assert_eq!(
        serde_json::to_string(&m).expect("encode"),
        r#"{"a":"1","b":"2"}"#
    );
    let mut m = m;
    m.retain(|k, _| k == "b");
    assert_eq!(m.len(), 1);
    assert!(
        serde_json::from_str::<SmallMap>(r#"{"a":1}"#).is_err(),
        "values must be strings"
    );
}

#[test]
fn small_map_repeated_key_keeps_the_last_value() {
    let m: SmallMap = serde_json::from_str(r#"{"a":"1","b":"x","a":"2"}"#).expect("decode");
    assert_eq!(m.get("a"), Some("2"));
    assert_eq!(m.len(), 2);
}

#[test]
fn only_volguard_annotations_are_decoded() {
    let pod = |annotations: serde_json::Value| -> Pod {
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": "p", "annotations": annotations}}),
        )
        .expect("pod")
    };
    let p = pod(
        serde_json::json!({"kubectl.kubernetes.io/last-applied-configuration": "{}",
        "volguard.io/confirm-force-delete": "true", "other": 7}),
    );
    assert!(p.metadata.annotation_true(CONFIRM_FORCE_DELETE));
    assert_eq!(p.metadata.annotations.as_ref().map(SmallMap::len), Some(1));
    assert_eq!(
        pod(serde_json::json!({"a": "b"})).metadata.annotations,
        None
    );
    assert_eq!(pod(serde_json::Value::Null).metadata.annotations, None);
    let err = serde_json::from_value::<Pod>(
        serde_json::json!({"metadata": {"annotations": {"volguard.io/x": 1}}}),
    )
    .expect_err("a volguard annotation must be a string");
    assert!(err.to_string().contains("invalid type: integer"), "{err}");
}

#[test]
fn pod_status_keeps_only_the_latest_end_times() {
    let p: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"},
        "status": {"phase": "Succeeded",
            "conditions": [{"type": "Ready", "lastTransitionTime": "2026-01-02T00:00:00Z"},
                           {"type": "PodScheduled", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "containerStatuses": [
                {"name": "a", "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-01-03T00:00:00Z"}}},
                {"name": "b", "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-01-04T00:00:00Z"}}},
                {"name": "c", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}
    }))
    .expect("pod");
    assert_eq!(
        p.status.finished_at.as_deref(),
        Some("2026-01-04T00:00:00Z")
    );
    assert_eq!(
        p.status.last_transition.as_deref(),
        Some("2026-01-02T00:00:00Z")
    );
    assert_eq!(p.ended_at(), "2026-01-04T00:00:00Z".parse().ok());
    // Written back in the API's shape, it decodes to the same.
    let again: Pod = serde_json::from_value(serde_json::to_value(&p).expect("json")).expect("pod");
    assert_eq!(again, p);
    // null lists, and a list of the wrong type, are handled like the rest of the model.
    let empty: Pod = serde_json::from_value(
        serde_json::json!({"status": {"conditions": null, "containerStatuses": []}}),
    )
    .expect("pod");
    assert_eq!(empty.status.finished_at, None);
    assert!(
        serde_json::from_value::<Pod>(serde_json::json!({"status": {"conditions": 5}})).is_err()
    );
}

#[test]
fn fence_backend_lists_parse_or_are_refused_whole() {
    use crate::model::fence::BackendKind;
    use crate::model::fence::BackendKind::*;
    assert_eq!(
        BackendKind::parse_list("networkfence"),
        Some(vec![Networkfence])
    );
    assert_eq!(
        BackendKind::parse_list("webhook, manual"),
        Some(vec![Webhook, Manual])
    );
    assert_eq!(
        BackendKind::parse_list("webhook,ipmi"),
        None,
        "an unknown backend voids the list"
    );
    assert_eq!(BackendKind::parse_list(""), None);
}

#[test]
fn creation_timestamp_is_kept_as_a_time_and_written_back_as_the_apiserver_wrote_it() {
    let pvc: Pvc = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "c", "creationTimestamp": "2026-11-01T00:00:00Z"}}),
    )
    .expect("pvc");
    assert_eq!(
        pvc.metadata.created_at(),
        "2026-11-01T00:00:00Z".parse().ok()
    );
    let back = serde_json::to_value(&pvc).expect("json");
    assert_eq!(
        back["metadata"]["creationTimestamp"],
        "2026-11-01T00:00:00Z"
    );
    for odd in [serde_json::json!("yesterday"), serde_json::json!(null)] {
        let pvc: Pvc = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "c", "creationTimestamp": odd}}),
        )
        .expect("an odd timestamp does not make the object unreadable");
        assert_eq!(pvc.metadata.created_at(), None, "{odd}");
    }
}
