//! Unit tests of `src/rules/stamp.rs`.

use super::*;
use crate::rules::proof::Key;

const CONFIRM_FORCE_DELETE: &str = Key::ConfirmForceDelete.annotation();
const CONFIRM_NODE_DOWN: &str = Key::ConfirmNodeDown.annotation();
use crate::model::testing;

fn meta(pairs: &[(&str, &str)]) -> Meta {
    testing::annotated(pairs)
}

fn apply(m: &Meta, d: &Decision) -> serde_json::Value {
    let mut v = serde_json::json!({"metadata": serde_json::to_value(m).expect("meta")});
    if let Some(p) = &d.patch {
        json_patch::patch(&mut v, &p.ops()).expect("the patch applies");
    }
    v
}

#[test]
fn the_setter_of_a_confirmation_is_stamped_by_the_apiservers_word() {
    let alice = testing::user("alice", &[]);
    let old = meta(&[]);
    // She types someone else's name: the stamp says alice.
    let new = meta(&[(CONFIRM_NODE_DOWN, "true"), (CONFIRMED_BY, "bob")]);
    let d = stamp(&alice, false, Some(&old), &new, None);
    assert_eq!(d.row, "confirmation-stamped");
    assert_eq!(
        apply(&new, &d)["metadata"]["annotations"][CONFIRMED_BY],
        "alice"
    );
    let bare = meta(&[(CONFIRM_FORCE_DELETE, "true")]);
    let d = stamp(&alice, false, None, &bare, None);
    assert_eq!(
        apply(&bare, &d)["metadata"]["annotations"][CONFIRMED_BY],
        "alice"
    );
}

#[test]
fn nobody_writes_the_stamp_by_hand() {
    let mallory = testing::user("mallory", &[]);
    let old = meta(&[(CONFIRM_NODE_DOWN, "true"), (CONFIRMED_BY, "alice")]);
    let forged = meta(&[(CONFIRM_NODE_DOWN, "true"), (CONFIRMED_BY, "mallory")]);
    let d = stamp(&mallory, false, Some(&old), &forged, None);
    assert_eq!(d.row, "stamp-restored");
    assert_eq!(
        apply(&forged, &d)["metadata"]["annotations"][CONFIRMED_BY],
        "alice"
    );
    let added = meta(&[(CONFIRMED_BY, "alice")]);
    let d = stamp(&mallory, false, Some(&meta(&[])), &added, None);
    assert!(
        apply(&added, &d)["metadata"]["annotations"]
            .get(CONFIRMED_BY)
            .is_none()
    );
    // Unchanged: no patch.
    assert!(
        stamp(&mallory, false, Some(&old), &old, None)
            .patch
            .is_none()
    );
}

#[test]
fn with_expiry_the_time_is_stamped_and_kept() {
    let alice = testing::user("alice", &[]);
    let now = "2026-11-27T08:00:00Z";
    let new = meta(&[
        (CONFIRM_FORCE_DELETE, "true"),
        (CONFIRMED_AT, "2999-01-01T00:00:00Z"),
    ]);
    let d = stamp(&alice, false, Some(&meta(&[])), &new, Some(now));
    let after = apply(&new, &d);
    assert_eq!(after["metadata"]["annotations"][CONFIRMED_AT], now);
    assert_eq!(after["metadata"]["annotations"][CONFIRMED_BY], "alice");
    // Every annotation dropped: one `add` of the map puts both back.
    let stored = meta(&[(CONFIRMED_BY, "alice"), (CONFIRMED_AT, now)]);
    let d = stamp(&alice, false, Some(&stored), &meta(&[]), Some(now));
    assert_eq!(d.row, "stamp-restored");
    let after = apply(&meta(&[]), &d);
    assert_eq!(after["metadata"]["annotations"][CONFIRMED_AT], now);
    assert_eq!(after["metadata"]["annotations"][CONFIRMED_BY], "alice");
    // Later, a hand-written time is put back.
    let mallory = testing::user("mallory", &[]);
    let stored = meta(&[
        (CONFIRM_FORCE_DELETE, "true"),
        (CONFIRMED_BY, "alice"),
        (CONFIRMED_AT, now),
    ]);
    let extended = meta(&[
        (CONFIRM_FORCE_DELETE, "true"),
        (CONFIRMED_BY, "alice"),
        (CONFIRMED_AT, "2999-01-01T00:00:00Z"),
    ]);
    let d = stamp(&mallory, false, Some(&stored), &extended, Some(now));
    assert_eq!(d.row, "stamp-restored");
    assert_eq!(
        apply(&extended, &d)["metadata"]["annotations"][CONFIRMED_AT],
        now
    );
}

#[test]
fn a_fence_confirmation_names_its_caller() {
    let alice = testing::user("alice", &[]);
    let typed = meta(&[(CONFIRMED_BY, "the-ceo at 2026-11-25T00:00:00Z")]);
    let d = stamp(&alice, true, Some(&meta(&[])), &typed, None);
    assert_eq!(d.row, "confirmation-stamped");
    assert_eq!(
        apply(&typed, &d)["metadata"]["annotations"][CONFIRMED_BY],
        "alice"
    );
}
