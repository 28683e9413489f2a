//! SPEC 3: when is a volume in use. One implementation for the webhook and the controller.

use super::claims::find_claim;
use crate::model::{Pod, Pv, Pvc};

/// For deletion (finalizer removal): a *scheduled* pod naming the PVC blocks it in any phase,
/// terminal included, because volume teardown on the node is asynchronous (#113828, #123320).
/// An ephemeral claim counts only for the pod that owns the PVC (controller ownerReference UID)
/// and stops counting once that pod is shut down (#99604). Unscheduled pods never block.
pub fn pod_blocks_deletion(pod: &Pod, pvc: &Pvc) -> bool {
    if !pod.is_scheduled() {
        return false;
    }
    match find_claim(pod, &pvc.metadata.namespace, &pvc.metadata.name) {
        None => false,
        Some(c) if c.ephemeral => owns(pod, pvc) && !pod.is_shut_down(),
        Some(_) => true,
    }
}

/// For "unused since" (KEP-5541): a *non-terminal* pod naming the PVC uses it, scheduled or not.
pub fn pod_uses_for_unused_since(pod: &Pod, pvc: &Pvc) -> bool {
    if pod.is_terminal() {
        return false;
    }
    match find_claim(pod, &pvc.metadata.namespace, &pvc.metadata.name) {
        None => false,
        Some(c) if c.ephemeral => owns(pod, pvc),
        Some(_) => true,
    }
}

/// The pods that keep `pvc` from being deleted.
pub fn blocking_pods<'a, P>(pvc: &Pvc, pods: impl IntoIterator<Item = &'a P>) -> Vec<&'a Pod>
where
    P: AsRef<Pod> + 'a,
{
    pods.into_iter()
        .map(AsRef::as_ref)
        .filter(|p| pod_blocks_deletion(p, pvc))
        .collect()
}

/// KEP-5541: no non-terminal pod references the PVC.
pub fn unused_for_since<'a, P>(pvc: &Pvc, pods: impl IntoIterator<Item = &'a P>) -> bool
where
    P: AsRef<Pod> + 'a,
{
    !pods
        .into_iter()
        .any(|p| pod_uses_for_unused_since(p.as_ref(), pvc))
}

/// SPEC 3: a PV is in use while it is Bound.
pub fn pv_in_use(pv: &Pv) -> bool {
    pv.is_bound()
}

fn owns(pod: &Pod, pvc: &Pvc) -> bool {
    !pod.metadata.uid.is_empty() && pvc.metadata.controller_uid() == Some(pod.metadata.uid.as_str())
}

impl AsRef<Pod> for Pod {
    fn as_ref(&self) -> &Pod {
        self
    }
}

/// A short "ns/name (phase Running, node n1)" description of blocking pods for messages and events.
pub fn describe_pods(pods: &[&Pod]) -> String {
    pods.iter()
        .map(|p| {
            format!(
                "{} (phase {}, node {})",
                p.metadata.name,
                p.phase(),
                p.node_name().unwrap_or("none")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClaimSource, OwnerReference, Present, Volume};

    fn pvc(ns: &str, name: &str, owner: Option<&str>) -> Pvc {
        let mut p = Pvc::default();
        p.metadata.namespace = ns.into();
        p.metadata.name = name.into();
        p.metadata.owner_references = owner.map(|uid| {
            vec![OwnerReference {
                kind: "Pod".into(),
                name: "x".into(),
                uid: uid.into(),
                controller: Some(true),
            }]
        });
        p
    }

    fn pod(name: &str, node: Option<&str>, phase: &str, claim: &str, ephemeral: bool) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = name.into();
        p.metadata.namespace = "ns".into();
        p.metadata.uid = format!("uid-{name}");
        p.spec.node_name = node.map(Into::into);
        p.status.phase = Some(phase.into());
        p.spec.volumes.push(if ephemeral {
            Volume {
                name: claim.into(),
                ephemeral: Some(Present {}),
                ..Default::default()
            }
        } else {
            Volume {
                name: "v".into(),
                persistent_volume_claim: Some(ClaimSource {
                    claim_name: claim.into(),
                }),
                ..Default::default()
            }
        });
        p
    }

    #[test]
    fn scheduled_pod_blocks_in_every_phase() {
        let c = pvc("ns", "data", None);
        for phase in ["Pending", "Running", "Succeeded", "Failed", "Unknown"] {
            assert!(
                pod_blocks_deletion(&pod("a", Some("n1"), phase, "data", false), &c),
                "{phase}"
            );
        }
    }

    #[test]
    fn unscheduled_pod_never_blocks() {
        let c = pvc("ns", "data", None);
        assert!(!pod_blocks_deletion(
            &pod("a", None, "Pending", "data", false),
            &c
        ));
        assert!(!pod_blocks_deletion(
            &pod("a", Some(""), "Pending", "data", false),
            &c
        ));
    }

    #[test]
    fn other_namespace_or_claim_does_not_block() {
        assert!(!pod_blocks_deletion(
            &pod("a", Some("n1"), "Running", "data", false),
            &pvc("other", "data", None)
        ));
        assert!(!pod_blocks_deletion(
            &pod("a", Some("n1"), "Running", "logs", false),
            &pvc("ns", "data", None)
        ));
    }

    #[test]
    fn ephemeral_claim_needs_owner_uid_and_stops_at_shutdown() {
        let mut p = pod("web", Some("n1"), "Running", "scratch", true);
        assert!(!pod_blocks_deletion(&p, &pvc("ns", "web-scratch", None)));
        assert!(!pod_blocks_deletion(
            &p,
            &pvc("ns", "web-scratch", Some("someone-else"))
        ));
        let owned = pvc("ns", "web-scratch", Some("uid-web"));
        assert!(pod_blocks_deletion(&p, &owned));
        p.metadata.deletion_timestamp = Some("t".into());
        assert!(
            pod_blocks_deletion(&p, &owned),
            "graceful deletion still blocks"
        );
        p.metadata.deletion_grace_period_seconds = Some(0);
        assert!(
            !pod_blocks_deletion(&p, &owned),
            "shut-down pod releases (#99604)"
        );
    }

    #[test]
    fn plain_claim_of_shut_down_pod_still_blocks() {
        let mut p = pod("a", Some("n1"), "Running", "data", false);
        p.metadata.deletion_timestamp = Some("t".into());
        p.metadata.deletion_grace_period_seconds = Some(0);
        assert!(pod_blocks_deletion(&p, &pvc("ns", "data", None)));
    }

    #[test]
    fn unused_since_counts_non_terminal_pods_scheduled_or_not() {
        let c = pvc("ns", "data", None);
        assert!(pod_uses_for_unused_since(
            &pod("a", None, "Pending", "data", false),
            &c
        ));
        assert!(pod_uses_for_unused_since(
            &pod("a", Some("n"), "Running", "data", false),
            &c
        ));
        assert!(!pod_uses_for_unused_since(
            &pod("a", Some("n"), "Succeeded", "data", false),
            &c
        ));
        assert!(!pod_uses_for_unused_since(
            &pod("a", Some("n"), "Failed", "data", false),
            &c
        ));
        let pods = vec![
            pod("a", Some("n"), "Failed", "data", false),
            pod("b", Some("n"), "Running", "other", false),
        ];
        assert!(unused_for_since(&c, &pods));
    }

    #[test]
    fn blocking_pods_and_description() {
        let c = pvc("ns", "data", None);
        let pods = vec![
            pod("a", Some("n1"), "Running", "data", false),
            pod("b", None, "Pending", "data", false),
            pod("c", Some("n2"), "Failed", "data", false),
        ];
        let b = blocking_pods(&c, &pods);
        assert_eq!(
            describe_pods(&b),
            "a (phase Running, node n1), c (phase Failed, node n2)"
        );
    }

    #[test]
    fn pv_bound_is_in_use() {
        let mut pv = Pv::default();
        assert!(!pv_in_use(&pv));
        pv.status.phase = Some("Bound".into());
        assert!(pv_in_use(&pv));
        pv.status.phase = Some("Released".into());
        assert!(!pv_in_use(&pv));
    }
}
