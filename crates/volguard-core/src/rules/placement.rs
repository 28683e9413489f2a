//! rules.md §2f "placement hint" (mutating, pod CREATE): RWO allows several pods on one node, so a
//! new pod whose claim is held on node N is steered towards N with a *preferred* node affinity.
//! A RollingUpdate's new pod then usually lands beside the old one and rolls without a refusal.
//! Never a required term (N may go away), never the pod's own terms overwritten: ours appended.

use super::Decision;
use crate::model::Pod;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::{Value, json};

/// The weight of the appended term: the highest the API allows, so it outweighs spreading.
pub const HINT_WEIGHT: i64 = 100;

/// The preferred terms naming `nodes`, one per node: `matchFields` on `metadata.name`, because
/// the lock names the Node object (its `kubernetes.io/hostname` label need not equal its name), and
/// the API allows one value per field requirement.
pub fn terms(nodes: &[&str]) -> Vec<Value> {
    nodes
        .iter()
        .map(|n| {
            json!({"weight": HINT_WEIGHT, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [n]}
            ]}})
        })
        .collect()
}

/// The hint for `pod` whose RWO claims are held on `held_on` (distinct, sorted by the caller).
/// Nothing when the pod is already placed, nothing is held, or the pod already carries every
/// term (a reinvocation).
pub fn placement_hint(pod: &Pod, held_on: &[&str]) -> Decision {
    if pod.node_name().is_some() {
        return Decision::allow("placed");
    }
    if held_on.is_empty() {
        return Decision::allow("no-held-claim");
    }
    let node_affinity = pod
        .spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref());
    let preferred = node_affinity.and_then(|n| {
        n.preferred_during_scheduling_ignored_during_execution
            .as_ref()
    });
    let carried =
        |t: &Value| preferred.is_some_and(|p| p.iter().any(|x| x.preference == t["preference"]));
    let missing: Vec<Value> = terms(held_on).into_iter().filter(|t| !carried(t)).collect();
    if missing.is_empty() {
        return Decision::allow("hint-present");
    }
    const PREFERRED: [&str; 4] = [
        "spec",
        "affinity",
        "nodeAffinity",
        "preferredDuringSchedulingIgnoredDuringExecution",
    ];
    let add = |path: &[&str], value: Value| {
        PatchOperation::Add(AddOperation {
            path: PointerBuf::from_tokens(path.iter().copied()),
            value,
        })
    };
    let ops = match (&pod.spec.affinity, node_affinity, preferred) {
        (None, _, _) => vec![add(
            &PREFERRED[..2],
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": missing}}),
        )],
        (Some(_), None, _) => vec![add(
            &PREFERRED[..3],
            json!({"preferredDuringSchedulingIgnoredDuringExecution": missing}),
        )],
        (Some(_), Some(_), None) => vec![add(&PREFERRED, json!(missing))],
        // Appended one by one: the pod's own terms (and any of ours already there) stay.
        (Some(_), Some(_), Some(_)) => missing
            .into_iter()
            .map(|t| add(&[&PREFERRED[..], &["-"]].concat(), t))
            .collect(),
    };
    Decision {
        patch: Some(Patch(ops).into()),
        ..Decision::allow("prefer-lock-node")
    }
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
