//! Unit tests of `src/rules/delete_protection.rs`: one per row.

use super::*;

fn meta(name: &str, ns: &str, protected: Option<&str>) -> Meta {
    let mut m = Meta {
        name: name.into(),
        namespace: ns.into(),
        ..Default::default()
    };
    if let Some(v) = protected {
        m.annotations = Some(
            [(DELETE_PROTECTION.to_string(), v.to_string())]
                .into_iter()
                .collect(),
        );
    }
    m
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        username: name.into(),
        uid: None,
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

#[test]
fn a_protected_claim_volume_or_namespace_is_not_deleted() {
    for (kind, noun) in [
        (
            Kind::Claim,
            "kubectl annotate pvc data -n app volguard.io/delete-protection-",
        ),
        (
            Kind::Volume,
            "kubectl annotate pv data volguard.io/delete-protection-",
        ),
        (
            Kind::Namespace,
            "kubectl annotate namespace data volguard.io/delete-protection-",
        ),
    ] {
        let d = delete(kind, &meta("data", "app", Some("true")), Fact::Found(&[]));
        assert!(!d.allowed);
        assert_eq!(d.row, "delete-protection-protected");
        assert!(
            d.message.as_deref().unwrap_or_default().contains(noun),
            "{d:?}"
        );
    }
}

#[test]
fn only_exactly_true_protects() {
    for v in [None, Some("false"), Some("yes"), Some("TRUE")] {
        let d = delete(Kind::Claim, &meta("data", "app", v), Fact::Missing);
        assert!(d.allowed, "{v:?}");
        assert_eq!(d.row, "delete-protection-not-protected");
    }
}

#[test]
fn a_namespace_holding_protected_claims_is_not_deleted() {
    let claims: Vec<String> = (0..7).map(|i| format!("data-{i}")).collect();
    let d = delete(
        Kind::Namespace,
        &meta("app", "", None),
        Fact::Found(&claims),
    );
    assert!(!d.allowed);
    assert_eq!(d.row, "delete-protection-namespace-holds");
    let m = d.message.unwrap_or_default();
    assert!(
        m.contains("data-0, data-1, data-2, data-3, data-4 and 2 more"),
        "{m}"
    );
    let d = delete(Kind::Namespace, &meta("app", "", None), Fact::Found(&[]));
    assert!(d.allowed);
}

#[test]
fn a_namespace_whose_claims_cannot_be_read_is_kept() {
    let d = delete(
        Kind::Namespace,
        &meta("app", "", None),
        Fact::Unknown(crate::rules::decision::ReadError::Api {
            what: "the namespace's claims".into(),
            message: "cache not synced".into(),
        }),
    );
    assert!(!d.allowed);
    assert_eq!(d.row, "delete-protection-unknown");
}

#[test]
fn a_person_lifts_the_protection_and_it_is_recorded() {
    let d = update(
        &user("alice", &["system:authenticated"]),
        Kind::Claim,
        &meta("data", "app", Some("true")),
        &meta("data", "app", None),
    );
    assert!(d.allowed);
    assert_eq!(d.row, "delete-protection-lifted");
    assert!(d.warnings[0].contains("lifted by alice"), "{d:?}");
}

#[test]
fn a_service_account_or_controller_cannot_lift_it() {
    for u in [
        user(
            "system:serviceaccount:argocd:argocd-application-controller",
            &["system:serviceaccounts"],
        ),
        user("system:kube-controller-manager", &[]),
    ] {
        let d = update(
            &u,
            Kind::Volume,
            &meta("pv-1", "", Some("true")),
            &meta("pv-1", "", Some("false")),
        );
        assert!(!d.allowed, "{}", u.username);
        assert_eq!(d.row, "delete-protection-lift-refused");
    }
}

#[test]
fn updates_that_keep_or_add_the_protection_pass() {
    let sa = user("system:serviceaccount:x:y", &["system:serviceaccounts"]);
    for (old, new) in [
        (None, Some("true")),
        (Some("true"), Some("true")),
        (None, None),
    ] {
        let d = update(&sa, Kind::Claim, &meta("d", "n", old), &meta("d", "n", new));
        assert!(d.allowed);
        assert_eq!(d.row, "delete-protection-unchanged");
    }
}

#[test]
fn a_claim_on_a_protected_volume_that_deletes_its_data_is_not_deleted() {
    let claim = meta("data", "shop", None);
    let mut pv = crate::model::Pv {
        metadata: meta("pv-data", "", Some("true")),
        ..Default::default()
    };
    pv.spec.persistent_volume_reclaim_policy = Some("Delete".into());
    let behind = |pv, ns| Behind {
        volume: pv,
        namespace: ns,
    };
    let d = claim_behind(&claim, &behind(Fact::Found(&pv), Fact::Missing)).expect("refused");
    assert_eq!(
        (d.allowed, d.row),
        (false, "delete-protection-volume-behind")
    );
    assert!(d.message.unwrap().contains("Retain"));
    // Retain keeps the data whatever happens to the claim.
    let mut retained = pv.clone();
    retained.spec.persistent_volume_reclaim_policy = Some("Retain".into());
    assert!(claim_behind(&claim, &behind(Fact::Found(&retained), Fact::Missing)).is_none());
    // A protected namespace protects its claims.
    let ns = meta("shop", "", Some("true"));
    let d = claim_behind(&claim, &behind(Fact::Missing, Fact::Found(&ns))).expect("refused");
    assert_eq!(d.row, "delete-protection-namespace-behind");
    // Unsure is protected.
    let e = crate::rules::decision::ReadError::Api {
        what: "pv".into(),
        message: "timeout".into(),
    };
    let d = claim_behind(&claim, &behind(Fact::Unknown(e), Fact::Missing)).expect("refused");
    assert_eq!((d.allowed, d.code), (false, 500));
    assert!(claim_behind(&claim, &behind(Fact::Missing, Fact::Missing)).is_none());
}
