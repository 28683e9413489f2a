//! Unit tests of `src/rules/protect.rs`.

use super::*;
use crate::model::{PV_FINALIZER, PVC_FINALIZER};
use serde_json::json;

fn apply(obj: Value, finalizer: &str) -> Value {
    let meta: Meta = serde_json::from_value(obj["metadata"].clone()).expect("meta");
    let mut doc = obj;
    if let Some(p) = finalizer_patch(&meta, finalizer) {
        json_patch::patch(&mut doc, &p).expect("patch applies");
    }
    doc
}

#[test]
fn absent_null_empty_and_other_lists() {
    for (input, want) in [
        (json!({"metadata":{"name":"a"}}), json!([PVC_FINALIZER])),
        (
            json!({"metadata":{"name":"a","finalizers":null}}),
            json!([PVC_FINALIZER]),
        ),
        (
            json!({"metadata":{"name":"a","finalizers":[]}}),
            json!([PVC_FINALIZER]),
        ),
        (
            json!({"metadata":{"name":"a","finalizers":["x/y"]}}),
            json!(["x/y", PVC_FINALIZER]),
        ),
        (
            json!({"metadata":{"name":"a","finalizers":[PVC_FINALIZER]}}),
            json!([PVC_FINALIZER]),
        ),
    ] {
        assert_eq!(
            apply(input.clone(), PVC_FINALIZER)["metadata"]["finalizers"],
            want,
            "{input}"
        );
    }
}

#[test]
fn present_means_no_patch() {
    let meta = Meta {
        finalizers: Some(vec![PV_FINALIZER.into()]),
        ..Default::default()
    };
    let d = protect_on_create(&meta, PV_FINALIZER);
    assert!(d.allowed && d.patch.is_none());
    let d = protect_on_create(&Meta::default(), PV_FINALIZER);
    assert!(d.allowed && d.patch.is_some());
}

#[test]
fn pvc_create_drops_a_restored_unused_since_and_keeps_other_annotations() {
    let obj = json!({"metadata":{"name":"a","annotations":{
        "volguard.io/unused-since":"2023-01-01T00:00:00Z","team":"x"}}});
    let meta: Meta = serde_json::from_value(obj["metadata"].clone()).expect("meta");
    let d = pvc_on_create(&meta, PVC_FINALIZER);
    assert_eq!(d.row, "add-finalizer");
    let mut doc = obj;
    json_patch::patch(&mut doc, &d.patch.as_ref().expect("patch").ops()).expect("applies");
    assert_eq!(doc["metadata"]["finalizers"], json!([PVC_FINALIZER]));
    assert_eq!(doc["metadata"]["annotations"], json!({"team":"x"}));

    // Already protected: only the mark goes.
    let obj = json!({"metadata":{"name":"a","finalizers":[PVC_FINALIZER],
        "annotations":{"volguard.io/unused-since":"2023-01-01T00:00:00Z"}}});
    let meta: Meta = serde_json::from_value(obj["metadata"].clone()).expect("meta");
    let d = pvc_on_create(&meta, PVC_FINALIZER);
    assert_eq!(d.row, "drop-unused-since");
    let mut doc = obj;
    json_patch::patch(&mut doc, &d.patch.as_ref().expect("patch").ops()).expect("applies");
    assert_eq!(doc["metadata"]["annotations"], json!({}));

    // No mark: as before.
    let meta: Meta =
        serde_json::from_value(json!({"name":"a","finalizers":[PVC_FINALIZER]})).expect("meta");
    let d = pvc_on_create(&meta, PVC_FINALIZER);
    assert_eq!((d.row, d.patch), ("finalizer-present", None));
}

#[test]
fn the_add_patch_written_by_hand_is_the_json_patch_s_own_json() {
    for finalizer in [PVC_FINALIZER, PV_FINALIZER] {
        for list in [None, Some(vec![]), Some(vec!["x/y".to_string()])] {
            let meta = Meta {
                finalizers: list.clone(),
                ..Default::default()
            };
            let p = protect_on_create(&meta, finalizer).patch.expect("patch");
            let written: Value = serde_json::from_slice(&p.to_json()).expect("json");
            let built = serde_json::to_value(&*p.ops()).expect("json");
            assert_eq!(written, built, "{finalizer} {list:?}");
            assert_eq!(
                Some(p.ops().into_owned()),
                finalizer_patch(&meta, finalizer),
                "{finalizer} {list:?}"
            );
        }
    }
}
