//! Unit tests of `src/rules/placement.rs`: the hint lands in every affinity shape, once.

use super::*;

fn pod(affinity: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-new", "namespace": "ns"},
        "spec": {"affinity": affinity, "containers": [{"name": "c"}]}
    }))
    .expect("pod")
}

fn apply(p: &Pod, d: &Decision) -> Value {
    let mut v = serde_json::to_value(p).expect("pod json");
    if let Some(patch) = &d.patch {
        json_patch::patch(&mut v, &patch.ops()).expect("patch applies");
    }
    v
}

/// The pod's preferred node affinity terms, after the patch.
fn preferred_terms(after: &Value) -> Vec<Value> {
    after["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn hint_is_appended_to_every_shape_and_keeps_the_pods_own_terms() {
    let own = json!({"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}});
    let required = json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "Exists"}]}]});
    for affinity in [
        Value::Null,
        json!({"podAntiAffinity": {}}),
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}),
        json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [own]}}),
    ] {
        let p = pod(affinity.clone());
        let d = placement_hint(&p, &["n1"]);
        assert_eq!((d.allowed, d.row), (true, "prefer-lock-node"), "{affinity}");
        let after = apply(&p, &d);
        let preferred = preferred_terms(&after);
        assert!(
            preferred.contains(&terms(&["n1"])[0]),
            "{affinity}: {after}"
        );
        // Never required, and nothing of the pod's own lost.
        assert!(
            after["spec"]["affinity"]["nodeAffinity"]
                ["requiredDuringSchedulingIgnoredDuringExecution"]
                .get("nodeSelectorTerms")
                .is_none_or(|_| affinity["nodeAffinity"]
                    ["requiredDuringSchedulingIgnoredDuringExecution"]
                    == required),
            "{after}"
        );
        if affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].is_array() {
            assert_eq!(preferred.len(), 2, "{after}");
        }
    }
}

#[test]
fn no_hint_when_placed_free_or_already_hinted() {
    let p = pod(Value::Null);
    assert_eq!(placement_hint(&p, &[]).row, "no-held-claim");
    let mut placed = p.clone();
    placed.spec.node_name = Some("n2".into());
    assert_eq!(placement_hint(&placed, &["n1"]).row, "placed");
    let hinted = pod(
        json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms(&["n1"])}}),
    );
    let d = placement_hint(&hinted, &["n1"]);
    assert_eq!((d.row, d.patch.is_none()), ("hint-present", true));
}

#[test]
fn each_node_gets_its_own_term_by_name_and_a_reinvocation_adds_only_the_missing() {
    // The lock names the Node object: the term matches `metadata.name`, one value per term (the
    // API refuses more in a field requirement), whatever the node's hostname label says.
    let t = &terms(&["n1"])[0]["preference"];
    assert_eq!(
        t,
        &json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]})
    );
    let own = json!({"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}});
    for affinity in [
        Value::Null,
        json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [own.clone()]}}),
    ] {
        let p = pod(affinity.clone());
        let d = placement_hint(&p, &["n1", "n2"]);
        let after = apply(&p, &d);
        let preferred = preferred_terms(&after);
        for t in terms(&["n1", "n2"]) {
            assert!(preferred.contains(&t), "{affinity}: {after}");
        }
        assert_eq!(
            preferred.len(),
            2 + usize::from(!affinity.is_null()),
            "{after}"
        );
    }
    // A reinvocation after another mutation kept one of our terms: only the other is added.
    let half = pod(
        json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [terms(&["n1"])[0].clone()]}}),
    );
    let d = placement_hint(&half, &["n1", "n2"]);
    assert_eq!(d.row, "prefer-lock-node");
    let preference = |ts: Vec<Value>| {
        ts.into_iter()
            .map(|t| t["preference"].clone())
            .collect::<Vec<_>>()
    };
    // The model keeps a term's preference (what the hint compares), not its weight.
    assert_eq!(
        preference(preferred_terms(&apply(&half, &d))),
        preference(terms(&["n1", "n2"]))
    );
    let whole = pod(
        json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms(&["n1", "n2"])}}),
    );
    assert_eq!(placement_hint(&whole, &["n1", "n2"]).row, "hint-present");
}
