//! `volguard explain pod NAME`: why won't my pod start, as far as its storage goes. Walks the pod
//! to each claim (missing, unbound, terminating), its volume, the volume's attachments (the node
//! that still holds it: the "Multi-Attach error"), volguard's RWO lock and the pods holding the
//! claim, and a fencing incident on the holder's node. `build` is pure over what was read.

use super::Attachment;
use crate::model::fence::NodeFence;
use crate::model::{Node, Pod, Pv, Pvc};
use crate::rules::claims::claims_of;
use crate::rules::rwo_lock::RwoLock;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimState {
    pub name: String,
    /// missing, pending, terminating or bound.
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    pub read_write_once: bool,
    /// Other pods that use the claim and where (`name on node`).
    pub used_by: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rwo_lock: Option<RwoLock>,
    pub attachments: Vec<Attachment>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodExplanation {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub phase: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub claims: Vec<ClaimState>,
    /// What blocks the pod, one line per claim that does (empty: no storage problem).
    pub blocked: Vec<String>,
    pub next: String,
}

/// One claim of the pod, as read.
pub struct ClaimFacts<'a> {
    pub name: String,
    pub pvc: Option<&'a Pvc>,
    pub pv: Option<&'a Pv>,
    pub attachments: Vec<Attachment>,
}

/// What blocks the pod and what to do, gathered claim by claim.
#[derive(Default)]
struct Findings {
    blocked: Vec<String>,
    steps: Vec<String>,
}

/// `others`: the other pods of the namespace that name any of the pod's claims.
pub fn build(
    pod: &Pod,
    claims: &[ClaimFacts<'_>],
    others: &[Pod],
    fences: &[NodeFence],
) -> PodExplanation {
    build_with_nodes(pod, claims, others, fences, &[])
}

/// `build`, with the nodes read that hold the pod's claims: the advice names a node only where
/// the pod's nodeSelector and required node affinity let it run.
pub fn build_with_nodes(
    pod: &Pod,
    claims: &[ClaimFacts<'_>],
    others: &[Pod],
    fences: &[NodeFence],
    nodes: &[Node],
) -> PodExplanation {
    let mut found = Findings::default();
    let ctx = Ctx {
        pod,
        others,
        fences,
        nodes,
    };
    let out = claims.iter().map(|c| claim(&ctx, c, &mut found)).collect();
    let Findings { blocked, mut steps } = found;
    steps.dedup();
    let next = match (claims.is_empty(), steps.is_empty()) {
        (true, _) => "the pod uses no claim: no storage problem".to_string(),
        (false, true) => {
            "no storage problem found: its claims are bound and no other node holds them"
                .to_string()
        }
        (false, false) => steps.join("; "),
    };
    PodExplanation {
        kind: "Pod",
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        phase: pod.phase().to_string(),
        node: pod.node_name().map(str::to_string),
        claims: out,
        blocked,
        next,
    }
}

/// What every claim is judged against.
struct Ctx<'a> {
    pod: &'a Pod,
    others: &'a [Pod],
    fences: &'a [NodeFence],
    nodes: &'a [Node],
}

/// Whether the pod may run on a node, as far as its labels were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fits {
    Yes,
    No,
    /// The pod constrains its nodes and this one's labels were not read (a namespace's user
    /// may not read Nodes; a `--state` file keeps no labels).
    Unread,
}

impl Ctx<'_> {
    fn fits(&self, node: &str) -> Fits {
        if !self.pod.has_node_constraints() {
            return Fits::Yes;
        }
        match self.nodes.iter().find(|n| n.metadata.name == node) {
            Some(n) if self.pod.may_run_on(node, n.metadata.labels.as_ref()) => Fits::Yes,
            Some(_) => Fits::No,
            None => Fits::Unread,
        }
    }
}

/// One claim of the pod: its state, and what of it blocks the pod.
fn claim(ctx: &Ctx<'_>, c: &ClaimFacts<'_>, found: &mut Findings) -> ClaimState {
    let (pod, others) = (ctx.pod, ctx.others);
    let users: Vec<&Pod> = others
        .iter()
        .filter(|o| o.metadata.name != pod.metadata.name && !o.is_terminal())
        .filter(|o| claims_of(o).any(|x| x.name == c.name))
        .collect();
    let (state, volume) = match c.pvc {
        None => ("missing", None),
        Some(p) if p.metadata.deletion_timestamp.is_some() => ("terminating", p.volume_name()),
        Some(p) if p.is_bound() => ("bound", p.volume_name()),
        Some(p) => ("pending", p.volume_name()),
    };
    let rwo = c.pvc.is_some_and(Pvc::is_rwo);
    let lock = c.pvc.and_then(RwoLock::of);
    claim_state(pod, &c.name, state, found);
    if rwo {
        held_elsewhere(ctx, &c.name, &users, lock.as_ref(), found);
        attached_elsewhere(pod, c, volume, found);
    }
    ClaimState {
        name: c.name.clone(),
        state,
        volume: volume.map(str::to_string),
        read_write_once: rwo,
        used_by: users
            .iter()
            .map(|u| {
                format!(
                    "{} on {}",
                    u.metadata.name,
                    u.node_name().unwrap_or("no node yet")
                )
            })
            .collect(),
        rwo_lock: lock,
        attachments: c.attachments.clone(),
    }
}

/// A claim missing, terminating or pending.
fn claim_state(pod: &Pod, name: &str, state: &str, found: &mut Findings) {
    match state {
        "missing" => {
            found.blocked.push(format!("claim {name} does not exist"));
            found
                .steps
                .push(format!("create claim {name} (the pod waits for it)"));
        }
        // Placed already: the claim's deletion waits for this pod, not the other way round.
        "terminating" if pod.is_scheduled() && !pod.is_terminal() => {
            found.steps.push(format!(
                "claim {name} is being deleted and waits for this pod to end (its protection finalizer stays while \
                 the pod uses it); this pod is not blocked by it, but a replacement of it would be"
            ));
        }
        "terminating" => {
            found.blocked.push(format!("claim {name} is being deleted"));
            found.steps.push(format!(
                "wait until claim {name} is gone, recreate it, then recreate the pod (`kubectl volguard explain pvc {name}` says what holds it)"
            ));
        }
        "pending" => {
            found
                .blocked
                .push(format!("claim {name} is not bound to a volume yet"));
            found.steps.push(format!(
                "see why claim {name} is Pending (`kubectl describe pvc {name}`: its StorageClass, provisioner, or \
                 WaitForFirstConsumer binding after the pod is scheduled)"
            ));
        }
        _ => {}
    }
}

/// Another node holds the ReadWriteOnce claim: a pod running there, or volguard's lock.
fn held_elsewhere(
    ctx: &Ctx<'_>,
    name: &str,
    users: &[&Pod],
    lock: Option<&RwoLock>,
    found: &mut Findings,
) {
    let (pod, fences) = (ctx.pod, ctx.fences);
    let elsewhere = |n: &str| pod.node_name() != Some(n);
    let on_other_nodes = users.iter().filter_map(|u| {
        let n = u.node_name().filter(|n| elsewhere(n))?;
        Some((u.metadata.name.as_str(), n))
    });
    // A lock written for a bind stops holding once its pod is gone or no longer uses the claim
    // (the webhook takes it over at once; the controller tidies it later): not a block.
    let stale = |l: &RwoLock| {
        l.via == Some(crate::rules::rwo_lock::Via::Bind)
            && !users.iter().any(|u| u.metadata.name == l.pod)
    };
    let holder = crate::rules::rwo::named_holder(on_other_nodes, lock)
        .map(|(p, n)| (p.to_string(), n.to_string()))
        .or_else(|| {
            lock.filter(|l| elsewhere(&l.node) && !stale(l))
                .map(|l| (l.pod.clone(), l.node.clone()))
        });
    let Some((holder, on)) = holder else {
        if let Some(l) = lock.filter(|l| elsewhere(&l.node) && stale(l)) {
            found.steps.push(format!(
                "claim {name}'s lock still names pod {} on node {}, which no longer uses it: the next                  placement takes the lock over (volguard's controller removes it within 10 minutes, or its grace if longer)",
                l.pod, l.node
            ));
        }
        return;
    };
    let fits = ctx.fits(&on);
    found.blocked.push(match fits {
        Fits::No => format!(
            "claim {name} is ReadWriteOnce and pod {holder} holds it on node {on}, where this pod's nodeSelector \
             or required node affinity does not let it run: it waits until {holder} ends"
        ),
        Fits::Yes | Fits::Unread => format!(
            "claim {name} is ReadWriteOnce and pod {holder} holds it on node {on}: this pod can run only on {on} \
             until {holder} ends"
        ),
    });
    let incident = fences
        .iter()
        .find(|f| f.spec.node == on && !f.status.phase.is_final() && !f.is_release_record());
    found.steps.push(match (incident, fits) {
        (Some(f), _) => format!(
            "node {on} is partitioned: fencing incident {} ({}) releases the claim once the fence is \
             proven (`kubectl volguard explain node {on}`)",
            f.metadata.name,
            f.status.phase.as_str()
        ),
        (None, Fits::No) => format!(
            "it waits until {holder} ends and the volume leaves node {on} (for a Deployment use `strategy: \
             Recreate`), or allow node {on} in the pod's nodeSelector or node affinity; if node {on} is down, \
             see `kubectl volguard explain node {on}`"
        ),
        (None, Fits::Yes) => format!(
            "it runs on {on} if it fits there (volguard's placement hint prefers it), else it waits until \
             {holder} ends (for a Deployment use `strategy: Recreate`); if node {on} is down, see \
             `kubectl volguard explain node {on}`"
        ),
        (None, Fits::Unread) => format!(
            "it runs on {on} if its nodeSelector and node affinity allow that node (its labels were not read) \
             and it fits there, else it waits until {holder} ends (for a Deployment use `strategy: Recreate`); \
             if node {on} is down, see `kubectl volguard explain node {on}`"
        ),
    });
}

/// The ReadWriteOnce volume still attached to another node (the "Multi-Attach error").
fn attached_elsewhere(pod: &Pod, c: &ClaimFacts<'_>, volume: Option<&str>, found: &mut Findings) {
    let Some(a) = c
        .attachments
        .iter()
        .find(|a| a.attached && pod.node_name() != Some(a.node.as_str()))
    else {
        return;
    };
    found.blocked.push(format!(
        "volume {} is still attached to node {} (the \"Multi-Attach error\")",
        volume.unwrap_or("?"),
        a.node
    ));
    found.steps.push(format!(
        "it detaches once no pod on node {} uses it; do not delete VolumeAttachment {} by hand (that races \
         the attach/detach controller and can put two nodes on the volume)",
        a.node, a.name
    ));
}

pub fn table(e: &PodExplanation) -> String {
    let mut out = format!("Pod {}/{}\n", e.namespace, e.name);
    out.push_str(&format!("  phase:        {}\n", e.phase));
    out.push_str(&format!(
        "  node:         {}\n",
        e.node.as_deref().unwrap_or("(not scheduled)")
    ));
    out.push_str("  claims:\n");
    if e.claims.is_empty() {
        out.push_str("    (none)\n");
    }
    for c in &e.claims {
        out.push_str(&format!(
            "    {} {}{}{}\n",
            c.name,
            c.state,
            c.volume
                .as_deref()
                .map(|v| format!(" to {v}"))
                .unwrap_or_default(),
            if c.read_write_once {
                " (ReadWriteOnce)"
            } else {
                ""
            }
        ));
        if !c.used_by.is_empty() {
            out.push_str(&format!("      used by:  {}\n", c.used_by.join(", ")));
        }
        if let Some(l) = &c.rwo_lock {
            out.push_str(&format!(
                "      rwo lock: node {} (pod {}, since {})\n",
                l.node, l.pod, l.at
            ));
        }
        for a in &c.attachments {
            out.push_str(&format!(
                "      attached: {} on node {} ({})\n",
                a.name,
                a.node,
                if a.attached { "attached" } else { "detached" }
            ));
        }
    }
    if !e.blocked.is_empty() {
        out.push_str("  blocked by:\n");
        for b in &e.blocked {
            out.push_str(&format!("    {b}\n"));
        }
    }
    out.push_str(&format!("  next:         {}\n", e.next));
    out
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
