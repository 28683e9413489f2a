//! `volguard explain node NAME`: why is this node fenced, tainted, or not released (rules.md §7),
//! and what to do. `build` is pure over what was read; `table` prints it.

use crate::model::fence::{FENCE_INCIDENT, NodeFence, Phase};
use crate::model::{Node, Pod};
use crate::rules::claims::claims_of;
use crate::rules::proof::{BreakGlass, Key, Read, Reader};
use serde::Serialize;

/// One NodeFence of the node: an incident volguard drives, or a release record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Incident {
    pub name: String,
    pub phase: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A release record: what was released outside volguard's fencing, by whom, on what proof.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
}

/// A pod on the node that uses claims: what its node's release would release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    pub pod: String,
    pub phase: String,
    pub terminating: bool,
    pub claims: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeExplanation {
    pub kind: &'static str,
    pub name: String,
    /// The Node object exists.
    pub exists: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// The Lease's renewTime as read (live only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_renewed: Option<String>,
    /// Why the node counts as alive (Ready, or its Lease renewed within --partition-after).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alive: Option<String>,
    pub out_of_service: bool,
    /// Who the taint's proof names: volguard's incident, or a person's stamped confirmation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tainted_on: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed_down_by: Option<String>,
    pub incidents: Vec<Incident>,
    pub pods: Vec<Waiting>,
    pub next: String,
}

/// What is known of the node, as read.
pub struct Facts<'a> {
    pub name: &'a str,
    pub node: Option<&'a Node>,
    /// The Lease's renewTime as read (`Found(None)`: no Lease; `Unknown`: not read).
    pub lease: crate::rules::Fact<Option<jiff::Timestamp>>,
    pub alive: Option<String>,
    pub fences: &'a [NodeFence],
    /// The node's pods (any namespace).
    pub pods: &'a [Pod],
}

pub fn build(f: &Facts<'_>) -> NodeExplanation {
    let name = f.name;
    let mut fences: Vec<&NodeFence> = f.fences.iter().filter(|x| x.spec.node == name).collect();
    fences.sort_by_key(|x| std::cmp::Reverse(x.metadata.creation_timestamp));
    let incidents = fences
        .iter()
        .map(|x| Incident {
            name: x.metadata.name.clone(),
            phase: match x.spec.release {
                Some(_) => "Recorded",
                None => x.status.phase.as_str(),
            },
            backend: x.status.backend.map(|b| b.as_str()),
            message: x.status.message.clone(),
            release: x.spec.release.as_ref().map(|r| {
                format!(
                    "{:?} by {} ({}{})",
                    r.action,
                    r.by,
                    r.proof,
                    match r.pods.len() {
                        0 => String::new(),
                        n => format!("; released {n} pod(s)"),
                    }
                )
            }),
        })
        .collect();
    let pods: Vec<Waiting> = f
        .pods
        .iter()
        .filter(|p| p.node_name() == Some(name) && !p.is_terminal())
        .filter(|p| claims_of(p).next().is_some())
        .map(|p| Waiting {
            pod: format!("{}/{}", p.metadata.namespace, p.metadata.name),
            phase: p.phase().to_string(),
            terminating: p.metadata.deletion_timestamp.is_some(),
            claims: claims_of(p).map(|c| c.name).collect(),
        })
        .collect();
    let out_of_service = f.node.is_some_and(Node::is_out_of_service);
    let annotation = |k: &str| {
        f.node
            .and_then(|n| n.metadata.annotation(k))
            .map(str::to_string)
    };
    // As the guards read it (without the expiry, which only the webhook's flags know).
    let confirmed_down_by = f.node.and_then(|n| {
        match Reader::new(BreakGlass::Anyone).read(&n.metadata, Key::ConfirmNodeDown) {
            Read::Absent => None,
            Read::Valid(p) => Some(p.by().to_string()),
            Read::Ignored(why) => Some(format!("nobody that counts: {why}")),
        }
    });
    let tainted_on = match (out_of_service, annotation(FENCE_INCIDENT)) {
        (false, _) => None,
        (true, Some(i)) => Some(format!("volguard's incident {i}")),
        (true, None) => Some(match &confirmed_down_by {
            Some(who) => format!("a person's confirmation ({who})"),
            None => "no proof volguard knows of (added while volguard was down, or by a trusted remediator)".into(),
        }),
    };
    let next = next(f, &fences, &pods, out_of_service);
    NodeExplanation {
        kind: "Node",
        name: name.to_string(),
        exists: f.node.is_some(),
        ready: f.node.and_then(Node::ready),
        lease_renewed: f.lease.found().copied().flatten().map(|t| t.to_string()),
        alive: f.alive.clone(),
        out_of_service,
        tainted_on,
        confirmed_down_by,
        incidents,
        pods,
        next,
    }
}

/// One line: what to do about this node.
fn next(f: &Facts<'_>, fences: &[&NodeFence], pods: &[Waiting], tainted: bool) -> String {
    let name = f.name;
    let open = fences
        .iter()
        .find(|x| !x.status.phase.is_final() && !x.is_release_record());
    let newest_pod = f
        .pods
        .iter()
        .filter(|p| p.node_name() == Some(name))
        .filter_map(|p| p.metadata.creation_timestamp)
        .max();
    // As the guards read it (a Lease renewed after the record voids it, one not read proves
    // nothing).
    let proof = crate::rules::fencing::gone_on_record(
        &fences
            .iter()
            .map(|x| std::sync::Arc::new((*x).clone()))
            .collect::<Vec<_>>(),
        name,
        newest_pod,
        &f.lease,
    )
    .map(|x| x.metadata.name.clone());
    if f.node.is_none() {
        return match (&proof, pods.is_empty()) {
            (_, true) => "the Node is gone and no pod on it uses a claim: nothing to do".into(),
            (Some(p), false) => format!(
                "the Node is gone, its release recorded in nodefence {p}: PodGC removes its pods and their volumes move"
            ),
            (None, false) => format!(
                "the Node is gone but nothing records that its machine is off: its pods and their volumes wait. Once you \
                 know the machine is off: kubectl volguard fence confirm {name}"
            ),
        };
    }
    if let Some(i) = open {
        return incident_next(i, name);
    }
    if let Some(failed) = fences.iter().find(|x| x.status.phase == Phase::Failed)
        && f.alive.is_none()
        && !tainted
    {
        return format!(
            "incident {} failed ({}): nothing was released. Fence the machine by hand, then kubectl volguard fence \
             confirm {name}; or delete the incident (kubectl delete nodefence {}) to let volguard try again",
            failed.metadata.name,
            failed
                .status
                .message
                .as_deref()
                .unwrap_or("see its evidence"),
            failed.metadata.name
        );
    }
    if tainted {
        return "out of service: PodGC removes its pods and their volumes detach; remove the taint once the machine is \
                repaired and rebooted"
            .into();
    }
    let ready = f.node.and_then(Node::ready);
    match (&f.alive, pods.is_empty()) {
        (Some(why), _) => format!("healthy ({why}): nothing to do"),
        (None, true) => "no pod on it uses a claim: nothing of volguard's waits on it".into(),
        (None, false) if ready.is_none() && f.lease.found().copied().flatten().is_none() => {
            "no heartbeat read (no Ready condition, no Lease): volguard releases nothing on it until it is NotReady \
             with a silent Lease and a fence or a person proves the machine off"
                .into()
        }
        // Whether its claims are opted in is not read here: say what happens either way.
        (None, false) => format!(
            "not Ready and not fenced yet: its pods keep their volumes. Where their claims are opted in to fencing \
             (volguard.io/fencing on the StorageClass, namespace or pod) volguard opens an incident once its Lease \
             has been silent for --partition-after (kubectl get nodefences); otherwise, or sooner, once you know the \
             machine is off: kubectl volguard fence confirm {name}"
        ),
    }
}

/// What to do about a node an open incident handles.
fn incident_next(i: &NodeFence, name: &str) -> String {
    let msg = i.status.message.clone().unwrap_or_default();
    match i.status.phase {
        Phase::Fencing if i.status.backend == Some(crate::model::fence::BackendKind::Manual) => {
            format!(
                "incident {} waits for a person: check the machine is off, then kubectl volguard fence confirm {name}",
                i.metadata.name
            )
        }
        Phase::Detected | Phase::Fencing => format!(
            "incident {} is fencing it ({msg}); its volumes move once the fence is proven",
            i.metadata.name
        ),
        Phase::Fenced if !i.status.uncovered.is_empty() => {
            format!("incident {} holds: {msg}", i.metadata.name)
        }
        Phase::Fenced => format!(
            "incident {} proved the fence; the taint follows",
            i.metadata.name
        ),
        Phase::Released => format!(
            "released by incident {}: repair the machine (the taint goes once it returns, after a reboot) or delete the Node",
            i.metadata.name
        ),
        Phase::Recovering => format!("incident {} holds the taint: {msg}", i.metadata.name),
        Phase::Done | Phase::Failed | Phase::Aborted => msg,
    }
}

pub fn table(e: &NodeExplanation) -> String {
    let mut out = format!("Node {}\n", e.name);
    let line = |out: &mut String, k: &str, v: String| out.push_str(&format!("  {k:<13} {v}\n"));
    line(
        &mut out,
        "exists:",
        if e.exists {
            "yes".into()
        } else {
            "no (deleted)".into()
        },
    );
    if e.exists {
        line(
            &mut out,
            "ready:",
            match e.ready {
                Some(true) => "True".into(),
                Some(false) => "False (or Unknown)".into(),
                None => "not reported".into(),
            },
        );
        line(
            &mut out,
            "lease:",
            e.lease_renewed
                .clone()
                .map_or("not read".into(), |t| format!("renewed {t}")),
        );
        line(
            &mut out,
            "heartbeat:",
            e.alive
                .clone()
                .unwrap_or_else(|| "none (down or partitioned)".into()),
        );
        line(
            &mut out,
            "tainted:",
            match &e.tainted_on {
                Some(on) => format!("yes, on {on}"),
                None => "no".into(),
            },
        );
        if let Some(who) = &e.confirmed_down_by {
            line(&mut out, "confirmed by:", who.clone());
        }
    }
    incident_and_pod_lines(e, &mut out);
    out.push_str(&format!("  next:         {}\n", e.next));
    out
}

fn incident_and_pod_lines(e: &NodeExplanation, out: &mut String) {
    out.push_str("  incidents:\n");
    if e.incidents.is_empty() {
        out.push_str("    (none)\n");
    }
    for i in &e.incidents {
        out.push_str(&format!(
            "    {} {}{}{}\n",
            i.name,
            i.phase,
            i.backend.map(|b| format!(" ({b})")).unwrap_or_default(),
            i.release
                .as_deref()
                .or(i.message.as_deref())
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ));
    }
    out.push_str("  pods using claims:\n");
    if e.pods.is_empty() {
        out.push_str("    (none)\n");
    }
    for p in &e.pods {
        out.push_str(&format!(
            "    {} ({}{}): {}\n",
            p.pod,
            p.phase,
            if p.terminating { ", terminating" } else { "" },
            p.claims.join(", ")
        ));
    }
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
