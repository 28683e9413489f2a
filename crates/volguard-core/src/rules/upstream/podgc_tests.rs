//! Unit tests of `src/rules/upstream/podgc.rs`.

use super::*;
use crate::model::from_json;

fn pod(json: &str) -> Pod {
    from_json(json).expect("pod")
}
fn node(json: &str) -> Node {
    from_json(json).expect("node")
}

#[test]
fn terminated_is_any_phase_but_pending_running_unknown() {
    for (phase, terminated) in [
        (r#""Pending""#, false),
        (r#""Running""#, false),
        (r#""Unknown""#, false),
        (r#""Succeeded""#, true),
        (r#""Failed""#, true),
        (r#""""#, true),
        (r#""running""#, true),
        ("null", true),
    ] {
        let p = pod(&format!(r#"{{"status":{{"phase":{phase}}}}}"#));
        assert_eq!(podgc_is_pod_terminated(&p), terminated, "{phase}");
    }
}

#[test]
fn each_pass_in_gc_order() {
    let deleted_on_n1 = pod(
        r#"{"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z"},"spec":{"nodeName":"n1"}}"#,
    );
    let down = node(
        r#"{"spec":{"taints":[{"key":"node.kubernetes.io/out-of-service","effect":"NoSchedule"}]},
            "status":{"conditions":[{"type":"Ready","status":"Unknown"}]}}"#,
    );
    assert_eq!(
        podgc_deletes(&deleted_on_n1, Some(&down)),
        Some(PodGcReason::TerminatingOutOfService)
    );
    // Ready (the first Ready condition counts), or no taint: left to the kubelet.
    let ready = node(
        r#"{"spec":{"taints":[{"key":"node.kubernetes.io/out-of-service"}]},
            "status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Ready","status":"False"}]}}"#,
    );
    assert_eq!(podgc_deletes(&deleted_on_n1, Some(&ready)), None);
    assert_eq!(podgc_deletes(&deleted_on_n1, Some(&node("{}"))), None);
    // No node: orphaned, even a running pod.
    let running_on_n1 = pod(r#"{"spec":{"nodeName":"n1"},"status":{"phase":"Running"}}"#);
    assert_eq!(
        podgc_deletes(&running_on_n1, None),
        Some(PodGcReason::Orphaned)
    );
    let deleted_unscheduled = pod(r#"{"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z"}}"#);
    assert_eq!(
        podgc_deletes(&deleted_unscheduled, None),
        Some(PodGcReason::TerminatingUnscheduled)
    );
    assert_eq!(podgc_deletes(&pod("{}"), None), None);
}
