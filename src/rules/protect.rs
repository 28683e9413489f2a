//! SPEC 1: the protection finalizer is added on create, never twice.

use super::Decision;
use crate::model::Meta;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::Value;

/// The JSON patch that appends `finalizer`, or `None` when the object already carries it.
/// An absent or `null` list is created whole (`add /metadata/finalizers`); an existing list is
/// appended to (`add /metadata/finalizers/-`) so other finalizers stay untouched.
pub fn finalizer_patch(meta: &Meta, finalizer: &str) -> Option<Patch> {
    let op = match &meta.finalizers {
        Some(list) if list.iter().any(|f| f == finalizer) => return None,
        Some(_) => AddOperation {
            path: PointerBuf::from_tokens(["metadata", "finalizers", "-"]),
            value: Value::String(finalizer.to_string()),
        },
        None => AddOperation {
            path: PointerBuf::from_tokens(["metadata", "finalizers"]),
            value: Value::Array(vec![Value::String(finalizer.to_string())]),
        },
    };
    Some(Patch(vec![PatchOperation::Add(op)]))
}

/// Admission decision for a CREATE of a PVC or PV.
pub fn protect_on_create(meta: &Meta, finalizer: &str) -> Decision {
    match finalizer_patch(meta, finalizer) {
        Some(patch) => Decision {
            patch: Some(patch),
            ..Decision::allow("add-finalizer")
        },
        None => Decision::allow("finalizer-present"),
    }
}

#[cfg(test)]
mod tests {
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
}
