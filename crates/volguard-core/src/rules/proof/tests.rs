//! Unit tests of `src/rules/proof.rs`: one per way a proof is (not) made.

use super::read::counts;
use super::*;
use crate::model::testing;

const CONFIRM_FORCE_DELETE: &str = Key::ConfirmForceDelete.annotation();
const CONFIRM_NODE_DOWN: &str = Key::ConfirmNodeDown.annotation();
const ALLOW_FINALIZER_REMOVAL: &str = Key::AllowFinalizerRemoval.annotation();

const OWN: &str = "system:serviceaccount:volguard-system:volguard-controller";

fn meta(pairs: &[(&str, &str)]) -> Meta {
    testing::annotated(pairs)
}

fn alice() -> UserInfo {
    testing::user("alice", &["system:authenticated"])
}

/// Alice's write, judged with break glass through RBAC (`asked`: the authorizer's answers).
fn alice_writes(old: Option<&Meta>, new: &Meta, asked: &[(Override, Authority)]) -> Decision {
    judge(&alice(), &[], old, new, false, BreakGlass::Rbac, asked)
}

fn allowed(o: Override) -> Vec<(Override, Authority)> {
    vec![(o, Authority::Allowed)]
}

const FORCE: Override = OVERRIDES[1];

#[test]
fn a_person_with_the_verb_sets_a_stamped_confirmation() {
    let new = meta(&[(CONFIRM_FORCE_DELETE, "true"), (CONFIRMED_BY, "alice")]);
    let d = alice_writes(Some(&meta(&[])), &new, &allowed(FORCE));
    assert_eq!((d.allowed, d.row), (true, "proof-set"));
    // At CREATE too: there is no earlier object.
    let d = alice_writes(None, &new, &allowed(FORCE));
    assert_eq!((d.allowed, d.row), (true, "proof-set"));
}

#[test]
fn a_service_account_node_or_system_user_never_sets_one() {
    let new = |who: &str| meta(&[(CONFIRM_FORCE_DELETE, "true"), (CONFIRMED_BY, who)]);
    for (who, groups) in [
        (
            "system:serviceaccount:ns:backup",
            vec!["system:serviceaccounts"],
        ),
        ("system:node:n1", vec!["system:nodes"]),
        ("system:admin", vec!["system:masters"]),
        // A name that looks like a person's, in the service accounts' group.
        ("robot", vec!["system:serviceaccounts"]),
    ] {
        let user = testing::user(who, &groups);
        let d = judge(
            &user,
            &[],
            Some(&meta(&[])),
            &new(who),
            false,
            BreakGlass::Rbac,
            &allowed(FORCE),
        );
        assert_eq!((d.allowed, d.row), (false, "proof-not-a-person"), "{who}");
        // Not even with break glass open to anyone.
        let d = judge(&user, &[], None, &new(who), false, BreakGlass::Anyone, &[]);
        assert!(!d.allowed, "{who}");
    }
}

#[test]
fn a_person_without_the_verb_or_unasked_is_refused() {
    let new = meta(&[(CONFIRM_NODE_DOWN, "true"), (CONFIRMED_BY, "alice")]);
    let d = alice_writes(None, &new, &[(OVERRIDES[3], Authority::Denied)]);
    assert_eq!((d.allowed, d.row), (false, "proof-not-authorized"));
    assert!(d.message.unwrap().contains("out-of-service-taint"));
    let d = alice_writes(None, &new, &[]);
    assert_eq!(d.row, "proof-not-authorized");
    let d = alice_writes(
        None,
        &new,
        &[(OVERRIDES[3], Authority::Unknown("timeout".into()))],
    );
    assert_eq!((d.allowed, d.code), (false, 500));
}

#[test]
fn a_confirmation_without_its_setters_stamp_is_refused() {
    for stamp in [None, Some("bob")] {
        let mut pairs = vec![(CONFIRM_FORCE_DELETE, "true")];
        if let Some(s) = stamp {
            pairs.push((CONFIRMED_BY, s));
        }
        let d = alice_writes(None, &meta(&pairs), &allowed(FORCE));
        assert_eq!((d.allowed, d.row), (false, "proof-unstamped"), "{stamp:?}");
    }
}

#[test]
fn nobody_writes_the_stamp_by_hand_but_volguard() {
    let old = meta(&[(CONFIRM_FORCE_DELETE, "true"), (CONFIRMED_BY, "alice")]);
    let forged = meta(&[(CONFIRM_FORCE_DELETE, "true"), (CONFIRMED_BY, "mallory")]);
    let d = alice_writes(Some(&old), &forged, &[]);
    assert_eq!((d.allowed, d.row), (false, "proof-stamp-forged"));
    // Removing it is allowed: the confirmation beside it then counts for nothing.
    let d = judge(
        &alice(),
        &[],
        Some(&old),
        &meta(&[(CONFIRM_FORCE_DELETE, "true")]),
        false,
        BreakGlass::Rbac,
        &[],
    );
    assert!(d.allowed);
    let own = testing::user(OWN, &["system:serviceaccounts"]);
    let d = judge(
        &own,
        &[OWN.to_string()],
        Some(&old),
        &forged,
        false,
        BreakGlass::Rbac,
        &[],
    );
    assert_eq!(d.row, "proof-volguard");
}

#[test]
fn break_glass_off_refuses_every_proof_and_counts_none() {
    let new = meta(&[(CONFIRM_FORCE_DELETE, "true"), (CONFIRMED_BY, "alice")]);
    let d = judge(&alice(), &[], None, &new, false, BreakGlass::Off, &[]);
    assert_eq!((d.allowed, d.row), (false, "proof-break-glass-off"));
    assert!(counts(&new, CONFIRM_FORCE_DELETE, BreakGlass::Off, None).is_err());
}

#[test]
fn a_stored_confirmation_counts_only_when_its_stamp_is_a_person() {
    let by = |who: &str| meta(&[(CONFIRM_FORCE_DELETE, "true"), (CONFIRMED_BY, who)]);
    assert_eq!(
        counts(&by("alice"), CONFIRM_FORCE_DELETE, BreakGlass::Rbac, None),
        Ok(true)
    );
    for forged in [
        "system:serviceaccount:ns:ci",
        "system:node:n1",
        "system:admin",
        "",
    ] {
        assert!(
            counts(&by(forged), CONFIRM_FORCE_DELETE, BreakGlass::Rbac, None).is_err(),
            "{forged:?}"
        );
    }
    let unstamped = meta(&[(CONFIRM_FORCE_DELETE, "true")]);
    assert!(counts(&unstamped, CONFIRM_FORCE_DELETE, BreakGlass::Rbac, None).is_err());
    assert_eq!(
        counts(&meta(&[]), CONFIRM_FORCE_DELETE, BreakGlass::Rbac, None),
        Ok(false)
    );
}

#[test]
fn a_fence_confirmation_is_its_confirmed_by() {
    let new = meta(&[(CONFIRMED_BY, "alice")]);
    assert_eq!(newly_set(None, &new, true), vec![FENCE_CONFIRMATION]);
    let sa = testing::user("system:serviceaccount:ns:x", &["system:serviceaccounts"]);
    let d = judge(
        &sa,
        &[],
        Some(&meta(&[])),
        &meta(&[(CONFIRMED_BY, "system:serviceaccount:ns:x")]),
        true,
        BreakGlass::Rbac,
        &[],
    );
    assert_eq!(d.row, "proof-not-a-person");
    let d = judge(
        &alice(),
        &[],
        Some(&meta(&[])),
        &new,
        true,
        BreakGlass::Rbac,
        &allowed(FENCE_CONFIRMATION),
    );
    assert_eq!(d.row, "proof-set");
}

#[test]
fn an_override_already_set_is_not_set_again() {
    let old = meta(&[(CONFIRM_FORCE_DELETE, "true"), (CONFIRMED_BY, "alice")]);
    assert!(newly_set(Some(&old), &old, false).is_empty());
    let more = meta(&[
        (CONFIRM_FORCE_DELETE, "true"),
        (ALLOW_FINALIZER_REMOVAL, "true"),
        (CONFIRMED_BY, "alice"),
    ]);
    assert_eq!(newly_set(Some(&old), &more, false), vec![OVERRIDES[0]]);
}

#[test]
fn nobody_but_volguard_writes_a_fence_record_or_status() {
    use crate::model::fence::{Phase, Release, ReleaseAction};
    let mallory = testing::user("mallory", &["system:authenticated"]);
    let mut forged = NodeFence::default();
    forged.spec.node = "n1".into();
    forged.spec.release = Some(Release {
        action: ReleaseAction::NodeDelete,
        by: "mallory".into(),
        proof: "trust me".into(),
        pods: Vec::new(),
    });
    let d = fence_record(&mallory, None, &forged).expect("judged");
    assert_eq!((d.allowed, d.row), (false, "fence-record-not-volguard"));
    let mut open = NodeFence::default();
    open.spec.node = "n1".into();
    assert!(fence_record(&mallory, None, &open).is_none());
    let mut released = open.clone();
    released.status.phase = Phase::Released;
    assert!(
        !fence_record(&mallory, Some(&open), &released)
            .expect("judged")
            .allowed
    );
    // Labels, annotations: not the record.
    let mut labelled = open.clone();
    labelled.metadata.name = "x".into();
    assert!(fence_record(&mallory, Some(&open), &labelled).is_none());
}

#[test]
fn with_an_expiry_an_override_counts_for_that_long_after_it_was_set() {
    let now: jiff::Timestamp = "2026-11-27T10:00:00Z".parse().expect("time");
    let hour = jiff::SignedDuration::from_hours(1);
    let expiry = Some(Expiry { after: hour, now });
    let at = |t: &str| {
        meta(&[
            (CONFIRM_FORCE_DELETE, "true"),
            (CONFIRMED_BY, "alice"),
            (CONFIRMED_AT, t),
        ])
    };
    let counts_at = |t: &str| counts(&at(t), CONFIRM_FORCE_DELETE, BreakGlass::Rbac, expiry);
    assert_eq!(counts_at("2026-11-27T09:30:00Z"), Ok(true));
    let expired = counts_at("2026-11-27T09:00:00Z").expect_err("an hour old");
    assert!(
        expired.contains("expired") && expired.contains("--break-glass-expiry"),
        "{expired}"
    );
    // Written ahead of the clock by hand (while volguard was down): counts for nothing.
    assert!(
        counts_at("2027-01-01T00:00:00Z")
            .expect_err("future")
            .contains("future")
    );
    assert!(counts_at("yesterday").is_err());
    let untimed = meta(&[(CONFIRM_FORCE_DELETE, "true"), (CONFIRMED_BY, "alice")]);
    assert!(counts(&untimed, CONFIRM_FORCE_DELETE, BreakGlass::Rbac, expiry).is_err());
    // Without an expiry the time is not read.
    assert_eq!(
        counts(&untimed, CONFIRM_FORCE_DELETE, BreakGlass::Rbac, None),
        Ok(true)
    );
}

/// An object's JSON with `meta`'s annotations and resourceVersion, and `patch` applied to it.
fn lifted(meta: &Meta, patch: &json_patch::Patch) -> Result<serde_json::Value, String> {
    let mut doc = serde_json::json!({"metadata": {"name": "x", "resourceVersion": meta.resource_version,
        "annotations": meta.annotations}});
    json_patch::patch(&mut doc, patch).map_err(|e| e.to_string())?;
    Ok(doc)
}

fn at_version(mut m: Meta, rv: &str) -> Meta {
    m.resource_version = Some(rv.into());
    m
}

#[test]
fn only_a_persons_override_certainly_expired_is_lifted() {
    let now: jiff::Timestamp = "2026-11-27T10:00:00Z".parse().expect("time");
    let expiry = Some(Expiry {
        after: jiff::SignedDuration::from_hours(1),
        now,
    });
    let stored = |at: &str| {
        at_version(
            meta(&[
                (ALLOW_FINALIZER_REMOVAL, "true"),
                (CONFIRMED_BY, "alice"),
                (CONFIRMED_AT, at),
                ("team", "a"),
            ]),
            "41",
        )
    };
    // Fresh, or expired by less than the margin two clocks need: it stays.
    for at in ["2026-11-27T09:30:00Z", "2026-11-27T08:59:45Z"] {
        assert_eq!(lift(&stored(at), BreakGlass::Rbac, expiry), None, "{at}");
    }
    // Certainly expired: lifted, the stamp and every other annotation kept.
    let old = stored("2026-11-27T08:00:00Z");
    let l = lift(&old, BreakGlass::Rbac, expiry).expect("expired");
    assert_eq!(l.keys, vec![Key::AllowFinalizerRemoval]);
    assert!(
        l.why.contains("alice") && l.why.contains("expired"),
        "{}",
        l.why
    );
    let doc = lifted(&old, &l.patch).expect("applies to what it was computed from");
    let a = &doc["metadata"]["annotations"];
    assert!(a.get(ALLOW_FINALIZER_REMOVAL).is_none(), "{a}");
    assert_eq!(a[CONFIRMED_BY], "alice");
    assert_eq!(a["team"], "a");
    // Any write since (a renewal, another override set, anything): the `test` fails.
    let mut later = old.clone();
    later.resource_version = Some("42".into());
    assert!(lifted(&later, &l.patch).is_err());
    // Not a person's, untimed, unstamped, not "true", no expiry, break glass off, or read without
    // a resourceVersion: nothing is lifted.
    let untimed = at_version(
        meta(&[(CONFIRM_NODE_DOWN, "true"), (CONFIRMED_BY, "alice")]),
        "7",
    );
    let system = at_version(
        meta(&[
            (CONFIRM_NODE_DOWN, "true"),
            (CONFIRMED_BY, OWN),
            (CONFIRMED_AT, "2026-11-27T08:00:00Z"),
        ]),
        "7",
    );
    let unstamped = at_version(meta(&[(CONFIRM_NODE_DOWN, "true")]), "7");
    let off = at_version(
        meta(&[
            (CONFIRM_NODE_DOWN, "false"),
            (CONFIRMED_BY, "alice"),
            (CONFIRMED_AT, "2026-11-27T08:00:00Z"),
        ]),
        "7",
    );
    for m in [&untimed, &system, &unstamped, &off] {
        assert_eq!(lift(m, BreakGlass::Rbac, expiry), None, "{m:?}");
    }
    assert_eq!(lift(&old, BreakGlass::Rbac, None), None);
    assert_eq!(lift(&old, BreakGlass::Off, expiry), None);
    let mut unversioned = old.clone();
    unversioned.resource_version = None;
    assert_eq!(lift(&unversioned, BreakGlass::Rbac, expiry), None);
}
