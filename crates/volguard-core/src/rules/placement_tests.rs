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
        let preferred = after["spec"]["affinity"]["nodeAffinity"]
            ["preferredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(preferred.contains(&term(&["n1"])), "{affinity}: {after}");
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
        json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term(&["n1"])]}}),
    );
    let d = placement_hint(&hinted, &["n1"]);
    assert_eq!((d.row, d.patch.is_none()), ("hint-present", true));
}
