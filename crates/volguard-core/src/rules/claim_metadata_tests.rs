//! Unit tests of `src/rules/claim_metadata.rs`: one per row.

use super::*;
use crate::model::testing;
use crate::rules::proof;

/// `claim_update` with the stored claim's break glass as the reader would find it (assumed valid).
fn judge(user: &UserInfo, own: &[String], old: &Pvc, new: &Pvc, pod: Fact<&Pod>) -> Decision {
    let confirmed = proof::assumed(&old.metadata, ALLOW_LOCK_REMOVAL);
    claim_update(user, own, old, new, pod, confirmed.as_ref())
}

const OWN: &str = "system:serviceaccount:volguard-system:volguard-webhook";

fn own() -> Vec<String> {
    vec![OWN.to_string()]
}

fn with_lock(value: Option<&str>, break_glass: bool) -> Pvc {
    let mut p = testing::pvc("ns", "data");
    let mut a: Vec<(String, String)> = Vec::new();
    if let Some(v) = value {
        a.push((RWO_LOCK.into(), v.into()));
    }
    if break_glass {
        a.push((ALLOW_LOCK_REMOVAL.annotation().into(), "true".into()));
    }
    if !a.is_empty() {
        p.metadata.annotations = Some(a.into_iter().collect());
    }
    p
}

fn person() -> UserInfo {
    testing::user("alice", &["system:authenticated"])
}

#[test]
fn row1_only_volguard_writes_the_lock() {
    let lock = r#"{"node":"n1","pod":"a","at":"2026-11-25T00:00:00Z"}"#;
    let editor = testing::user(
        "system:serviceaccount:team:deployer",
        &["system:serviceaccounts"],
    );
    for (old, new, what) in [
        (
            with_lock(None, false),
            with_lock(Some(lock), false),
            "adding",
        ),
        (
            with_lock(Some(lock), false),
            with_lock(None, false),
            "removing",
        ),
        (
            with_lock(Some(lock), false),
            with_lock(Some("{}"), false),
            "changing",
        ),
    ] {
        for user in [person(), editor.clone()] {
            let d = judge(&user, &own(), &old, &new, Fact::Missing);
            assert_eq!(
                (d.allowed, d.row),
                (false, "rwo-lock-foreign-write"),
                "{what}"
            );
            assert!(d.message.unwrap_or_default().starts_with(what));
        }
        let me = testing::user(OWN, &["system:serviceaccounts"]);
        assert!(judge(&me, &own(), &old, &new, Fact::Missing).allowed);
    }
}

#[test]
fn row1_a_person_with_the_break_glass_may_clear_it_never_forge_it() {
    let lock = r#"{"node":"n1","pod":"a","at":"2026-11-25T00:00:00Z"}"#;
    let d = judge(
        &person(),
        &own(),
        &with_lock(Some(lock), true),
        &with_lock(None, true),
        Fact::Missing,
    );
    assert_eq!((d.allowed, d.row), (true, "rwo-lock-break-glass"));
    assert!(d.warnings[0].contains("allow-lock-removal"));
    let forged = judge(
        &person(),
        &own(),
        &with_lock(None, true),
        &with_lock(Some(lock), true),
        Fact::Missing,
    );
    assert!(!forged.allowed);
    let sa = testing::user(
        "system:serviceaccount:team:bot",
        &["system:serviceaccounts"],
    );
    assert!(
        !judge(
            &sa,
            &own(),
            &with_lock(Some(lock), true),
            &with_lock(None, true),
            Fact::Missing
        )
        .allowed
    );
}

fn ephemeral_claim(owner_uid: Option<&str>) -> Pvc {
    let mut p = testing::pvc("ns", "cache-0-scratch");
    p.metadata.owner_references = owner_uid.map(|uid| {
        vec![OwnerReference {
            kind: "Pod".into(),
            name: "cache-0".into(),
            uid: uid.into(),
            controller: Some(true),
        }]
    });
    p
}

fn cache_pod(node: Option<&str>) -> Pod {
    let mut p = testing::pod("ns", "cache-0")
        .with_uid("u-cache")
        .on(node)
        .in_phase("Running");
    p.spec.volumes.push(crate::model::Volume {
        name: "scratch".into(),
        ephemeral: Some(crate::model::Present {}),
        ..Default::default()
    });
    p
}

#[test]
fn row2_the_owner_of_a_mounted_ephemeral_claim_stays() {
    let old = ephemeral_claim(Some("u-cache"));
    let running = cache_pod(Some("n1"));
    for new in [ephemeral_claim(None), ephemeral_claim(Some("u-other"))] {
        let d = judge(&person(), &own(), &old, &new, Fact::Found(&running));
        assert_eq!((d.allowed, d.row), (false, "ephemeral-owner-changed"));
        assert!(d.message.unwrap_or_default().contains("--cascade=orphan"));
        // Unsure means in use.
        let late = Fact::Unknown(crate::rules::decision::ReadError::Timeout {
            what: "the fact".into(),
        });
        assert!(!judge(&person(), &own(), &old, &new, late).allowed);
        // The garbage collector orphaning it (`--cascade=orphan`) passes.
        let gc = testing::user(GARBAGE_COLLECTORS[0], &["system:serviceaccounts"]);
        assert!(judge(&gc, &own(), &old, &new, Fact::Found(&running)).allowed);
        // No pod, an unscheduled one, or one that does not declare the volume: nothing mounts it.
        assert!(judge(&person(), &own(), &old, &new, Fact::Missing).allowed);
        let pending = cache_pod(None);
        assert!(judge(&person(), &own(), &old, &new, Fact::Found(&pending)).allowed);
        let other = testing::pod("ns", "cache-0")
            .on(Some("n1"))
            .in_phase("Running");
        assert!(judge(&person(), &own(), &old, &new, Fact::Found(&other)).allowed);
    }
    // An update that keeps the owner is not this row's.
    let d = judge(&person(), &own(), &old, &old.clone(), Fact::Found(&running));
    assert_eq!((d.allowed, d.row), (true, "claim-metadata-kept"));
}
