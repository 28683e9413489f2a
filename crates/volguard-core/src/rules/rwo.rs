//! rules.md §2f: a ReadWriteOnce claim is used on one node at a time.
//!
//! NFS, iSCSI, Fibre Channel, hostPath and many CSI drivers have no lock of their own: two nodes
//! writing one volume corrupt it. volguard takes the seed's "attach" lock at the one moment a pod
//! gets a node (the scheduler's `pods/binding`, or a pod created with `spec.nodeName`). A refused
//! binding is retried by the scheduler, so the pod simply waits until the volume is free.

use super::claims::Claim;
use super::{Decision, Fact};
use crate::model::{Node, Pod, Pvc};

/// What the caller found for one claim of the pod being placed.
pub struct ClaimFacts<'a> {
    pub claim: Claim,
    pub pvc: Fact<&'a Pvc>,
    /// Other pods naming this claim (from the pod-by-claim index), each with its node as read.
    pub others: Vec<(&'a Pod, Fact<&'a Node>)>,
}

/// A pod that holds an RWO claim on another node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder<'a> {
    pub claim: &'a str,
    pub pod: &'a str,
    pub node: &'a str,
    /// Its node is gone without a record of its deletion on proof: it holds until someone proves
    /// the machine down (the holder will never end by itself).
    pub gone_unrecorded: bool,
}

/// The holders of one claim for a pod going to `node`. A holder is another pod naming the claim,
/// scheduled to a different node, not terminal. A holder whose node is gone or out of service
/// (rules.md §2d rows 4-5) no longer runs anything; a terminating holder still may, so it counts. A
/// node that could not be read counts as present (unsure means in use).
pub fn holders<'a>(pod: &Pod, node: &str, facts: &'a ClaimFacts<'a>) -> Vec<Holder<'a>> {
    facts
        .others
        .iter()
        .filter(|(other, _)| other.metadata.name != pod.metadata.name)
        .filter(|(other, _)| !other.is_terminal())
        .filter_map(|(other, other_node)| {
            let on = other.node_name().filter(|n| *n != node)?;
            match other_node {
                Fact::Missing => None,
                Fact::Found(n) if n.is_out_of_service() => None,
                Fact::Found(_) | Fact::Unknown(_) => Some(Holder {
                    claim: &facts.claim.name,
                    pod: &other.metadata.name,
                    node: on,
                    gone_unrecorded: matches!(
                        other_node,
                        Fact::Unknown(super::decision::ReadError::GoneUnrecorded { .. })
                    ),
                }),
            }
        })
        .collect()
}

/// The holder a message names, of `(pod, node)` candidates: the pod the claim's lock names when
/// it is one of them, else the first by node and name. The refusal, `explain` and the lock then
/// name the same pod (each took the first in its own order, and they disagreed).
pub fn named_holder<'p>(
    candidates: impl IntoIterator<Item = (&'p str, &'p str)>,
    lock: Option<&super::rwo_lock::RwoLock>,
) -> Option<(&'p str, &'p str)> {
    let mut first: Option<(&str, &str)> = None;
    for (pod, node) in candidates {
        if lock.is_some_and(|l| l.pod == pod && l.node == node) {
            return Some((pod, node));
        }
        if first.is_none_or(|(p, n)| (node, pod) < (n, p)) {
            first = Some((pod, node));
        }
    }
    first
}

/// What unblocks a placement refused for `h`: its end, or — when its node is gone without a
/// record — a proof that the machine is down, which nobody else will bring.
fn next_step(pod: &Pod, h: &Holder<'_>) -> String {
    match h.gone_unrecorded {
        true => format!(
            "node {:?} is gone but nothing proves its machine down, so {:?} may still run there and will \
             never be seen to end: once you know the machine is off, run `kubectl volguard fence confirm {}` \
             (or let volguard fence it: StorageClass annotation volguard.io/fencing=auto), then {}",
            h.node,
            h.pod,
            h.node,
            super::rwo_lock::retry_hint(pod, "after that")
        ),
        false => super::rwo_lock::retry_hint(pod, &format!("once {:?} has ended", h.pod)),
    }
}

/// Decide placing `pod` on `node` given the facts of each of its claims.
pub fn place(pod: &Pod, node: &str, claims: &[ClaimFacts<'_>]) -> Decision {
    let mut warnings = Vec::new();
    for facts in claims {
        if facts.claim.read_only {
            // A read-only mount writes nothing: it takes no lock (rules.md §2f).
            continue;
        }
        let unknown_mode = match &facts.pvc {
            Fact::Found(pvc) if pvc.is_rwo() => false,
            // rules.md §2f: a claim that does not exist yet has no known access mode (unknown
            // means ReadWriteOnce) and cannot carry a lock, so two pods placed on two nodes
            // would both pass. The caller read it live. An ephemeral claim is exempt: its
            // controller creates it after the pod, owned by that one pod.
            Fact::Missing if !facts.claim.ephemeral => {
                return Decision::deny(
                    "rwo-claim-missing",
                    format!(
                        "pod {:?} cannot be placed on node {node:?}: PersistentVolumeClaim {:?} does not \
                         exist, so its access mode is unknown and no ReadWriteOnce lock can be taken. \
                         Create the claim first, then the pod",
                        pod.metadata.name, facts.claim.name
                    ),
                );
            }
            Fact::Missing => true,
            Fact::Found(_) => continue,
            // rules.md "Deciding late": an Ignore rule allows, and says it could not check.
            Fact::Unknown(err) => {
                warnings.push(format!(
                    "volguard could not check that ReadWriteOnce claim {:?} is free on other nodes ({err})",
                    facts.claim.name
                ));
                continue;
            }
        };
        let all = holders(pod, node, facts);
        let lock = match &facts.pvc {
            Fact::Found(pvc) => super::rwo_lock::RwoLock::of(pvc),
            _ => None,
        };
        let named = named_holder(all.iter().map(|h| (h.pod, h.node)), lock.as_ref());
        if let Some(h) = named.and_then(|(p, n)| all.iter().find(|h| h.pod == p && h.node == n)) {
            let mode = if unknown_mode {
                "does not exist yet (its access mode is unknown, so it is treated as ReadWriteOnce)"
            } else {
                "is ReadWriteOnce"
            };
            return Decision::deny(
                "rwo-held-on-other-node",
                format!(
                    "pod {:?} cannot run on node {node:?}: PersistentVolumeClaim {:?} {mode} \
                     and pod {:?} uses it on node {:?}. Two nodes writing one volume corrupt it; {}. \
                     For a Deployment use `strategy: Recreate` (a RollingUpdate starts the new pod \
                     before the old one stops)",
                    pod.metadata.name,
                    h.claim,
                    h.pod,
                    h.node,
                    next_step(pod, h)
                ),
            );
        }
    }
    Decision {
        warnings,
        ..Decision::allow("rwo-free")
    }
}

/// Allowed without a judgement: a claim or the pods holding it could not be read (the RWO
/// guard's failurePolicy is Ignore); `warning` says what was not known. Nothing that follows in
/// the same request builds on it (the lock is not taken).
pub fn unknown(warning: String) -> Decision {
    Decision::allow("rwo-unknown")
        .with_effect(super::Effect::Unjudged)
        .with_warning(warning)
}

/// The controller's detection (the first step of the seed's fencing pattern): the nodes on which
/// non-terminal pods use an RWO claim. Two or more means the lock was bypassed (volguard was
/// down, or `--rwo-guard=off`). Sorted and distinct; empty for claims that are not RWO.
pub fn nodes_using<'a, P: AsRef<Pod> + 'a>(
    pvc: &Pvc,
    pods: impl IntoIterator<Item = &'a P>,
) -> Vec<String> {
    if !pvc.is_rwo() {
        return Vec::new();
    }
    let mut nodes: Vec<String> = pods
        .into_iter()
        .map(AsRef::as_ref)
        .filter(|p| !p.is_terminal() && super::in_use::names_claim(p, pvc))
        .filter_map(|p| p.node_name().map(str::to_string))
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// The `MultiNodeRWO` Warning event's message.
pub fn multi_node_message(pvc: &Pvc, nodes: &[String]) -> String {
    format!(
        "ReadWriteOnce PersistentVolumeClaim {} is used by pods on {} nodes at once ({}): unless the \
         volume has a lock of its own, writes from two nodes corrupt it. Stop the pods on all but one node",
        pvc.metadata.name,
        nodes.len(),
        nodes.join(", ")
    )
}

#[cfg(test)]
#[path = "rwo_tests.rs"]
mod tests;
