//! Unit tests of `src/registration/webhooks.rs`: the table against the rule table, the YAML it
//! renders against the table, and the committed files against the YAML.

use super::*;
use std::collections::BTreeMap;

#[test]
fn every_rule_has_its_entries_and_every_entry_its_rule() {
    for d in TABLE {
        assert!(
            entries().any(|e| e.rule == d.rule),
            "rule {} has no webhook entry",
            d.name
        );
    }
    // The registration's entries, each with its rule: an entry dropped or moved is a change of
    // what reaches volguard (a rule's other entries may still send its every request, so nothing
    // else would notice), made here on purpose.
    let have: Vec<(&str, Rule)> = entries().map(|e| (e.name, e.rule)).collect();
    assert_eq!(
        have,
        [
            ("pvc-finalizer.volguard.io", Rule::PvcFinalizer),
            ("pv-finalizer.volguard.io", Rule::PvFinalizer),
            ("rwo-placement-hint.volguard.io", Rule::RwoPlacementHint),
            ("confirmation-stamp.volguard.io", Rule::ConfirmationStamp),
            ("pod-create.volguard.io", Rule::PodOnTerminatingClaim),
            ("rwo-single-node.volguard.io", Rule::RwoSingleNode),
            ("pvc-binding.volguard.io", Rule::BindingToTerminatingVolume),
            ("finalizer-guard.volguard.io", Rule::FinalizerRemoval),
            ("claim-metadata.volguard.io", Rule::ClaimMetadata),
            ("force-delete.volguard.io", Rule::ForceDelete),
            ("eviction.volguard.io", Rule::ForceDelete),
            ("pod-status.volguard.io", Rule::PodStatus),
            ("node-delete.volguard.io", Rule::NodeDelete),
            ("delete-protection.volguard.io", Rule::DeleteProtection),
            ("volume-reclaim.volguard.io", Rule::DeleteProtection),
            ("claim-delete.volguard.io", Rule::DeleteProtection),
            ("namespace-delete.volguard.io", Rule::DeleteProtection),
            ("out-of-service-taint.volguard.io", Rule::OutOfServiceTaint),
            ("proof.volguard.io", Rule::Proof),
            ("fence-record.volguard.io", Rule::Proof),
        ]
    );
    for (kind, _, list) in CONFIGURATIONS {
        for e in *list {
            assert_eq!(
                e.rule.mutating(),
                kind.starts_with("Mutating"),
                "{} in {kind}",
                e.name
            );
        }
    }
}

#[test]
fn the_rendered_yaml_holds_what_the_table_says() {
    // Folding (`>-`), quoting and the namespace token, read back as the apiserver would.
    let yaml = render(Flavour::Kustomize);
    let mut live: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
        for w in v["webhooks"].as_array().expect("webhooks") {
            let name = w["name"].as_str().expect("name").to_string();
            let conditions = w
                .get("matchConditions")
                .cloned()
                .unwrap_or(serde_json::json!([]));
            live.insert(
                name,
                serde_json::json!({
                    "failurePolicy": w["failurePolicy"],
                    "path": w["clientConfig"]["service"]["path"],
                    "rules": w["rules"],
                    "matchConditions": conditions,
                }),
            );
        }
    }
    // The base installs the policies beside the registrations.
    let want = expected(
        super::super::policies::NAMESPACE,
        &FailureMode::policies(true),
        &AllowList::default(),
        true,
    );
    assert_eq!(live.len(), want.len());
    for (name, want) in want {
        assert_eq!(live.get(name), Some(&want), "{name}");
    }
    assert!(!yaml.contains(NAMESPACE_TOKEN));
}

#[test]
fn the_allow_list_is_one_more_condition_of_the_force_delete_entries_only() {
    let allow = AllowList {
        users: vec!["fencer".into(), "o'brien\\".into()],
        groups: vec!["ops".into()],
    };
    let plain = expected("vg", &FailureMode::default(), &AllowList::default(), true);
    let with = expected("vg", &FailureMode::default(), &allow, true);
    for ((name, p), (_, w)) in plain.iter().zip(&with) {
        let (p, w) = (&p["matchConditions"], &w["matchConditions"]);
        let entry = entries().find(|e| e.name == *name).expect("entry");
        if entry.rule == Rule::ForceDelete {
            let w = w.as_array().expect("conditions");
            assert_eq!(
                &w[..w.len() - 1],
                p.as_array().expect("conditions").as_slice()
            );
            assert_eq!(w[w.len() - 1]["name"], "not-allow-listed", "{name}");
            assert_eq!(
                w[w.len() - 1]["expression"],
                "!(request.userInfo.username in ['fencer', 'o\\'brien\\\\'] || \
                 request.userInfo.groups.exists(g, g in ['ops']))",
                "{name}"
            );
        } else {
            assert_eq!(
                p, w,
                "{name}: only the force-delete rule allows the allow-list"
            );
        }
    }
    assert_eq!(
        entries().filter(|e| e.skips_allow_list()).count(),
        2,
        "a pod's DELETE and its Eviction"
    );
    // One of the two lists is enough; neither: nothing to skip.
    let users_only = AllowList {
        users: vec!["u".into()],
        groups: vec![],
    };
    assert!(users_only.condition().is_some());
    assert_eq!(AllowList::default().condition(), None);
}

#[test]
fn the_chart_keeps_what_only_the_chart_decides() {
    let chart = render(Flavour::Chart);
    assert!(
        !chart.contains("volguard-system"),
        "the chart names its release namespace"
    );
    assert!(chart.contains(
        "failurePolicy: {{ include \"volguard.failurePolicy\" (dict \"root\" . \"rule\" \"force-delete\" \"warnable\" true \"withPolicies\" true) }}"
    ));
    assert_eq!(
        chart
            .matches("{{- if ne .Values.rwoGuard \"off\" }}")
            .count(),
        entries().filter(|e| e.rwo_guard).count()
    );
}

#[test]
fn the_committed_files_are_the_tables() {
    for (flavour, have, file) in [
        (
            Flavour::Kustomize,
            include_str!("../../manifests/base/webhooks.yaml"),
            "manifests/base/webhooks.yaml",
        ),
        (
            Flavour::Chart,
            include_str!("../../charts/volguard/templates/webhooks.yaml"),
            "charts/volguard/templates/webhooks.yaml",
        ),
    ] {
        assert!(
            have == render(flavour),
            "{file} differs from the registration table (src/registration/webhooks.rs): run `make manifests`"
        );
    }
}

#[test]
fn a_rule_in_warn_and_forced_ignore_register_ignore() {
    use crate::rules::enforcement::Enforcement;
    let policy = |mode: &FailureMode, name: &str| {
        entries()
            .find(|e| e.name == name)
            .map(|e| e.failure_policy(mode))
            .unwrap_or_default()
    };
    let deny = FailureMode::default();
    assert_eq!(policy(&deny, "finalizer-guard.volguard.io"), "Fail");
    let warn = FailureMode {
        enforcement: Enforcement::parse("warn").expect("warn"),
        ..deny
    };
    // Every entry of a warnable rule is Ignore; a proof and deletion protection stay Fail.
    for e in entries() {
        let want = if e.rule.def().warnable || e.failure_policy(&deny) == "Ignore" {
            "Ignore"
        } else {
            "Fail"
        };
        assert_eq!(e.failure_policy(&warn), want, "{}", e.name);
    }
    assert_eq!(policy(&warn, "proof.volguard.io"), "Fail");
    let one = FailureMode {
        enforcement: Enforcement::parse("finalizer-removal=warn").expect("one rule"),
        ..deny
    };
    assert_eq!(policy(&one, "finalizer-guard.volguard.io"), "Ignore");
    assert_eq!(policy(&one, "eviction.volguard.io"), "Fail");
    let forced = FailureMode {
        force_ignore: true,
        ..deny
    };
    assert!(entries().all(|e| e.failure_policy(&forced) == "Ignore"));
}

/// Each rule's entries send every request its row names (what routing hands it) and nothing
/// else; `rules[]` is derived from those requests' doors, so what reaches volguard is what it
/// judges.
#[test]
fn a_rules_entries_send_its_row_and_nothing_else() {
    for d in TABLE {
        let sent: Vec<On> = entries()
            .filter(|e| e.rule == d.rule)
            .flat_map(|e| e.requests().iter().copied())
            .collect();
        for on in &sent {
            assert!(d.on.contains(on), "{}: an entry sends {on:?}", d.name);
        }
        for on in d.on {
            assert!(sent.contains(on), "{}: no entry sends {on:?}", d.name);
        }
    }
    // The proof's two entries split its row: NodeFences go to the one without conditions.
    assert_eq!(
        PROOF.requests().len() + FENCE_RECORD.requests().len(),
        Rule::Proof.def().on.len()
    );
}
