//! The webhook registrations in manifests/base/webhooks.yaml agree with the code: every entry
//! posts to a rule's own path, every rule has an entry, and each entry's failure policy is the
//! rule's (force-delete is the one documented exception: registered Ignore so PodGC and the
//! kubelet are never blocked while volguard is down, but a late answer from volguard denies).

use serde_json::Value;
use std::collections::BTreeMap;
use volguard::rules::rule::{FailurePolicy, Rule};

fn entries() -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/manifests/base/webhooks.yaml"
    ))
    .expect("webhooks.yaml");
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: Value = serde::Deserialize::deserialize(doc).expect("yaml");
        out.extend(v["webhooks"].as_array().cloned().unwrap_or_default());
    }
    out
}

#[test]
fn every_entry_has_a_rule_path_and_every_rule_an_entry() {
    let mut by_rule: BTreeMap<Rule, Vec<String>> = BTreeMap::new();
    for e in entries() {
        let name = e["name"].as_str().expect("name").to_string();
        let path = e["clientConfig"]["service"]["path"].as_str().expect("path");
        let rule = Rule::ALL
            .into_iter()
            .find(|r| r.path() == path)
            .unwrap_or_else(|| panic!("{name}: path {path} names no rule"));
        let policy = e["failurePolicy"].as_str().expect("failurePolicy");
        let want = match rule.failure_policy() {
            FailurePolicy::Fail if rule == Rule::ForceDelete => "Ignore",
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        };
        assert_eq!(policy, want, "{name}: failurePolicy");
        assert_eq!(
            e["admissionReviewVersions"],
            serde_json::json!(["v1"]),
            "{name}"
        );
        assert!(
            e["timeoutSeconds"].as_u64().is_some_and(|t| t <= 5),
            "{name}"
        );
        by_rule.entry(rule).or_default().push(name);
    }
    for r in Rule::ALL {
        assert!(by_rule.contains_key(&r), "no webhook entry for rule {r}");
    }
    // pods/eviction is registered (SPEC 2d: evictions skip pod DELETE webhooks).
    let eviction = entries()
        .into_iter()
        .find(|e| e["name"] == "eviction.volguard.io")
        .expect("eviction entry");
    assert_eq!(eviction["rules"][0]["resources"][0], "pods/eviction");
    assert_eq!(eviction["rules"][0]["operations"][0], "CREATE");
}
