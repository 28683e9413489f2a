//! Unit tests of `src/rules/pod_create.rs`.

use super::*;
use crate::model::OwnerReference;

fn pod() -> Pod {
    crate::model::testing::pod("ns", "web-0").with_uid("new-uid")
}

fn claim(name: &str, ephemeral: bool) -> Claim {
    Claim {
        name: name.into(),
        ephemeral,
        read_only: false,
    }
}

fn terminating(owner: Option<&str>) -> Pvc {
    let mut p = Pvc::default();
    p.metadata.name = "data-web-0".into();
    p.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into());
    p.metadata.owner_references = owner.map(|u| {
        vec![OwnerReference {
            uid: u.into(),
            controller: Some(true),
            ..Default::default()
        }]
    });
    p
}

#[test]
fn terminating_claim_denied_with_names() {
    let t = terminating(None);
    let d = pod_create(&pod(), &[(claim("data-web-0", false), Fact::Found(&t))]);
    assert!(!d.allowed);
    assert_eq!(d.code, 403);
    assert!(d.message.as_deref().is_some_and(|m| m.starts_with(
        r#"pod "web-0" uses PersistentVolumeClaim "data-web-0", which is being deleted"#
    )));
}

#[test]
fn live_claim_allowed_missing_warns() {
    let live = Pvc::default();
    let d = pod_create(
        &pod(),
        &[
            (claim("a", false), Fact::Found(&live)),
            (claim("b", false), Fact::Missing),
        ],
    );
    assert!(d.allowed);
    assert_eq!(d.warnings.len(), 1);
    assert!(d.warnings[0].contains(r#""b" does not exist yet"#));
}

#[test]
fn stale_ephemeral_claim_of_earlier_pod_denied_own_allowed() {
    let stale = terminating(Some("old-uid"));
    let d = pod_create(
        &pod(),
        &[(claim("web-0-scratch", true), Fact::Found(&stale))],
    );
    assert!(!d.allowed);
    let own = terminating(Some("new-uid"));
    let d = pod_create(&pod(), &[(claim("web-0-scratch", true), Fact::Found(&own))]);
    assert!(d.allowed);
}

#[test]
fn unknown_claim_allows_with_warning() {
    let d = pod_create(
        &pod(),
        &[(
            claim("a", false),
            Fact::Unknown(crate::rules::decision::ReadError::Timeout {
                what: "claim".into(),
            }),
        )],
    );
    assert!(d.allowed);
    assert!(
        d.warnings[0].contains("could not check") && d.warnings[0].contains("claim timed out"),
        "{:?}",
        d.warnings
    );
}
