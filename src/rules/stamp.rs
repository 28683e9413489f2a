//! rules.md §8 "who confirmed is the apiserver's word": whoever sets a `volguard.io/confirm-*`
//! annotation (or, on a NodeFence, `volguard.io/confirmed-by` through `kubectl volguard fence
//! confirm`) is stamped by the mutating webhook with the username the apiserver authenticated,
//! in `volguard.io/confirmed-by`. Nobody writes the stamp by hand: a change of it that sets no
//! confirmation is put back. The guards' warnings, the NodeFence evidence and the Events then
//! name the apiserver's caller, not what a client typed.

use super::Decision;
use super::proof::newly_set;
use crate::model::fence::CONFIRMED_BY;
use crate::model::{Meta, UserInfo};
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
use serde_json::Value;

/// Decide the stamp of a CREATE (`old` is `None`) or UPDATE, of any kind and subresource, from
/// `old` to `new`: whoever sets an override (`proof::OVERRIDES`) is named; on a NodeFence
/// (`fence`) writing `confirmed-by` is the confirmation. Who may set one is `proof::judge`'s.
pub fn stamp(user: &UserInfo, fence: bool, old: Option<&Meta>, new: &Meta) -> Decision {
    let confirms = !newly_set(old, new, fence).is_empty();
    let want = match confirms {
        true => Some(user.username.as_str()),
        false => old.and_then(|m| m.annotation(CONFIRMED_BY)),
    };
    let have = new.annotation(CONFIRMED_BY);
    if have == want {
        return Decision::allow("stamp-kept");
    }
    let op = match want {
        Some(who) if new.annotations.is_none() => PatchOperation::Add(AddOperation {
            path: PointerBuf::from_tokens(["metadata", "annotations"]),
            value: serde_json::json!({ CONFIRMED_BY: who }),
        }),
        // `add` on an object member replaces it (RFC 6902).
        Some(who) => PatchOperation::Add(AddOperation {
            path: PointerBuf::from_tokens(["metadata", "annotations", CONFIRMED_BY]),
            value: Value::String(who.to_string()),
        }),
        None => PatchOperation::Remove(RemoveOperation {
            path: PointerBuf::from_tokens(["metadata", "annotations", CONFIRMED_BY]),
        }),
    };
    let row = match confirms {
        true => "confirmation-stamped",
        false => "stamp-restored",
    };
    Decision {
        patch: Some(Patch(vec![op]).into()),
        ..Decision::allow(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CONFIRM_FORCE_DELETE;
    use crate::model::fence::CONFIRM_NODE_DOWN;
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
        let d = stamp(&alice, false, Some(&old), &new);
        assert_eq!(d.row, "confirmation-stamped");
        assert_eq!(
            apply(&new, &d)["metadata"]["annotations"][CONFIRMED_BY],
            "alice"
        );
        let bare = meta(&[(CONFIRM_FORCE_DELETE, "true")]);
        let d = stamp(&alice, false, None, &bare);
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
        let d = stamp(&mallory, false, Some(&old), &forged);
        assert_eq!(d.row, "stamp-restored");
        assert_eq!(
            apply(&forged, &d)["metadata"]["annotations"][CONFIRMED_BY],
            "alice"
        );
        let added = meta(&[(CONFIRMED_BY, "alice")]);
        let d = stamp(&mallory, false, Some(&meta(&[])), &added);
        assert!(
            apply(&added, &d)["metadata"]["annotations"]
                .get(CONFIRMED_BY)
                .is_none()
        );
        // Unchanged: no patch.
        assert!(stamp(&mallory, false, Some(&old), &old).patch.is_none());
    }

    #[test]
    fn a_fence_confirmation_names_its_caller() {
        let alice = testing::user("alice", &[]);
        let typed = meta(&[(CONFIRMED_BY, "the-ceo at 2026-11-25T00:00:00Z")]);
        let d = stamp(&alice, true, Some(&meta(&[])), &typed);
        assert_eq!(d.row, "confirmation-stamped");
        assert_eq!(
            apply(&typed, &d)["metadata"]["annotations"][CONFIRMED_BY],
            "alice"
        );
    }
}
