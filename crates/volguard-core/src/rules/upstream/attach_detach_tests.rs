//! Unit tests of `src/rules/upstream/attach_detach.rs`.

use super::*;
use crate::model::from_json;

fn terminated(json: &str) -> bool {
    let pod: Pod = from_json(json).expect("pod");
    let states: ContainerStates = from_json(json).expect("states");
    is_pod_terminated(&pod, &states)
}

#[test]
fn a_terminal_phase_is_terminated_whatever_runs() {
    assert!(terminated(
        r#"{"status":{"phase":"Failed","containerStatuses":[{"state":{"running":{}}}]}}"#
    ));
    assert!(terminated(r#"{"status":{"phase":"Succeeded"}}"#));
    assert!(!terminated(r#"{"status":{"phase":"Running"}}"#));
}

#[test]
fn a_deleted_pod_is_terminated_once_no_container_of_any_list_runs() {
    let deleted = |status: &str| {
        terminated(&format!(
            r#"{{"metadata":{{"deletionTimestamp":"2026-01-01T00:00:00Z"}},"status":{status}}}"#
        ))
    };
    assert!(deleted(r#"{"phase":"Running"}"#));
    assert!(deleted(
        r#"{"containerStatuses":[{"state":{"waiting":{}}},{"state":{"terminated":{}}}]}"#
    ));
    assert!(!deleted(r#"{"containerStatuses":[{"state":{}}]}"#));
    assert!(!deleted(r#"{"containerStatuses":[{"state":null}]}"#));
    assert!(!deleted(
        r#"{"initContainerStatuses":[{"state":{"running":{}}}]}"#
    ));
    assert!(!deleted(
        r#"{"ephemeralContainerStatuses":[{"state":{"terminated":null}}]}"#
    ));
    assert!(!terminated(
        r#"{"status":{"containerStatuses":[{"state":{"terminated":{}}}]}}"#
    ));
}
