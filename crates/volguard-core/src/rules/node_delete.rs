//! rules.md §7 "Node deletion is a release": deleting a Node makes PodGC force-delete its pods and
//! lets their replacements take the RWO locks elsewhere, with no proof that the machine is off (the
//! kubelet of a partitioned machine keeps running them: cluster-api#2565). So a Node whose
//! non-terminal pods use claims is deleted only on proof, and every such deletion is recorded (a
//! NodeFence that outlives the Node), which is what "node gone" is later read from.

use super::force_delete::is_human;
use super::proof::{Key, Read};
use super::remediators::{Action, Remediators};
use super::{Decision, Fact};
use crate::model::fence::{NodeFence, proof_of_down};
use crate::model::{Node, Pod, UserInfo};
use std::sync::Arc;

/// The answer to a Node DELETE, and when it is allowed on a proof that no record holds yet, what
/// to record (the caller writes the record before answering).
#[derive(Debug, Clone)]
pub struct NodeDelete {
    pub decision: Decision,
    /// The proof to record, with the pods (namespace/name) the deletion releases.
    pub record: Option<(String, Vec<String>)>,
}

/// Decide the DELETE of `node` (the stored object). `users`: its non-terminal pods that use
/// claims (a consistent read); `fences`: its NodeFence incidents and records; `alive`: why a live
/// read shows it alive, if it does (as for the taint: a heartbeating node is not down; and no
/// record proves a node down once it heartbeats again, rules.md §8). `confirmed`: the stored
/// Node's confirmation as `proof::Reader::read` found it (expired, unstamped or with break glass
/// off, it counts for nothing, as for the taint and a force delete).
pub fn node_delete(
    user: &UserInfo,
    node: &Node,
    users: Fact<&[Pod]>,
    fences: Fact<&[Arc<NodeFence>]>,
    remediators: &Remediators,
    alive: Fact<&str>,
    confirmed: &Read,
) -> NodeDelete {
    let name = &node.metadata.name;
    let decided = |decision| NodeDelete {
        decision,
        record: None,
    };
    // 1: nothing on it uses a claim (drained, or stateless): nothing to release.
    let pods = match users {
        Fact::Found([]) | Fact::Missing => return decided(Decision::allow("node-delete-drained")),
        Fact::Found(p) => p,
        Fact::Unknown(e) => {
            return decided(Decision::deny(
                "node-delete-unknown",
                format!(
                    "deleting node {name:?} refused: volguard could not list the pods on it ({e}), so it cannot tell \
                 whether deleting it releases volumes that a running machine still writes. Retry"
                ),
            ));
        }
    };
    let names: Vec<String> = pods
        .iter()
        .map(|p| format!("{}/{}", p.metadata.namespace, p.metadata.name))
        .collect();
    let newest = pods
        .iter()
        .filter_map(|p| p.metadata.creation_timestamp)
        .max();
    let alive_why = match &alive {
        Fact::Found(why) => Some(why.to_string()),
        Fact::Unknown(e) => Some(format!("volguard could not read its heartbeat ({e})")),
        Fact::Missing => None,
    };
    // 2: a fence that held, or a release already recorded: the incident is the record, while
    // the node stays silent (a node that heartbeats again is not down on an old incident).
    if let Fact::Found(all) = fences
        && alive_why.is_none()
        && let Some(f) = proof_of_down(all, name, newest, crate::model::fence::DELETE_NODE)
    {
        return decided(Decision::allow("node-delete-fenced").with_warning(format!(
            "node {name:?} deleted on the proof of NodeFence {}",
            f.metadata.name
        )));
    }
    // 3: a person's confirmation, stored on the Node by an earlier request (rules.md §8), or
    // 4: a trusted remediator named for Node deletion, unless the node evidently runs.
    let proof = if let Some(p) = confirmed.proof().filter(|p| p.is(Key::ConfirmNodeDown))
        && is_human(user)
    {
        Some(format!(
            "node {name:?} carried {}=true, set by {:?}; deleted by {:?}",
            Key::ConfirmNodeDown,
            p.by(),
            user.username
        ))
    } else {
        remediators
            .may(user, Action::DeleteNode)
            .map(|r| format!("trusted remediator {:?} (delete-node)", r.identity))
    };
    let shown = shown(&names);
    match (proof, alive_why) {
        (Some(proof), None) => NodeDelete {
            decision: Decision::allow("node-delete-proven").with_warning(format!(
                "node {name:?} deleted while pods on it use claims ({shown}): {proof}; volguard records the \
                 deletion as a NodeFence, and PodGC now releases those pods"
            )),
            record: Some((proof, names)),
        },
        (proof, alive) => {
            let d = unproven(name, &shown, proof.is_some(), alive);
            decided(match confirmed.ignored() {
                Some(w) => d.with_warning(w.to_string()),
                None => d,
            })
        }
    }
}

/// The first five pods, and how many more.
fn shown(names: &[String]) -> String {
    let shown = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    match names.len() {
        n if n > 5 => format!("{shown} and {} more", n - 5),
        _ => shown,
    }
}

/// The refusal of a deletion nothing proves safe, or that a proof allows but the node's
/// heartbeat contradicts.
fn unproven(name: &str, shown: &str, proven: bool, alive: Option<String>) -> Decision {
    let why = match alive {
        Some(a) if proven => format!("the node is not down: {a}"),
        Some(a) => format!("nothing proves the machine is off, and {a}"),
        None => "nothing proves the machine is off".to_string(),
    };
    Decision::deny(
        "node-delete-unproven",
        format!(
            "deleting node {name:?} refused: pods on it still use claims ({shown}) and {why}. Deleting \
             the Node makes PodGC force-delete them and their volumes attach elsewhere while the machine may \
             still write to them. Drain it first (kubectl drain {name}); or, once the machine is off, let \
             volguard fence it, or run `kubectl volguard fence confirm {name}` (a person, recorded), then \
             delete it. A remediator that deletes Nodes after removing their machine (cluster-api, a cloud \
             node controller) can be trusted with --trusted-remediator IDENTITY=delete-node"
        ),
    )
}

#[cfg(test)]
#[path = "node_delete_tests.rs"]
mod tests;
