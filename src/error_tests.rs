//! Unit tests of `src/error.rs`.

use super::*;

fn api(code: u16, reason: &str, message: &str) -> anyhow::Error {
    let status: kube::core::Status = serde_json::from_value(serde_json::json!({
        "status": "Failure", "code": code, "reason": reason, "message": message
    }))
    .expect("status");
    anyhow::Error::from(kube::Error::Api(Box::new(status))).context("reading the claim")
}

#[test]
fn an_apiserver_refusal_prints_as_kubectl_prints_it() {
    let e = api(
        403,
        "Forbidden",
        "persistentvolumes \"pv-1\" is forbidden: User \"alice\" cannot get resource \"persistentvolumes\" in API group \"\" at the cluster scope",
    );
    assert_eq!(
        for_cli(e.as_ref()),
        "Error from server (Forbidden): persistentvolumes \"pv-1\" is forbidden: User \"alice\" cannot get resource \"persistentvolumes\" in API group \"\" at the cluster scope"
    );
}

#[test]
fn not_found_live_and_in_a_file() {
    let live = NotFound {
        resource: "persistentvolumeclaims",
        name: "data".into(),
        namespace: Some("team".into()),
        file: None,
    };
    assert_eq!(
        for_cli(&live),
        "Error from server (NotFound): persistentvolumeclaims \"data\" not found"
    );
    let file = NotFound {
        file: Some("state.yaml".into()),
        ..live
    };
    assert_eq!(
        for_cli(&file),
        "error: persistentvolumeclaims \"data\" not found in namespace \"team\" of state.yaml"
    );
    let read = anyhow::Error::from(crate::rules::decision::ReadError::Refused {
        what: "reading PersistentVolumeClaim \"x\"".into(),
        code: 403,
        reason: "Forbidden".into(),
        message: "persistentvolumeclaims \"x\" is forbidden".into(),
    });
    assert_eq!(
        for_cli(read.as_ref()),
        "Error from server (Forbidden): persistentvolumeclaims \"x\" is forbidden"
    );
    let other = anyhow::anyhow!("the cause").context("what was done");
    assert_eq!(for_cli(other.as_ref()), "error: what was done: the cause");
}
