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
