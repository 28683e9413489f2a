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
    assert!(
        p.metadata
            .annotation_true("volguard.io/confirm-force-delete")
    );
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

/// Every place a kind holds an object, replaced by a JSON array (then by a string), must fail to
/// decode and say where: serde's derive accepts a sequence for a struct, which decoded
/// `{"metadata": []}` as empty metadata (`make fuzz`, finalizer_patch).
fn rejects_non_objects_everywhere<T: serde::de::DeserializeOwned + std::fmt::Debug>(
    kind: &str,
    full: serde_json::Value,
) {
    use serde_json::Value;
    fn objects(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                out.push(at.clone());
                for (k, x) in m {
                    objects(x, format!("{at}/{k}"), out);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    objects(x, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let parsed: T = serde_json::from_value(full.clone())
        .unwrap_or_else(|e| panic!("{kind}: the full example decodes: {e}"));
    let mut paths = Vec::new();
    objects(&full, String::new(), &mut paths);
    assert!(paths.len() >= 4, "{kind}: {paths:?}");
    for path in &paths {
        for wrong in [
            serde_json::json!([]),
            serde_json::json!([1, "x"]),
            serde_json::json!("x"),
        ] {
            let mut v = full.clone();
            match v.pointer_mut(path) {
                Some(slot) => *slot = wrong.clone(),
                None => panic!("{kind}: no {path}"),
            }
            let text = v.to_string();
            let err = match from_json::<T>(&text) {
                Ok(got) => panic!("{kind}: {path} = {wrong} decoded as {got:?} (from {parsed:?})"),
                Err(e) => e,
            };
            assert!(err.contains("invalid type"), "{kind} {path}: {err}");
            // serde_path_to_error's spelling: `spec.volumes[0].ephemeral`.
            let mut dotted = String::new();
            for seg in path.split('/').skip(1) {
                match seg.parse::<usize>() {
                    Ok(i) => dotted.push_str(&format!("[{i}]")),
                    Err(_) if dotted.is_empty() => dotted.push_str(seg),
                    Err(_) => dotted.push_str(&format!(".{seg}")),
                }
            }
            if !dotted.is_empty() {
                assert!(
                    err.starts_with(&format!("{dotted}: ")),
                    "{kind} {path}: {err} names the field"
                );
            }
        }
    }
}

#[test]
fn a_pod_refuses_a_non_object_anywhere() {
    rejects_non_objects_everywhere::<Pod>(
        "Pod",
        serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u",
                "annotations": {"volguard.io/x": "y"}, "labels": {"a": "b"},
                "ownerReferences": [{"kind": "StatefulSet", "name": "s", "uid": "o", "controller": true}]},
            "spec": {"nodeName": "n1", "volumes": [
                {"name": "d", "persistentVolumeClaim": {"claimName": "c"}},
                {"name": "e", "ephemeral": {}}],
                "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"preference": {}}]}}},
            "status": {"phase": "Failed",
                "containerStatuses": [{"state": {"terminated": {"finishedAt": "2026-01-01T00:00:00Z"}}}],
                "conditions": [{"lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }),
    );
}

#[test]
fn a_claim_refuses_a_non_object_anywhere() {
    rejects_non_objects_everywhere::<Pvc>(
        "PersistentVolumeClaim",
        serde_json::json!({
            "metadata": {"name": "c", "finalizers": ["kubernetes.io/pvc-protection"]},
            "spec": {"volumeName": "v", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound", "conditions": [{"type": "Unused", "status": "True"}]}
        }),
    );
}

#[test]
fn a_volume_a_node_and_the_request_kinds_refuse_a_non_object_anywhere() {
    rejects_non_objects_everywhere::<Pv>(
        "PersistentVolume",
        serde_json::json!({
            "metadata": {"name": "v"},
            "spec": {"claimRef": {"namespace": "ns", "name": "c"}},
            "status": {"phase": "Bound"}
        }),
    );
    rejects_non_objects_everywhere::<Node>(
        "Node",
        serde_json::json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": OUT_OF_SERVICE_TAINT, "effect": "NoExecute"}]}
        }),
    );
    rejects_non_objects_everywhere::<Eviction>(
        "Eviction",
        serde_json::json!({"metadata": {"name": "p", "labels": {"a": "b"}}, "deleteOptions": {"gracePeriodSeconds": 0}}),
    );
    rejects_non_objects_everywhere::<Binding>(
        "Binding",
        serde_json::json!({"metadata": {"name": "p", "uid": "u", "labels": {}}, "target": {"kind": "Node", "name": "n1"}}),
    );
    rejects_non_objects_everywhere::<fence::NodeFence>(
        "NodeFence",
        serde_json::json!({
            "metadata": {"name": "f"},
            "spec": {"node": "n1"},
            "status": {"phase": "Fenced", "evidence": [{"time": "t", "step": "s", "message": "m"}]}
        }),
    );
}

#[test]
fn the_metadata_array_the_fuzzer_found_is_an_error_naming_metadata() {
    let err = from_json::<Pvc>(r#"{"metadata": []}"#).expect_err("refused");
    assert_eq!(
        err,
        "metadata: invalid type: sequence, expected an object at line 1 column 13"
    );
}

#[test]
fn unreachable_tolerations_fold_to_the_longest() {
    let tol = |json: &str| -> Tolerates {
        let p: Pod = serde_json::from_str(&format!(r#"{{"spec":{{"tolerations":{json}}}}}"#))
            .expect("decode");
        p.spec.tolerates_unreachable
    };
    assert_eq!(tol("null"), Tolerates::NotAtAll);
    assert_eq!(tol("[]"), Tolerates::NotAtAll);
    // The default tolerations the apiserver adds: not-ready and unreachable for 300 s.
    assert_eq!(
        tol(
            r#"[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},
                {"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]"#
        ),
        Tolerates::Seconds(300)
    );
    assert_eq!(
        tol(
            r#"[{"key":"node.kubernetes.io/unreachable","effect":"NoExecute","tolerationSeconds":30},
                {"key":"node.kubernetes.io/unreachable","effect":"NoExecute","tolerationSeconds":600}]"#
        ),
        Tolerates::Seconds(600)
    );
    // No seconds, or an empty key with Exists (tolerates every taint): forever.
    assert_eq!(
        tol(r#"[{"key":"node.kubernetes.io/unreachable","operator":"Exists"}]"#),
        Tolerates::Forever
    );
    assert_eq!(tol(r#"[{"operator":"Exists"}]"#), Tolerates::Forever);
    // Another key, or another effect, does not count.
    assert_eq!(
        tol(
            r#"[{"key":"x","operator":"Exists"},{"key":"node.kubernetes.io/unreachable","effect":"NoSchedule"}]"#
        ),
        Tolerates::NotAtAll
    );
    assert!(serde_json::from_str::<Pod>(r#"{"spec":{"tolerations":[1]}}"#).is_err());
    // Written back in its API shape, and read again the same.
    let mut p = Pod::default();
    p.spec.tolerates_unreachable = Tolerates::Seconds(42);
    let again: Pod =
        serde_json::from_value(serde_json::to_value(&p).expect("encode")).expect("decode");
    assert_eq!(again.spec.tolerates_unreachable, Tolerates::Seconds(42));
}

#[test]
fn node_prune_keeps_what_detection_reads_and_drops_the_volume_lists() {
    let mut n: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/control-plane": "", "zone": "a"}},
        "spec": {"taints": [{"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}, {"key": "x", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "MemoryPressure", "status": "False"},
                {"type": "DrainInProgress", "status": "True"}
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}],
            "nodeInfo": {"bootID": "b-1", "kubeletVersion": "v1.37.2"},
            "volumesInUse": ["kubernetes.io/csi/d^v2", "kubernetes.io/csi/d^v1"],
            "volumesAttached": [{"name": "kubernetes.io/csi/d^v1", "devicePath": ""}]
        }
    }))
    .expect("decode");
    assert_eq!(
        n.volumes(),
        ["kubernetes.io/csi/d^v1", "kubernetes.io/csi/d^v2"]
    );
    n.prune();
    assert_eq!(n.ready(), Some(false));
    assert_eq!(n.ready_since().1, "2026-01-01T00:00:00Z".parse().ok());
    assert_eq!(n.maintenance(), Some("DrainInProgress"));
    assert!(n.is_control_plane());
    assert_eq!(n.metadata.labels.as_ref().map(|l| l.len()), Some(1));
    assert!(n.is_out_of_service());
    assert_eq!(n.spec.taints.len(), 1);
    assert_eq!(n.addresses(), ["10.0.0.1"]);
    assert_eq!(n.boot_id(), Some("b-1"));
    assert!(
        n.volumes().is_empty(),
        "the kubelet's lists are read live, never cached"
    );
}

#[test]
fn a_volume_names_its_storage_system() {
    let pv = |spec: serde_json::Value| -> Pv {
        serde_json::from_value(serde_json::json!({"spec": spec})).expect("decode")
    };
    assert_eq!(
        pv(serde_json::json!({"csi": {"driver": "rbd.csi.ceph.com", "volumeHandle": "h"}}))
            .source(),
        (true, "rbd.csi.ceph.com")
    );
    assert_eq!(
        pv(serde_json::json!({"nfs": {"server": "s", "path": "/"}})).source(),
        (false, "nfs")
    );
    assert_eq!(
        pv(serde_json::json!({"hostPath": {"path": "/x"}})).source(),
        (false, "hostPath")
    );
    assert_eq!(
        pv(serde_json::json!({"cinder": {"volumeID": "x"}, "accessModes": ["ReadWriteOnce"]}))
            .source(),
        (false, "in-tree")
    );
}

#[test]
fn the_apiservers_time_form_reads_as_jiff_reads_it() {
    // Every day from 1600 to 2500 at a varying time of day, plus the edges; and texts the fast
    // path must leave to jiff (offsets, fractions, a leap second) or refuse as jiff does.
    let mut day = "1600-01-01T00:00:00Z"
        .parse::<jiff::Timestamp>()
        .expect("t");
    let end = "2500-12-31T23:59:59Z"
        .parse::<jiff::Timestamp>()
        .expect("t");
    let mut k: i64 = 0;
    while day <= end {
        let t = day + jiff::SignedDuration::from_secs((k * 7_919) % 86_400);
        let text = t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        assert_eq!(wire::parse_time(&text), Some(t), "{text}");
        // With a fraction of 1 to 9 digits, as jiff writes it (the lock's `at`).
        let t = t + jiff::SignedDuration::from_nanos((k * 104_729) % 1_000_000_000);
        let text = t.to_string();
        assert_eq!(wire::parse_time(&text), Some(t), "{text}");
        day += jiff::SignedDuration::from_hours(24);
        k += 1;
    }
    for text in [
        "0000-03-01T00:00:00Z",
        "2000-02-29T12:00:00Z",
        "2100-02-28T23:59:59Z",
        "9999-12-31T23:59:59Z",
        "2026-11-26T10:00:00+01:00",
        "2026-11-26T10:00:00.5Z",
        "2026-11-26T10:00:00.123456789Z",
        "2026-11-26T10:00:00.1234567890Z",
        "2026-11-26T10:00:00.Z",
        "2026-11-26T10:00:00.12a4Z",
        "2016-12-31T23:59:60Z",
        "2100-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-11-26T24:00:00Z",
        "2026-11-26 10:00:00Z",
        "+026-11-26T10:00:00Z",
        "not a time",
    ] {
        assert_eq!(wire::parse_time(text), text.parse().ok(), "{text}");
    }
}

#[test]
fn an_empty_storage_class_name_names_no_class() {
    let with = |class: Option<&str>| {
        let mut p = crate::model::testing::pvc("ns", "c");
        p.spec.storage_class_name = class.map(Into::into);
        p
    };
    assert_eq!(with(None).class_name(), None);
    assert_eq!(with(Some("")).class_name(), None);
    assert_eq!(with(Some("fast")).class_name(), Some("fast"));
}

/// Each cached object is one `Arc` block; mimalloc rounds it up to a size class (…, 320, 384,
/// 448, …). A field added or widened that crosses a class costs 64 bytes on every cached object of
/// the kind (`benches/cache_bytes.rs` shows the held bytes).
#[test]
fn cached_objects_stay_within_their_size_classes() {
    let arc = |size: usize| size + 2 * std::mem::size_of::<usize>();
    assert!(
        arc(std::mem::size_of::<Pod>()) <= 384,
        "Arc<Pod> past 384 bytes"
    );
    assert!(
        arc(std::mem::size_of::<Pvc>()) <= 320,
        "Arc<Pvc> past 320 bytes"
    );
    assert!(
        arc(std::mem::size_of::<Pv>()) <= 384,
        "Arc<Pv> past 384 bytes"
    );
    assert!(
        arc(std::mem::size_of::<Node>()) <= 384,
        "Arc<Node> past 384 bytes"
    );
}

#[test]
fn a_claims_storage_request_survives_null_and_round_trips() {
    let decode = |spec: &str| -> Pvc {
        from_json(&format!(r#"{{"metadata":{{"name":"c"}},"spec":{spec}}}"#)).expect("decodes")
    };
    for absent in [
        r#"{}"#,
        r#"{"resources":null}"#,
        r#"{"resources":{"requests":null}}"#,
        r#"{"resources":{"requests":{"cpu":"1"}}}"#,
    ] {
        let c = decode(absent);
        assert_eq!(c.requested_storage(), None, "{absent}");
        assert!(
            !serde_json::to_string(&c).unwrap().contains("resources"),
            "{absent}"
        );
    }
    let c = decode(r#"{"resources":{"requests":{"storage":"10Gi"}}}"#);
    assert_eq!(c.requested_storage(), Some("10Gi"));
    let again: Pvc = from_json(&serde_json::to_string(&c).unwrap()).expect("round trip");
    assert_eq!(again, c);
}

/// `spec.nodeSelector` and required node affinity decode and are read as the scheduler's
/// NodeAffinity filter reads them; caches drop both.
#[test]
fn a_pod_s_node_constraints_decode_and_match_as_the_scheduler_s() {
    let mut pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "nodeSelector": {"disk": "ssd"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]},
                                      {"key": "gen", "operator": "Gt", "values": ["3"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["special"]}]}
            ]}}}
        }
    }))
    .expect("pod");
    let labels = |pairs: &[(&str, &str)]| -> SmallMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert!(pod.has_node_constraints());
    let good = labels(&[("disk", "ssd"), ("zone", "b"), ("gen", "4")]);
    assert!(pod.may_run_on("n1", Some(&good)));
    assert!(!pod.may_run_on(
        "n1",
        Some(&labels(&[("disk", "hdd"), ("zone", "b"), ("gen", "4")]))
    ));
    assert!(!pod.may_run_on(
        "n1",
        Some(&labels(&[("disk", "ssd"), ("zone", "c"), ("gen", "4")]))
    ));
    assert!(!pod.may_run_on(
        "n1",
        Some(&labels(&[("disk", "ssd"), ("zone", "a"), ("gen", "3")]))
    ));
    assert!(!pod.may_run_on("n1", None));
    // The second term (ORed) by the node's name, with the nodeSelector still applying.
    assert!(pod.may_run_on("special", Some(&labels(&[("disk", "ssd")]))));
    assert!(!pod.may_run_on("special", None));
    let bare: Pod = serde_json::from_value(serde_json::json!({"spec": {}})).expect("bare");
    assert!(!bare.has_node_constraints() && bare.may_run_on("any", None));
    pod.prune_status();
    assert!(pod.spec.node_selector.is_none() && pod.spec.affinity.is_none());
}
