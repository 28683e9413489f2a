//! rules.md §1: the protection finalizer is added on create, never twice.

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
#[path = "protect_tests.rs"]
mod tests;
