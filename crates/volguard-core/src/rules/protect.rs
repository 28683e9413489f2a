//! rules.md §1: the protection finalizer is added on create, never twice.

use super::Decision;
use crate::model::{Meta, UNUSED_SINCE};
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
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

/// Admission decision for a CREATE of a PVC or PV: the same patch as `finalizer_patch`.
pub fn protect_on_create(meta: &Meta, finalizer: &'static str) -> Decision {
    let list_exists = match &meta.finalizers {
        Some(list) if list.iter().any(|f| f == finalizer) => {
            return Decision::allow("finalizer-present");
        }
        Some(_) => true,
        None => false,
    };
    Decision {
        patch: Some(super::decision::Patch::AddFinalizer {
            finalizer,
            list_exists,
        }),
        ..Decision::allow("add-finalizer")
    }
}

/// rules.md §1 and §4: a PVC CREATE gets its finalizer, and loses a `volguard.io/unused-since` it
/// carries: a claim restored from a backup or re-applied from `kubectl get -o yaml` brings the old
/// object's mark, and a report would list a claim created an hour ago as idle for years.
pub fn pvc_on_create(meta: &Meta, finalizer: &'static str) -> Decision {
    let mut d = protect_on_create(meta, finalizer);
    if meta.annotation(UNUSED_SINCE).is_none() {
        return d;
    }
    let drop = PatchOperation::Remove(RemoveOperation {
        path: PointerBuf::from_tokens(["metadata", "annotations", UNUSED_SINCE]),
    });
    match &mut d.patch {
        Some(p) => p.push(drop),
        None => {
            d.patch = Some(Patch(vec![drop]).into());
            d.row = "drop-unused-since";
        }
    }
    d
}

#[cfg(test)]
#[path = "protect_tests.rs"]
mod tests;
