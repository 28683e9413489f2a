//! SPEC "claims of a pod": plain PVC references plus generated ephemeral claims.

use crate::model::Pod;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// PVC name, in the pod's namespace.
    pub name: String,
    /// Generated `<pod>-<volume>` claim of an `ephemeral` volume.
    pub ephemeral: bool,
}

/// Every claim the pod's volumes name. Claim names are namespace-scoped: they always refer to the
/// pod's own namespace.
pub fn claims_of(pod: &Pod) -> impl Iterator<Item = Claim> + '_ {
    pod.spec.volumes.iter().filter_map(move |v| {
        if let Some(src) = &v.persistent_volume_claim {
            Some(Claim {
                name: src.claim_name.clone(),
                ephemeral: false,
            })
        } else {
            v.ephemeral.as_ref().map(|_| Claim {
                name: ephemeral_claim_name(&pod.metadata.name, &v.name),
                ephemeral: true,
            })
        }
    })
}

/// The name the ephemeral volume controller gives the PVC of a pod's ephemeral volume.
pub fn ephemeral_claim_name(pod: &str, volume: &str) -> String {
    format!("{pod}-{volume}")
}

/// Whether `pod` names the claim `pvc_name` in its namespace, and how.
pub fn find_claim(pod: &Pod, namespace: &str, pvc_name: &str) -> Option<Claim> {
    if pod.metadata.namespace != namespace {
        return None;
    }
    claims_of(pod).find(|c| c.name == pvc_name)
}

#[cfg(test)]
mod tests {
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
                    ephemeral: false
                },
                Claim {
                    name: "web-0-scratch".into(),
                    ephemeral: true
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
}
