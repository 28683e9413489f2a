//! Unit tests of `src/registration/drift.rs`, on the registration `make manifests` writes.

use super::*;
use crate::registration::webhooks::{self, FailureMode, Flavour};

/// The kustomize base's entries as the apiserver would hold them, caBundle filled; with
/// `policies` false, each entry's failure policy as registered without the CEL policies (the base
/// ships them).
fn rendered(policies: bool) -> Vec<Value> {
    let yaml = webhooks::render(Flavour::Kustomize);
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let v: Value = serde::Deserialize::deserialize(doc).expect("yaml");
        for mut w in v["webhooks"].as_array().cloned().unwrap_or_default() {
            w["clientConfig"]["caBundle"] = json!("Q0E=");
            if let Some(e) = webhooks::entries().find(|e| w["name"] == e.name) {
                w["failurePolicy"] = json!(e.failure_policy(&FailureMode::policies(policies)));
            }
            out.push(w);
        }
    }
    out
}

fn live() -> Vec<Value> {
    rendered(false)
}

fn expected(policies: bool) -> Vec<(&'static str, Value)> {
    webhooks::expected(
        "volguard-system",
        &FailureMode::policies(policies),
        &Default::default(),
        true,
    )
}

const RWO: &[&str] = &[
    "rwo-single-node.volguard.io",
    "rwo-placement-hint.volguard.io",
];

#[test]
fn the_generated_registration_has_no_drift() {
    assert_eq!(compare(&live(), &expected(false), RWO), vec![]);
    // As the base ships it, beside its policies (the controller runs `--policies-installed`).
    let base = rendered(true);
    assert_eq!(compare(&base, &expected(true), RWO), vec![]);
    assert!(
        base.iter()
            .any(|w| w["name"] == "force-delete.volguard.io" && w["failurePolicy"] == "Ignore")
    );
}

#[test]
fn erased_conditions_are_drift_and_are_repaired() {
    // What cainjector before cert-manager 1.12 did: every matchCondition gone.
    let mut l = live();
    for w in &mut l {
        w.as_object_mut().expect("entry").remove("matchConditions");
    }
    let d = compare(&l, &expected(false), RWO);
    let erased: Vec<&str> = d
        .iter()
        .filter(|d| d.field == "matchConditions")
        .map(|d| d.webhook.as_str())
        .collect();
    assert!(erased.contains(&"force-delete.volguard.io"), "{d:?}");
    assert!(!erased.contains(&"node-delete.volguard.io"), "it has none");
    // One group per difference, short enough for an Event (1024 characters).
    let line = summary(&d);
    assert_eq!(
        line.matches("matchConditions: none (erased").count(),
        1,
        "{line}"
    );
    assert!(
        line.contains("force-delete.volguard.io, eviction.volguard.io"),
        "{line}"
    );
    assert!(line.len() <= 1024);
    let config = json!({"webhooks": l});
    let fixed = repaired(&config, &expected(false), &d, true).expect("something to repair");
    let after: Vec<Value> = fixed["webhooks"].as_array().cloned().unwrap_or_default();
    assert_eq!(compare(&after, &expected(false), RWO), vec![]);
    assert_eq!(repaired(&fixed, &expected(false), &[], true), None);
}

#[test]
fn a_weakened_failure_policy_is_drift_unless_the_policies_hold_the_rule() {
    let mut l = live();
    for w in &mut l {
        if w["name"] == "force-delete.volguard.io" {
            w["failurePolicy"] = json!("Ignore");
        }
    }
    let d = compare(&l, &expected(false), RWO);
    assert_eq!(d.len(), 1, "{d:?}");
    // Every entry the policies hold may be Ignore where they are installed.
    for w in &mut l {
        if webhooks::entries().any(|e| e.name == w["name"] && e.ignore_with_policies) {
            w["failurePolicy"] = json!("Ignore");
        }
    }
    assert_eq!(
        (d[0].field, d[0].detail.as_str()),
        ("failurePolicy", "Ignore (volguard's: Fail)")
    );
    assert_eq!(compare(&l, &expected(true), RWO), vec![]);
}

#[test]
fn missing_entries_ca_paths_and_rules() {
    let mut l = live();
    l.retain(|w| w["name"] != "finalizer-guard.volguard.io");
    for w in &mut l {
        if w["name"] == "pod-status.volguard.io" {
            w["clientConfig"]["caBundle"] = json!("");
        }
        if w["name"] == "eviction.volguard.io" {
            w["clientConfig"] =
                json!({"url": "https://10.0.0.1:8443/validate/pod-status", "caBundle": "Q0E="});
        }
        if w["name"] == "pvc-binding.volguard.io" {
            w["rules"][0]["operations"] = json!(["CREATE"]);
        }
    }
    let d = compare(&l, &expected(false), RWO);
    let got: Vec<(&str, &str)> = d.iter().map(|d| (d.webhook.as_str(), d.field)).collect();
    assert_eq!(
        got,
        vec![
            ("pvc-binding.volguard.io", "rules"),
            ("finalizer-guard.volguard.io", "missing"),
            ("eviction.volguard.io", "path"),
            ("pod-status.volguard.io", "caBundle"),
        ]
    );
    // Only the rules are put back; a missing entry, or a CA volguard was not told, is reported,
    // not invented.
    let fixed = repaired(&json!({"webhooks": l}), &expected(false), &d, true).expect("repair");
    let after: Vec<Value> = fixed["webhooks"].as_array().cloned().unwrap_or_default();
    assert_eq!(compare(&after, &expected(false), RWO).len(), 3);
}

/// The apiserver matches a request against each (group, version, resource, operation) the items
/// name: items reordered, split or merged send the same, and are no drift; one operation more or
/// less is.
#[test]
fn rules_are_compared_by_what_they_send_not_how_they_are_grouped() {
    let mut l = live();
    for w in &mut l {
        if w["name"] == "finalizer-guard.volguard.io" {
            let item = w["rules"][0].clone();
            let split: Vec<Value> = item["resources"]
                .as_array()
                .expect("resources")
                .iter()
                .rev()
                .map(|r| {
                    let mut one = item.clone();
                    one["resources"] = json!([r]);
                    one
                })
                .collect();
            w["rules"] = json!(split);
        }
        if w["name"] == "pvc-binding.volguard.io" {
            w["rules"][0]["operations"] = json!(["UPDATE", "CREATE"]);
        }
    }
    assert_eq!(compare(&l, &expected(false), RWO), vec![]);
    for w in &mut l {
        if w["name"] == "finalizer-guard.volguard.io" {
            w["rules"][0]["operations"] = json!(["UPDATE", "DELETE"]);
        }
    }
    let d = compare(&l, &expected(false), RWO);
    let got: Vec<(&str, &str)> = d.iter().map(|d| (d.webhook.as_str(), d.field)).collect();
    assert_eq!(got, vec![("finalizer-guard.volguard.io", "rules")]);
}

#[test]
fn erased_conditions_are_put_back_only_with_repair() {
    let mut l = live();
    for w in &mut l {
        w.as_object_mut().expect("entry").remove("matchConditions");
    }
    let d = compare(&l, &expected(false), RWO);
    assert!(!d.is_empty());
    assert_eq!(
        repaired(&json!({"webhooks": l}), &expected(false), &d, false),
        None
    );
}

/// The serving certificate's CA as cert-manager writes it into the Secret's `ca.crt`.
const CA_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

#[test]
fn the_ca_is_filled_and_kept_without_repair() {
    let mut want = expected(false);
    with_ca(&mut want, CA_PEM);
    let ca = want[0].1["caBundle"]
        .as_str()
        .expect("caBundle")
        .to_string();
    use base64::Engine;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&ca)
            .expect("base64"),
        CA_PEM,
        "the apiserver stores caBundle as base64 of the PEM"
    );
    // A fresh install: no annotation, nothing injected, every entry empty.
    let mut l = live();
    for w in &mut l {
        w["clientConfig"]["caBundle"] = json!("");
    }
    let d = compare(&l, &want, RWO);
    assert!(
        !d.is_empty() && d.iter().all(|d| d.field == "caBundle"),
        "{d:?}"
    );
    // Filled with --repair-registration off: the CA is what makes volguard reachable at all.
    let fixed = repaired(&json!({"webhooks": l}), &want, &d, false).expect("filled");
    let after: Vec<Value> = fixed["webhooks"].as_array().cloned().unwrap_or_default();
    assert!(
        after
            .iter()
            .all(|w| w["clientConfig"]["caBundle"] == ca.as_str())
    );
    assert_eq!(compare(&after, &want, RWO), vec![]);
    assert_eq!(repaired(&fixed, &want, &[], false), None);
    // A stale or foreign CA (the CA reissued, someone else's injection) is drift and replaced;
    // the rest of the entry (service, path) is left as it was.
    let mut stale = after.clone();
    stale[0]["clientConfig"]["caBundle"] = json!("b3RoZXI=");
    let d = compare(&stale, &want, RWO);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].detail.contains("not the CA"), "{}", d[0].detail);
    assert!(!d[0].repairable(), "not --repair-registration's field");
    let fixed = repaired(&json!({"webhooks": stale}), &want, &d, false).expect("replaced");
    assert_eq!(fixed["webhooks"], json!(after));
}

#[test]
fn an_unknown_ca_is_reported_not_invented() {
    // Without --ca-secret (the chart's tls.caBundle owns it), or before cert-manager issued:
    // an empty caBundle is drift, any non-empty one is left alone, and nothing is written.
    let mut l = live();
    l[0]["clientConfig"]["caBundle"] = json!("");
    l[1]["clientConfig"]["caBundle"] = json!("b3RoZXI=");
    let d = compare(&l, &expected(false), RWO);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].field, "caBundle");
    assert_eq!(
        repaired(&json!({"webhooks": l}), &expected(false), &d, true),
        None
    );
}

#[test]
fn the_generated_registrations_leave_cainjector_nothing_to_do() {
    // cainjector before cert-manager 1.12 rewrote an annotated configuration without its
    // matchConditions at each injection: neither rendering may ask it to.
    for f in [Flavour::Kustomize, Flavour::Chart] {
        let yaml = webhooks::render(f);
        assert!(!yaml.contains("cert-manager.io/inject-ca-from"), "{f:?}");
    }
    for p in [
        "manifests/base/webhooks.yaml",
        "charts/volguard/templates/webhooks.yaml",
        "charts/volguard/templates/_helpers.tpl",
    ] {
        let text =
            std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(p))
                .expect(p);
        assert!(!text.contains("cert-manager.io/inject-ca-from:"), "{p}");
    }
}

#[test]
fn in_warn_only_the_rules_that_cannot_warn_keep_fail_entries() {
    // A rule in warn never blocks, not even with its conditions erased and volguard down: every
    // entry of a warnable rule is Ignore. What stays Fail is delete-protection's and proof's
    // entries (they cannot warn: a miss loses data or forges a proof), narrowed by conditions.
    let warn = FailureMode {
        enforcement: crate::rules::enforcement::Enforcement::parse("warn").expect("warn"),
        ..FailureMode::policies(false)
    };
    let mut fail: Vec<&str> = webhooks::entries()
        .filter(|e| e.failure_policy(&warn) == "Fail")
        .map(|e| e.rule.name())
        .collect();
    fail.sort_unstable();
    fail.dedup();
    assert_eq!(fail, vec!["delete-protection", "proof"]);
    for e in webhooks::entries() {
        if e.rule.def().warnable {
            assert_eq!(e.failure_policy(&warn), "Ignore", "{}", e.name);
        }
        // A Fail entry is narrowed by conditions, or meets only volguard's own objects
        // (fence-record: NodeFences), so nobody else's writes wait on volguard.
        if e.failure_policy(&warn) == "Fail" {
            assert!(
                !e.conditions.is_empty()
                    || e.resource_rules().iter().all(|r| r.group == "volguard.io"),
                "{}: Fail with no condition",
                e.name
            );
        }
    }
}

#[test]
fn the_rwo_entries_may_be_left_out_together_only() {
    let mut l = live();
    l.retain(|w| !RWO.contains(&w["name"].as_str().unwrap_or_default()));
    assert_eq!(compare(&l, &expected(false), RWO), vec![]);
    let mut l = live();
    l.retain(|w| w["name"] != "rwo-placement-hint.volguard.io");
    let d = compare(&l, &expected(false), RWO);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].field, "missing");
}

/// The validating configuration's entries (where the warnable rules' Fail entries are).
fn validating() -> &'static [webhooks::Entry] {
    webhooks::CONFIGURATIONS
        .iter()
        .find(|(kind, _, _)| *kind == "ValidatingWebhookConfiguration")
        .map(|(_, _, e)| *e)
        .expect("validating")
}

#[test]
fn a_configuration_rendered_for_another_mode_is_left_alone() {
    let deny = FailureMode::policies(true);
    let warn = FailureMode {
        enforcement: crate::rules::enforcement::Enforcement::parse("warn").expect("warn"),
        ..deny
    };
    let v = validating();
    let name = "volguard-validating";
    let base = "enforcement=deny; policies=true; forceIgnore=false";
    // No annotation (a registration older than it) or the controller's own mode: checked.
    assert_eq!(rendered_for(name, None, &deny, v), Ok(None));
    assert_eq!(rendered_for(name, Some(base), &deny, v), Ok(None));
    // A new chart rendered deny while the old controller still runs warn, and the reverse:
    // the old controller leaves it, and says so.
    let left = rendered_for(name, Some(base), &warn, v).expect_err("left alone");
    assert_eq!((left.webhook.as_str(), left.field), (name, "failureMode"));
    assert!(left.detail.contains(base), "{}", left.detail);
    assert!(!left.repairable());
    let warned = "enforcement=warn; policies=true; forceIgnore=false";
    assert!(rendered_for(name, Some(warned), &deny, v).is_err());
    assert_eq!(rendered_for(name, Some(warned), &warn, v), Ok(None));
    // Another spelling of the same failure policies is the same mode: a rule in warn whose
    // entries the policies already make Ignore changes nothing registered.
    let same = "enforcement=; policies=true; forceIgnore=false";
    assert_eq!(rendered_for(name, Some(same), &deny, v), Ok(None));
    // Unreadable: checked against the controller's flags, and the annotation reported.
    for bad in [
        "enforcement=deny; policies=true",
        "enforcement=sometimes; policies=true; forceIgnore=false",
        "enforcement=deny; policies=yes; forceIgnore=false",
        "enforcement=deny; policies=true; forceIgnore=false; color=blue",
        "garbage",
    ] {
        let note = rendered_for(name, Some(bad), &deny, v)
            .expect("checked")
            .expect("reported");
        assert_eq!(note.field, "failureMode", "{bad}");
        assert!(note.detail.contains("unreadable"), "{bad}: {}", note.detail);
    }
}

#[test]
fn the_generated_registrations_carry_the_mode_they_were_rendered_for() {
    let yaml = webhooks::render(Flavour::Kustomize);
    let mut n = 0;
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let v: Value = serde::Deserialize::deserialize(doc).expect("yaml");
        let a = v["metadata"]["annotations"][webhooks::FAILURE_MODE_ANNOTATION]
            .as_str()
            .expect("annotated");
        // The base: what its controller's flags say (--policies-installed, deny).
        let mode = FailureMode::from_annotation(a).expect("readable");
        assert!(mode.policies && !mode.force_ignore && !mode.enforcement.any_warn());
        n += 1;
    }
    assert_eq!(n, 2);
    let chart = webhooks::render(Flavour::Chart);
    assert_eq!(
        chart.matches("volguard.configurationAnnotations").count(),
        2
    );
}
