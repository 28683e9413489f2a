//! Unit tests of `src/registration/policies.rs`: the table against the rule table, and the
//! committed manifest against the table.

use super::*;

#[test]
fn each_policy_names_a_rule_once_with_its_failure_policy() {
    let mut seen = std::collections::HashSet::new();
    for p in POLICIES {
        assert!(seen.insert(p.rule), "{} twice", p.rule.name());
        let o = p.object();
        let want = match p.rule.failure_policy() {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        };
        assert_eq!(o["spec"]["failurePolicy"], want, "{}", p.name());
        // A mutating rule becomes a MutatingAdmissionPolicy, a validating one a validating policy.
        let kind = o["kind"].as_str().unwrap_or_default();
        assert_eq!(
            kind.starts_with("Mutating"),
            p.rule.mutating(),
            "{}: {kind}",
            p.name()
        );
        assert_eq!(p.binding(&["Deny"])["spec"]["policyName"], p.name());
    }
}

#[test]
fn a_policy_judges_what_its_webhook_entry_judges() {
    // Each condition of a policy is the condition of that name of its rule's webhook entry (a
    // policy may leave some out: the claim-metadata policy judges the lock, not the owners).
    let text = include_str!("../../manifests/base/webhooks.yaml");
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    let mut conditions = std::collections::HashMap::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
        for w in v["webhooks"].as_array().into_iter().flatten() {
            let entry = w["name"].as_str().unwrap_or_default().to_string();
            for c in w["matchConditions"].as_array().into_iter().flatten() {
                let name = c["name"].as_str().unwrap_or_default().to_string();
                let expr = squash(c["expression"].as_str().unwrap_or_default());
                conditions.insert((entry.clone(), name), expr);
            }
        }
    }
    for p in POLICIES {
        let entries = crate::rules::rule::TABLE[p.rule as usize].webhooks;
        for (name, expr) in p.match_conditions {
            let found: Vec<&String> = entries
                .iter()
                .filter_map(|e| conditions.get(&(e.to_string(), name.to_string())))
                .collect();
            if *name == "changes-the-lock" {
                // Narrower than the webhook's `changes-the-lock-or-a-pod-owner`.
                continue;
            }
            assert!(
                !found.is_empty(),
                "{}: no webhook condition {name}",
                p.name()
            );
            assert!(
                found.iter().all(|w| **w == squash(expr)),
                "{}: condition {name} differs from the webhook's",
                p.name()
            );
        }
    }
}

#[test]
fn the_committed_manifest_is_the_tables() {
    for (part, have, file) in [
        (
            Part::Policies,
            include_str!("../../manifests/policies/policies.yaml"),
            "policies.yaml",
        ),
        (
            Part::Bindings,
            include_str!("../../manifests/policies/bindings.yaml"),
            "bindings.yaml",
        ),
    ] {
        let want = render(part).expect("render");
        assert!(
            have == want,
            "manifests/policies/{file} differs from the rule table's policies: run `make manifests`"
        );
    }
}
