//! rules.md §8 "who confirmed is the apiserver's word": whoever sets a `volguard.io/confirm-*`
//! annotation (or, on a NodeFence, `volguard.io/confirmed-by` through `kubectl volguard fence
//! confirm`) is stamped by the mutating webhook with the username the apiserver authenticated,
//! in `volguard.io/confirmed-by`. Nobody writes the stamp by hand: a change of it that sets no
//! confirmation is put back. The guards' warnings, the NodeFence evidence and the Events then
//! name the apiserver's caller, not what a client typed.

use super::Decision;
use super::proof::newly_set;
use super::proof::{CONFIRMED_AT, CONFIRMED_BY};
use crate::model::{Meta, UserInfo};
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
use serde_json::Value;

/// Decide the stamp of a CREATE (`old` is `None`) or UPDATE, of any kind and subresource, from
/// `old` to `new`: whoever sets an override (`proof::OVERRIDES`) is named; on a NodeFence
/// (`fence`) writing `confirmed-by` is the confirmation. `at` (RFC 3339, volguard's clock) is
/// stamped in `confirmed-at` with it when overrides expire (`--break-glass-expiry`; `None`: they
/// do not, and `confirmed-at` is left as written). Who may set one is `proof::judge`'s.
pub fn stamp(
    user: &UserInfo,
    fence: bool,
    old: Option<&Meta>,
    new: &Meta,
    at: Option<&str>,
) -> Decision {
    let confirms = !newly_set(old, new, fence).is_empty();
    let before = |key| old.and_then(|m| m.annotation(key));
    let mut wants = vec![(
        CONFIRMED_BY,
        match confirms {
            true => Some(user.username.as_str()),
            false => before(CONFIRMED_BY),
        },
    )];
    if let Some(at) = at {
        wants.push((
            CONFIRMED_AT,
            if confirms {
                Some(at)
            } else {
                before(CONFIRMED_AT)
            },
        ));
    }
    wants.retain(|(key, want)| new.annotation(key) != *want);
    if wants.is_empty() {
        return Decision::allow("stamp-kept");
    }
    let ops: Vec<PatchOperation> = match &new.annotations {
        None => {
            let map: serde_json::Map<String, Value> = wants
                .iter()
                .filter_map(|(k, w)| Some((k.to_string(), Value::String((*w)?.to_string()))))
                .collect();
            vec![PatchOperation::Add(AddOperation {
                path: PointerBuf::from_tokens(["metadata", "annotations"]),
                value: Value::Object(map),
            })]
        }
        Some(_) => wants
            .iter()
            .map(|(key, want)| {
                let path = PointerBuf::from_tokens(["metadata", "annotations", key]);
                match want {
                    // `add` on an object member replaces it (RFC 6902).
                    Some(v) => PatchOperation::Add(AddOperation {
                        path,
                        value: Value::String(v.to_string()),
                    }),
                    None => PatchOperation::Remove(RemoveOperation { path }),
                }
            })
            .collect(),
    };
    let row = match confirms {
        true => "confirmation-stamped",
        false => "stamp-restored",
    };
    Decision {
        patch: Some(Patch(ops).into()),
        ..Decision::allow(row)
    }
}

#[cfg(test)]
#[path = "stamp_tests.rs"]
mod tests;
