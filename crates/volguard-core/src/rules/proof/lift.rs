//! rules.md §8 "renewing an override": a person's override whose time is up is lifted by
//! volguard's controller, so that setting it again, `kubectl annotate --overwrite` included, is a
//! new setting: stamped with its setter and time, and judged. Without the lift, `--overwrite` of
//! the value an object already holds changes nothing, so nothing is stamped and the override
//! stays expired.
//!
//! Only an override that has certainly expired is lifted: stamped by a person with a
//! `confirmed-at` older than the expiry plus [`MARGIN`] (the controller reads the webhook's stamp
//! on its own clock). An override without a time (set with expiry off,
//! or by hand), stamped by nobody or by no person, is left alone: lifting it would not make
//! setting it again mean anything more, and a tool that applies it (GitOps) would then be refused
//! on every sync.

use super::keys::{CONFIRMED_AT, CONFIRMED_BY, Key};
use super::read::Expiry;
use super::{BreakGlass, stamp_is_person};
use crate::model::Meta;
use json_patch::jsonptr::PointerBuf;
use json_patch::{Patch, PatchOperation, RemoveOperation, TestOperation};
use serde_json::Value;

/// How much later than the expiry an override is lifted: the webhook that stamped it and the
/// controller that lifts it read two clocks. A clock ahead by more lifts early, which is safe
/// (the guards only get stricter) but makes a person set it again sooner than they were told.
pub const MARGIN: jiff::SignedDuration = jiff::SignedDuration::from_secs(30);

/// The overrides to lift from one object, why, and the patch that lifts them: a `test` of the
/// object's resourceVersion as read (any write since, a renewal included, fails it), of each
/// override's value and of the stamp, then a `remove` of each override (the stamp stays, inert,
/// until the next setting overwrites it).
#[derive(Debug, Clone, PartialEq)]
pub struct Lift {
    pub keys: Vec<Key>,
    /// Why they count for nothing, as the guards would warn.
    pub why: String,
    pub patch: Patch,
}

/// What to lift from `stored` (with its resourceVersion) under `mode` and `expiry`: nothing
/// without an expiry, with break glass off, or unless every override present is a person's and
/// certainly expired.
pub fn lift(stored: &Meta, mode: BreakGlass, expiry: Option<Expiry>) -> Option<Lift> {
    let Expiry { after, now } = expiry?;
    if mode == BreakGlass::Off {
        return None;
    }
    let rv = stored.resource_version.as_deref()?;
    let by = stored
        .annotation(CONFIRMED_BY)
        .filter(|b| stamp_is_person(b))?;
    let at_text = stored.annotation(CONFIRMED_AT)?;
    let at = at_text.parse::<jiff::Timestamp>().ok()?;
    if now.duration_since(at) < after + MARGIN {
        return None;
    }
    let keys: Vec<Key> = Key::ALL
        .into_iter()
        .filter(|k| stored.annotation_true(k.annotation()))
        .collect();
    if keys.is_empty() {
        return None;
    }
    let path = |p: &[&str]| PointerBuf::from_tokens(p.iter().copied());
    let test = |p: &[&str], v: &str| {
        PatchOperation::Test(TestOperation {
            path: path(p),
            value: Value::String(v.to_string()),
        })
    };
    let mut ops = vec![
        test(&["metadata", "resourceVersion"], rv),
        test(&["metadata", "annotations", CONFIRMED_BY], by),
        test(&["metadata", "annotations", CONFIRMED_AT], at_text),
    ];
    ops.extend(
        keys.iter()
            .map(|k| test(&["metadata", "annotations", k.annotation()], "true")),
    );
    ops.extend(keys.iter().map(|k| {
        PatchOperation::Remove(RemoveOperation {
            path: path(&["metadata", "annotations", k.annotation()]),
        })
    }));
    let names: Vec<&str> = keys.iter().map(|k| k.annotation()).collect();
    Some(Lift {
        why: format!(
            "{} set by {by} at {at} expired (break glass counts for {after:#} after it is set: \
             --break-glass-expiry)",
            names.join(", ")
        ),
        keys,
        patch: Patch(ops),
    })
}
