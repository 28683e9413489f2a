//! rules.md §2a: no new pod on a terminating claim (also the StatefulSet case of #74374).

use super::claims::Claim;
use super::{Decision, Fact};
use crate::model::{Pod, Pvc};

/// Decide a pod CREATE given what is known about each of its claims (same namespace).
pub fn pod_create(pod: &Pod, claims: &[(Claim, Fact<&Pvc>)]) -> Decision {
    let mut warnings = Vec::new();
    for (claim, fact) in claims {
        match fact {
            Fact::Found(pvc) if pvc.metadata.is_terminating() => {
                // A generated ephemeral claim owned by this very pod is its own business; one
                // left over from an earlier pod of the same name must not be reused.
                let own = claim.ephemeral
                    && !pod.metadata.uid.is_empty()
                    && pvc.metadata.controller_uid() == Some(&*pod.metadata.uid);
                if !own {
                    return Decision::deny(
                        "pod-uses-terminating-pvc",
                        format!(
                            "pod {:?} uses PersistentVolumeClaim {:?}, which is being deleted; \
                             wait until it is gone (or recreate it) before creating the pod",
                            pod.metadata.name, claim.name
                        ),
                    );
                }
            }
            Fact::Found(_) => {}
            Fact::Missing => warnings.push(format!(
                "PersistentVolumeClaim {:?} does not exist yet; the pod will wait for it",
                claim.name
            )),
            Fact::Unknown(err) => warnings.push(format!(
                "volguard could not check PersistentVolumeClaim {:?} ({err})",
                claim.name
            )),
        }
    }
    Decision {
        warnings,
        ..Decision::allow("pod-create")
    }
}

#[cfg(test)]
#[path = "pod_create_tests.rs"]
mod tests;
