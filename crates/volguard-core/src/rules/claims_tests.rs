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
            ..Default::default()
        },
        Volume {
            name: "scratch".into(),
            ephemeral: Some(Present {}),
            ..Default::default()
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

/// rules.md §2d row 4: only a pod whose volumes all end with it needs no record of its node's
/// deletion; a claim, an inline NFS/CSI/hostPath volume (decoded: a source this list does not
/// name) or a kind newer than the list all outlive it.
#[test]
fn lasting_volumes_are_everything_but_what_ends_with_the_pod() {
    let decode = |volumes: serde_json::Value| -> Pod {
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"volumes": volumes}}),
        )
        .expect("pod")
    };
    let ends = decode(serde_json::json!([
        {"name": "a", "emptyDir": {}}, {"name": "b", "configMap": {"name": "c"}},
        {"name": "c", "secret": {"secretName": "s"}}, {"name": "d", "projected": {"sources": []}},
        {"name": "e", "downwardAPI": {"items": []}}
    ]));
    assert!(!has_lasting_volumes(&ends));
    assert!(!has_lasting_volumes(&decode(serde_json::json!([]))));
    for lasting in [
        serde_json::json!({"name": "n", "nfs": {"server": "s", "path": "/"}}),
        serde_json::json!({"name": "i", "iscsi": {"targetPortal": "t", "iqn": "q", "lun": 0}}),
        serde_json::json!({"name": "c", "csi": {"driver": "d"}}),
        serde_json::json!({"name": "h", "hostPath": {"path": "/data"}}),
        serde_json::json!({"name": "f", "futureKind": {}}),
        serde_json::json!({"name": "p", "persistentVolumeClaim": {"claimName": "x"}}),
    ] {
        let pod = decode(serde_json::json!([{"name": "a", "emptyDir": {}}, lasting.clone()]));
        assert!(has_lasting_volumes(&pod), "{lasting}");
    }
}
