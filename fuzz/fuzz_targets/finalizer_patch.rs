//! The JSON patch builders: the add patch always applies to the object it came from and leaves
//! exactly one protection finalizer with every other finalizer kept in order; the removal patch
//! leaves none and keeps the others.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volguard::model::{Meta, PVC_FINALIZER};
use volguard::rules::{protect, release};

fuzz_target!(|data: &[u8]| {
    let Ok(mut obj) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    if !obj.is_object() {
        return;
    }
    let Ok(meta) = serde_json::from_value::<Meta>(
        obj.get("metadata")
            .cloned()
            .unwrap_or(serde_json::json!({})),
    ) else {
        return;
    };
    if obj.get("metadata").is_none() {
        obj["metadata"] = serde_json::json!({});
    }
    let others: Vec<String> = meta
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != PVC_FINALIZER)
        .collect();
    let count = |o: &serde_json::Value| {
        o["metadata"]["finalizers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|f| f.as_str() == Some(PVC_FINALIZER))
                    .count()
            })
            .unwrap_or(0)
    };
    let before = count(&obj);
    // The webhook's answer writes the add patch by hand: the same patch, and the same JSON.
    let answered = protect::protect_on_create(&meta, PVC_FINALIZER).patch;
    assert_eq!(
        answered.as_ref().map(|p| p.ops().into_owned()),
        protect::finalizer_patch(&meta, PVC_FINALIZER)
    );
    if let Some(p) = &answered {
        let written: serde_json::Value = serde_json::from_slice(&p.to_json()).expect("json");
        assert_eq!(written, serde_json::to_value(&*p.ops()).expect("json"));
    }
    match protect::finalizer_patch(&meta, PVC_FINALIZER) {
        Some(p) => {
            json_patch::patch(&mut obj, &p).expect("add patch applies to its own object");
            assert_eq!(count(&obj), 1, "exactly one protection finalizer");
            let kept: Vec<String> = obj["metadata"]["finalizers"]
                .as_array()
                .expect("list")
                .iter()
                .filter_map(|f| f.as_str())
                .filter(|f| *f != PVC_FINALIZER)
                .map(String::from)
                .collect();
            assert_eq!(kept, others, "other finalizers kept in order");
        }
        None => assert!(before >= 1),
    }
    let meta: Meta = serde_json::from_value(obj["metadata"].clone()).expect("still decodes");
    if let Some(p) = release::finalizer_removal_patch(&meta, PVC_FINALIZER) {
        json_patch::patch(&mut obj, &p).expect("removal applies to its own object");
        assert_eq!(count(&obj), 0);
    }
});
