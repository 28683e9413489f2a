//! Unit tests of `src/admission/review.rs`.

use super::*;
use crate::admission::encode::encode;
use crate::rules::Decision;
use base64::Engine;
use serde_json::{Value, json};
use std::borrow::Cow;

#[test]
fn decode_errors_are_precise() {
    assert!(matches!(decode(b"{nope"), Err(ReviewError::NotJson(_))));
    assert!(matches!(decode(b""), Err(ReviewError::NotJson(_))));
    assert!(matches!(decode(b"[1,2]"), Err(ReviewError::NotAReview(_))));
    let v1beta1 = json!({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u"}});
    assert_eq!(
        decode(v1beta1.to_string().as_bytes()).err(),
        Some(ReviewError::WrongApiVersion(
            "admission.k8s.io/v1beta1".into()
        ))
    );
    let wrong_kind = json!({"apiVersion":"admission.k8s.io/v1","kind":"Pod"});
    assert!(matches!(
        decode(wrong_kind.to_string().as_bytes()),
        Err(ReviewError::WrongKind(_))
    ));
    let no_req = json!({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"});
    assert_eq!(
        decode(no_req.to_string().as_bytes()).err(),
        Some(ReviewError::NoRequest)
    );
    let mut bad_utf8 = br#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":""#.to_vec();
    bad_utf8.extend_from_slice(&[0xff, b'"', b'}', b'}']);
    assert_eq!(
        decode(&bad_utf8).err().map(|e| e.to_string()),
        Some("request body is not valid JSON: invalid UTF-8 at byte 54 of 58".into())
    );
    let no_uid = json!({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}});
    assert_eq!(
        decode(no_uid.to_string().as_bytes()).err(),
        Some(ReviewError::NoUid)
    );
}

#[test]
fn encode_patch_is_base64_string() {
    let d = crate::rules::protect::protect_on_create(
        &Default::default(),
        "kubernetes.io/pvc-protection",
    );
    let out: Value = serde_json::from_slice(&encode("abc", &d, None)).expect("json");
    assert_eq!(out["response"]["uid"], "abc");
    assert_eq!(out["response"]["patchType"], "JSONPatch");
    let b64 = out["response"]["patch"]
        .as_str()
        .expect("patch is a string");
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    let patch: Value = serde_json::from_slice(&raw).expect("patch json");
    assert_eq!(
        patch,
        json!([{"op":"add","path":"/metadata/finalizers","value":["kubernetes.io/pvc-protection"]}])
    );
    assert!(out["response"].get("status").is_none());
}

#[test]
fn encode_denial_has_status_and_warnings() {
    let d = Decision::deny("r", "no").with_warning("w");
    let out: Value = serde_json::from_slice(&encode("u", &d, None)).expect("json");
    assert_eq!(out["response"]["allowed"], false);
    assert_eq!(out["response"]["status"]["code"], 403);
    assert_eq!(out["response"]["status"]["message"], "no");
    assert_eq!(out["response"]["warnings"], json!(["w"]));
}

fn pod_review(request: Value) -> Vec<u8> {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
        .to_string()
        .into_bytes()
}

#[test]
fn objects_decode_in_the_same_pass_when_the_kind_comes_first() {
    let pod = json!({"metadata": {"name": "p", "namespace": "ns"},
        "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]}});
    let body = pod_review(
        json!({"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE", "object": pod, "oldObject": null}),
    );
    let req = decode(&body).expect("review");
    assert!(matches!(req.object, Embedded::Pod(_)), "{:?}", req.object);
    assert!(matches!(req.old_object, Embedded::Absent));
    let p = req.object.get::<Pod>("object").expect("pod");
    assert_eq!(p.metadata.name, "p");
    assert!(matches!(p, Cow::Borrowed(_)));
}

#[test]
fn fields_no_rule_reads_decode_in_a_review_as_anywhere_else_and_are_checked() {
    let pod = json!({"metadata": {"name": "p", "labels": {"app": "db"}}});
    let review = |pod: &Value| {
        pod_review(
            json!({"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE", "object": pod}),
        )
    };
    let body = review(&pod);
    let req = decode(&body).expect("review");
    let p = req.object.get::<Pod>("object").expect("pod");
    assert!(matches!(p, Cow::Borrowed(_)));
    assert_eq!(
        p.metadata.labels.as_ref().and_then(|l| l.get("app")),
        Some("db"),
        "one decoding, no review-only mode"
    );
    // Outside a review (watches, the state file), the same.
    let kept: Pod = crate::model::from_json(&pod.to_string()).expect("pod");
    assert_eq!(
        kept.metadata.labels.as_ref().and_then(|l| l.get("app")),
        Some("db")
    );
    // A list where the map belongs is named.
    let body = review(&json!({"metadata": {"name": "p", "labels": ["app"]}}));
    let req = decode(&body).expect("the review itself is fine");
    let err = req
        .object
        .get::<Pod>("object")
        .expect_err("labels is a list");
    assert!(
        err.to_string()
            .contains("metadata.labels: invalid type: sequence"),
        "{err}"
    );
}

#[test]
fn a_claims_size_and_a_pods_end_decode_in_a_review_as_anywhere_else_and_are_checked() {
    let review = |pod: &Value| {
        pod_review(
            json!({"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE", "object": pod}),
        )
    };
    // A claim's size request: read by the report, not by admission.
    let claim = json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}}});
    let body = pod_review(
        json!({"uid": "u", "kind": {"group": "", "version": "v1", "kind": "PersistentVolumeClaim"},
        "operation": "CREATE", "object": claim}),
    );
    let req = decode(&body).expect("review");
    let c = req.object.get::<Pvc>("object").expect("claim");
    assert!(matches!(c, Cow::Borrowed(_)));
    assert_eq!((c.requested_storage(), c.is_rwo()), (Some("1Gi"), true));
    let kept: Pvc = crate::model::from_json(&claim.to_string()).expect("claim");
    assert_eq!(kept.requested_storage(), Some("1Gi"));
    // A terminal pod's end time: read by "unused since"; decoded in a review too.
    let ended = json!({"metadata": {"name": "p"}, "status": {"phase": "Succeeded",
        "conditions": [{"type": "Ready", "lastTransitionTime": "2026-11-01T00:00:00Z"}],
        "containerStatuses": [{"state": {"terminated": {"finishedAt": "2026-11-02T00:00:00Z"}}}]}});
    let body = review(&ended);
    let req = decode(&body).expect("review");
    let p = req.object.get::<Pod>("object").expect("pod");
    assert!(matches!(p, Cow::Borrowed(_)));
    assert_eq!(
        (
            p.is_terminal(),
            p.ended_at().map(|t| t.to_string()).as_deref(),
        ),
        (true, Some("2026-11-02T00:00:00Z"))
    );
    let kept: Pod = crate::model::from_json(&ended.to_string()).expect("pod");
    assert_eq!(
        kept.ended_at().map(|t| t.to_string()).as_deref(),
        Some("2026-11-02T00:00:00Z")
    );
    // Still checked to be a list.
    let body = review(&json!({"status": {"conditions": {"type": "Ready"}}}));
    let req = decode(&body).expect("review");
    let err = req
        .object
        .get::<Pod>("object")
        .expect_err("conditions is a map");
    assert!(
        err.to_string()
            .contains("status.conditions: invalid type: map"),
        "{err}"
    );
}

#[test]
fn objects_before_their_kind_or_of_other_kinds_stay_raw_and_decode_alike() {
    // serde_json keeps key order when writing a json! map only with `preserve_order`; write it.
    let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
        "object":{"metadata":{"name":"p"},"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"c"}}]}},
        "uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE"}}"#;
    let req = decode(body).expect("review");
    assert!(matches!(req.object, Embedded::Raw(_)));
    let p = req.object.get::<Pod>("object").expect("pod");
    assert_eq!(p.spec.volumes.len(), 1);
    let other = pod_review(
        json!({"uid": "u", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "operation": "CREATE", "object": {"spec": {"replicas": 1}}}),
    );
    assert!(matches!(
        decode(&other).expect("review").object,
        Embedded::Raw(_)
    ));
}

#[test]
fn a_malformed_object_is_named_by_its_field_not_a_broken_review() {
    let body = pod_review(
        json!({"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE", "object": {"metadata": {"name": 7}}}),
    );
    let req = decode(&body).expect("the review itself is fine");
    assert!(matches!(req.object, Embedded::Raw(_)));
    let err = req
        .object
        .get::<Pod>("object")
        .expect_err("name is a number");
    assert!(
        err.to_string().starts_with(
            "request.object does not decode as a Pod: metadata.name: invalid type: integer `7`"
        ),
        "{err}"
    );
    assert_eq!(
        req.old_object
            .get::<Pod>("oldObject")
            .expect_err("absent")
            .to_string(),
        "request.oldObject is missing; expected a Pod"
    );
}

#[test]
fn repeated_fields_and_escaped_keys() {
    let dup =
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",
        "kind":{"group":"","version":"v1","kind":"Pod"},"object":{},"object":{}}}"#;
    let err = decode(dup).expect_err("two objects");
    assert!(
        err.to_string().contains("duplicate field `object`"),
        "{err}"
    );
    let escaped = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"\u0075id":"u",
        "kind":{"group":"","version":"v1","kind":"Pod"},"operation":"DELETE","\u006fldObject":{"metadata":{"name":"p"}}}}"#;
    let req = decode(escaped).expect("escaped keys are keys");
    assert_eq!(req.uid, "u");
    assert!(matches!(req.old_object, Embedded::Pod(_)));
}

#[test]
fn encoded_strings_round_trip_through_a_json_parser() {
    let mut every: String = (0u8..0x80).map(char::from).collect();
    every.push_str("é ✓ 🦀 \u{2028} \\\" end");
    // A character needing an escape at every offset of the eight-byte scan.
    let mut cases: Vec<String> = (0..20)
        .flat_map(|at| {
            ['"', '\\', '\u{1f}', 'é']
                .map(|c| format!("{}{c}{}", "a".repeat(at), "b".repeat(19 - at)))
        })
        .collect();
    cases.extend([
        every,
        "".into(),
        "plain".into(),
        "\"quoted\"".into(),
        "tab\there\nline".into(),
    ]);
    for s in cases.iter().map(String::as_str) {
        let d = Decision::deny("r", s).with_warning(s);
        let out: Value = serde_json::from_slice(&encode(s, &d, None)).expect("valid JSON");
        assert_eq!(out["response"]["uid"], s);
        assert_eq!(out["response"]["status"]["message"], s);
        assert_eq!(out["response"]["warnings"], json!([s]));
    }
}

#[test]
fn encoded_response_has_exactly_the_fields_of_an_admission_response() {
    let allowed: Value = serde_json::from_slice(&encode(
        "u",
        &Decision::allow("r"),
        Some(crate::rules::rule::Rule::ForceDelete),
    ))
    .expect("json");
    assert_eq!(
        allowed,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": {"uid": "u", "allowed": true,
                            "auditAnnotations": {"row": "r", "rule": "force-delete"}}})
    );
    let bad: Value =
        serde_json::from_slice(&encode("u", &Decision::bad_request("no object"), None))
            .expect("json");
    assert_eq!(
        bad["response"]["status"],
        json!({"status": "Failure", "code": 400, "reason": "BadRequest", "message": "no object"})
    );
}

#[test]
fn binds_evictions_and_nodes_are_decoded_in_the_pass_and_a_broken_one_is_named() {
    let cases = [
        (
            json!({"group": "", "version": "v1", "kind": "Binding"}),
            json!({"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}),
        ),
        (
            json!({"group": "policy", "version": "v1", "kind": "Eviction"}),
            json!({"metadata": {"name": "p"}, "deleteOptions": {"gracePeriodSeconds": 0}}),
        ),
        (
            json!({"group": "", "version": "v1", "kind": "Node"}),
            json!({"metadata": {"name": "n1"}, "spec": {"taints": []}}),
        ),
    ];
    for (kind, object) in cases {
        let body =
            pod_review(json!({"uid": "u", "kind": kind, "operation": "CREATE", "object": object}));
        let req = decode(&body).expect("review");
        match &req.object {
            Embedded::Binding(b) => assert_eq!(b.target.name, "n1"),
            Embedded::Eviction(e) => assert_eq!(
                e.delete_options
                    .as_ref()
                    .and_then(|o| o.grace_period_seconds),
                Some(0)
            ),
            Embedded::Node(n) => assert_eq!(n.metadata.name, "n1"),
            other => panic!("{kind} stayed {other:?}"),
        }
    }
    let broken = pod_review(
        json!({"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Binding"},
        "operation": "CREATE", "object": {"target": {"name": 7}}}),
    );
    let req = decode(&broken).expect("the review itself is fine");
    let err = req
        .object
        .get::<crate::model::Binding>("object")
        .expect_err("name is a number");
    assert!(
        err.to_string().starts_with(
            "request.object does not decode as a Binding: target.name: invalid type: integer `7`"
        ),
        "{err}"
    );
}

#[test]
fn the_object_uid_is_the_stored_objects_or_the_bound_pods() {
    let delete = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"DELETE","name":"db-0","namespace":"team","userInfo":{"username":"alice"},"oldObject":{"metadata":{"name":"db-0","uid":"uid-db-0"}}}}"#;
    let r = decode(delete).expect("review");
    assert_eq!(r.object_uid().as_deref(), Some("uid-db-0"));
    let bind = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"2","kind":{"group":"","version":"v1","kind":"Binding"},"operation":"CREATE","name":"db-0","namespace":"team","userInfo":{"username":"s"},"object":{"metadata":{"name":"db-0","uid":"uid-pod"},"target":{"name":"n1"}}}}"#;
    let r = decode(bind).expect("review");
    assert_eq!(r.object_uid().as_deref(), Some("uid-pod"));
    let create = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"3","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"team","userInfo":{"username":"s"},"object":{"metadata":{"generateName":"web-"}}}}"#;
    assert_eq!(decode(create).expect("review").object_uid(), None);
}
