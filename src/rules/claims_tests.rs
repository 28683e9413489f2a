//! Unit tests of `src/rules/claims.rs`.

use super::*;
use crate::model::{ClaimSource, Present, Volume};

fn pod() -> Pod {
    let mut p = Pod::default();
    p.metadata.name = "web-0".into();
    p.metadata.namespace = "ns".into();
    p.spec.volumes = vec![
        Volume {
            name: "data".into(),
            persistent_volume_claim: Some(ClaimSource {
                claim_name: "data-web-0".into(),
                read_only: false,
            }),
            ephemeral: None,
        },
        Volume {
            name: "scratch".into(),
            persistent_volume_claim: None,
            ephemeral: Some(Present {}),
        },
        Volume {
            name: "tmp".into(),
            ..Default::default()
        },
    ];
    p
}

#[test]
fn plain_and_ephemeral_claims() {
    let claims: Vec<_> = claims_of(&pod()).collect();
    assert_eq!(
        claims,
        vec![
            Claim {
                name: "data-web-0".into(),
                ephemeral: false,
                read_only: false
            },
            Claim {
                name: "web-0-scratch".into(),
                ephemeral: true,
                read_only: false
            },
        ]
    );
}

#[test]
fn namespace_scopes_claim_names() {
    assert!(find_claim(&pod(), "ns", "data-web-0").is_some());
    assert!(find_claim(&pod(), "other", "data-web-0").is_none());
    assert!(
        find_claim(&pod(), "ns", "tmp").is_none(),
        "emptyDir is no claim"
    );
}

#[test]
fn one_claim_named_twice_is_one_lock_read_write_if_any_mount_is() {
    let c = |name: &str, read_only| Claim {
        name: name.into(),
        ephemeral: false,
        read_only,
    };
    let mut v = vec![c("data", true), c("logs", false), c("data", false)];
    dedup(&mut v, |c| c);
    assert_eq!(v, vec![c("data", false), c("logs", false)]);
}
