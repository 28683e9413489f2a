//! Unit tests of `src/admission/review.rs`.

use super::*;
use serde_json::{Value, json};

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
    let out: Value = serde_json::from_slice(&encode("abc", &d)).expect("json");
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
    let out: Value = serde_json::from_slice(&encode("u", &d)).expect("json");
    assert_eq!(out["response"]["allowed"], false);
    assert_eq!(out["response"]["status"]["code"], 403);
    assert_eq!(out["response"]["status"]["message"], "no");
    assert_eq!(out["response"]["warnings"], json!(["w"]));
}
