//! rules.md §2f "placement hint" (mutating, pod CREATE): RWO allows several pods on one node, so a
//! new pod whose claim is held on node N is steered towards N with a *preferred* node affinity.
//! A RollingUpdate's new pod then usually lands beside the old one and rolls without a refusal.
//! Never a required term (N may go away), never the pod's own terms overwritten: one appended.

use super::Decision;
use crate::model::Pod;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::{Value, json};

/// The weight of the appended term: the highest the API allows, so it outweighs spreading.
pub const HINT_WEIGHT: i64 = 100;

/// The preferred term naming `nodes` by `kubernetes.io/hostname`.
pub fn term(nodes: &[&str]) -> Value {
    json!({"weight": HINT_WEIGHT, "preference": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}
    ]}})
}

/// The hint for `pod` whose RWO claims are held on `held_on` (distinct, sorted by the caller).
/// Nothing when the pod is already placed, nothing is held, or the pod already carries the
/// very term (a reinvocation).
pub fn placement_hint(pod: &Pod, held_on: &[&str]) -> Decision {
    if pod.node_name().is_some() {
        return Decision::allow("placed");
    }
    if held_on.is_empty() {
        return Decision::allow("no-held-claim");
    }
    let t = term(held_on);
    let node_affinity = pod
        .spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref());
    let preferred = node_affinity.and_then(|n| {
        n.preferred_during_scheduling_ignored_during_execution
            .as_ref()
    });
    if preferred.is_some_and(|p| p.iter().any(|x| x.preference == t["preference"])) {
        return Decision::allow("hint-present");
    }
    let (path, value): (&[&str], Value) = match (&pod.spec.affinity, node_affinity, preferred) {
        (None, _, _) => (
            &["spec", "affinity"],
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [t]}}),
        ),
        (Some(_), None, _) => (
            &["spec", "affinity", "nodeAffinity"],
            json!({"preferredDuringSchedulingIgnoredDuringExecution": [t]}),
        ),
        (Some(_), Some(_), None) => (
            &[
                "spec",
                "affinity",
                "nodeAffinity",
                "preferredDuringSchedulingIgnoredDuringExecution",
            ],
            json!([t]),
        ),
        (Some(_), Some(_), Some(_)) => (
            &[
                "spec",
                "affinity",
                "nodeAffinity",
                "preferredDuringSchedulingIgnoredDuringExecution",
                "-",
            ],
            t,
        ),
    };
    Decision {
        patch: Some(
            Patch(vec![PatchOperation::Add(AddOperation {
                path: PointerBuf::from_tokens(path.iter().copied()),
                value,
            })])
            .into(),
        ),
        ..Decision::allow("prefer-lock-node")
    }
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
