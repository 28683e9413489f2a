//! rules.md §8 "renewing an override": a stored override that counts for nothing and cannot
//! count again unless a person sets it again (expired, unstamped, stamped by no person, or
//! stamped with a time volguard's clock did not write) is lifted by volguard's controller. Then
//! setting it again, `kubectl annotate --overwrite` included, is a new setting: stamped with its
//! setter and time, and judged. Without the lift, `--overwrite` of the value an object already
//! holds changes nothing, so nothing is stamped and the override stays expired.

use super::BreakGlass;
use super::keys::{CONFIRMED_AT, CONFIRMED_BY, Key};
use super::read::{Expiry, counts};
use crate::model::Meta;
use json_patch::jsonptr::PointerBuf;
use json_patch::{Patch, PatchOperation, RemoveOperation, TestOperation};
use serde_json::Value;

/// The overrides to lift from one object, why, and the patch that lifts them: a `test` of each
/// annotation's stored value and of the stamp, then a `remove` of each override (the stamp stays,
/// inert, until the next setting overwrites it). A person who sets an override again meanwhile
/// changes the stamp, the `test` fails, and nothing is lifted.
#[derive(Debug, Clone, PartialEq)]
pub struct Lift {
    pub keys: Vec<Key>,
    /// Why each counts for nothing, as the guards would warn.
    pub why: String,
    pub patch: Patch,
}

/// What to lift from `stored` under `mode` and `expiry`. Nothing when break glass is off
/// (setting again would not make it count either) or when every override present counts.
pub fn lift(stored: &Meta, mode: BreakGlass, expiry: Option<Expiry>) -> Option<Lift> {
    if mode == BreakGlass::Off {
        return None;
    }
    let mut keys = Vec::new();
    let mut why = Vec::new();
    for key in Key::ALL {
        if let Err(w) = counts(stored, key.annotation(), mode, expiry) {
            keys.push(key);
            why.push(w);
        }
    }
    if keys.is_empty() {
        return None;
    }
    let path = |k: &str| PointerBuf::from_tokens(["metadata", "annotations", k]);
    let mut ops: Vec<PatchOperation> = keys
        .iter()
        .map(|k| {
            PatchOperation::Test(TestOperation {
                path: path(k.annotation()),
                value: Value::String(
                    stored
                        .annotation(k.annotation())
                        .unwrap_or_default()
                        .to_string(),
                ),
            })
        })
        .collect();
    for stamp in [CONFIRMED_BY, CONFIRMED_AT] {
        if let Some(v) = stored.annotation(stamp) {
            ops.push(PatchOperation::Test(TestOperation {
                path: path(stamp),
                value: Value::String(v.to_string()),
            }));
        }
    }
    ops.extend(keys.iter().map(|k| {
        PatchOperation::Remove(RemoveOperation {
            path: path(k.annotation()),
        })
    }));
    Some(Lift {
        keys,
        why: why.join("; "),
        patch: Patch(ops),
    })
}
