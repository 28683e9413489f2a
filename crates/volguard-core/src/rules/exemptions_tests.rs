//! Unit tests of `src/rules/exemptions.rs`.

use super::*;
use crate::model::testing;

#[test]
fn an_identity_is_exempted_from_one_rule_only_and_still_told() {
    let ex = Exemptions(vec![
        "force-delete=system:serviceaccount:velero:velero"
            .parse()
            .expect("user"),
        "finalizer-removal=group:gitops".parse().expect("group"),
    ]);
    let velero = testing::user("system:serviceaccount:velero:velero", &[]);
    let d = ex.apply(
        Rule::ForceDelete,
        &velero,
        Decision::deny("force-delete-running-pod", "refused"),
    );
    assert!(d.allowed && d.exempted && d.warned);
    assert_eq!(d.outcome(), "exempted");
    assert!(
        d.warnings[0].contains("exempted from force-delete") && d.warnings[0].contains("refused")
    );
    // Not from another rule.
    let other = ex.apply(Rule::FinalizerRemoval, &velero, Decision::deny("x", "m"));
    assert!(!other.allowed);
    let argo = testing::user("system:serviceaccount:argocd:argocd", &["gitops"]);
    assert!(
        ex.apply(Rule::FinalizerRemoval, &argo, Decision::deny("x", "m"))
            .allowed
    );
    // Malformed stays refused; an allowed decision is untouched.
    assert!(
        !ex.apply(Rule::ForceDelete, &velero, Decision::bad_request("m"))
            .allowed
    );
    assert!(
        !ex.apply(Rule::ForceDelete, &velero, Decision::allow("ok"))
            .exempted
    );
}

#[test]
fn bad_entries_and_rules_that_cannot_be_exempted_are_named() {
    assert_eq!(
        "force-delete".parse::<Exemption>(),
        Err(ExemptionError::Entry("force-delete".into()))
    );
    assert_eq!(
        "proof=system:serviceaccount:x:y".parse::<Exemption>(),
        Err(ExemptionError::NotExemptable("proof".into()))
    );
    assert_eq!(
        "delete-protection=alice".parse::<Exemption>(),
        Err(ExemptionError::NotExemptable("delete-protection".into()))
    );
    assert_eq!(
        "nope=alice".parse::<Exemption>(),
        Err(ExemptionError::NotExemptable("nope".into()))
    );
}

/// rules.md §2g: a group that names everyone of a kind is refused as an exemption, with a clear
/// error (the chart's schema refuses the same).
#[test]
fn an_exemption_for_everyone_of_a_kind_is_refused() {
    for everyone in [
        "group:system:authenticated",
        "group:system:unauthenticated",
        "group:system:serviceaccounts",
        "group:system:serviceaccounts:velero",
    ] {
        let e = format!("force-delete={everyone}")
            .parse::<Exemption>()
            .expect_err(everyone);
        assert!(matches!(e, ExemptionError::Everyone(_)), "{everyone}: {e}");
        assert!(e.to_string().contains("name the service account"), "{e}");
    }
    for named in [
        "group:backup",
        "system:serviceaccount:velero:velero",
        "group:system:masters",
    ] {
        assert!(
            format!("force-delete={named}").parse::<Exemption>().is_ok(),
            "{named}"
        );
    }
}
