//! Unit tests of `src/registration/policies.rs`: the table against the rule table, and the
//! committed manifest against the table.

use super::*;
use crate::registration::{conditions, webhooks};

#[test]
fn each_policy_has_its_own_name_and_its_rules_failure_policy() {
    let mut seen = std::collections::HashSet::new();
    for p in POLICIES {
        assert!(seen.insert(p.name()), "{} twice", p.name());
        let o = p.object();
        let want = match p.rule().failure_policy() {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        };
        assert_eq!(o["spec"]["failurePolicy"], want, "{}", p.name());
        // A mutating rule becomes a MutatingAdmissionPolicy, a validating one a validating policy.
        let kind = o["kind"].as_str().unwrap_or_default();
        assert_eq!(
            kind.starts_with("Mutating"),
            p.rule().mutating(),
            "{}: {kind}",
            p.name()
        );
        assert_eq!(p.binding(&["Deny"])["spec"]["policyName"], p.name());
    }
}

#[test]
fn a_policy_judges_what_its_webhook_entry_judges() {
    // Each condition of a policy is a condition of its rule's webhook entries (a policy may
    // leave some out, and the claim-metadata policy judges the lock, not the owners).
    for p in POLICIES {
        for c in p.match_conditions {
            if c.name == conditions::CHANGES_THE_LOCK.name {
                continue;
            }
            let found = webhooks::entries()
                .filter(|e| e.rule == p.rule())
                .flat_map(|e| e.conditions.iter())
                .any(|w| w.name == c.name && w.expression(NAMESPACE) == c.expression(NAMESPACE));
            assert!(
                found,
                "{}: no webhook condition {} like it",
                p.name(),
                c.name
            );
        }
    }
}

#[test]
fn the_committed_manifest_is_the_tables() {
    for (part, have, file) in [
        (
            Part::Policies,
            include_str!("../../manifests/base/policies.yaml"),
            "policies.yaml",
        ),
        (
            Part::Bindings,
            include_str!("../../manifests/base/policy-bindings.yaml"),
            "policy-bindings.yaml",
        ),
    ] {
        let want = render(part).expect("render");
        assert!(
            have == want,
            "manifests/base/{file} differs from the rule table's policies: run `make manifests`"
        );
    }
}
