//! rules.md "claims of a pod": plain PVC references plus generated ephemeral claims.

use crate::model::Pod;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// PVC name, in the pod's namespace.
    pub name: String,
    /// Generated `<pod>-<volume>` claim of an `ephemeral` volume.
    pub ephemeral: bool,
    /// Mounted `readOnly: true`: takes no RWO lock (an ephemeral claim is always read-write).
    pub read_only: bool,
}

/// Whether any of the pod's volumes is a claim (a PVC or a generic ephemeral volume).
pub fn uses_claims(pod: &Pod) -> bool {
    pod.spec
        .volumes
        .iter()
        .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
}

/// Whether any of the pod's volumes outlives it (rules.md §2d row 4): a claim, or an inline
/// NFS, iSCSI, FC, CSI, hostPath... volume — everything but the sources that end with the pod.
/// A pod that has one needs a recorded proof that its node is down before it is released.
pub fn has_lasting_volumes(pod: &Pod) -> bool {
    pod.spec.volumes.iter().any(|v| !v.ends_with_pod())
}

/// Every claim the pod's volumes name. Claim names are namespace-scoped: they always refer to the
/// pod's own namespace.
pub fn claims_of(pod: &Pod) -> impl Iterator<Item = Claim> + '_ {
    pod.spec.volumes.iter().filter_map(move |v| {
        if let Some(src) = &v.persistent_volume_claim {
            Some(Claim {
                name: src.claim_name.clone(),
                ephemeral: false,
                read_only: src.read_only,
            })
        } else {
            v.ephemeral.as_ref().map(|_| Claim {
                name: ephemeral_claim_name(&pod.metadata.name, &v.name),
                ephemeral: true,
                read_only: false,
            })
        }
    })
}

/// Keep one entry per claim name (the first), read-write if any volume mounts it read-write:
/// a pod that names one claim in two volumes takes its lock once.
pub fn dedup<T>(items: &mut Vec<T>, claim: impl Fn(&mut T) -> &mut Claim) {
    let mut i = 0;
    while i < items.len() {
        let (name, read_only) = {
            let c = claim(&mut items[i]);
            (c.name.clone(), c.read_only)
        };
        match (0..i).find(|&j| claim(&mut items[j]).name == name) {
            Some(j) => {
                let first = claim(&mut items[j]);
                first.read_only &= read_only;
                items.remove(i);
            }
            None => i += 1,
        }
    }
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
#[path = "claims_tests.rs"]
mod tests;
