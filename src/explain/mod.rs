//! `volguard explain pvc|pv|node NAME` (also `kubectl volguard explain ...`): why is this volume
//! still here, who uses it, why is this node fenced or not released, and what to do next (rules.md
//! §6, §7). `build_*` are pure over the objects read;
//! `run` reads them from a live cluster or a `--state` file and prints table, JSON or YAML.

mod live;
pub mod node;
pub mod pod;

use crate::cli::{ExplainArgs, ExplainKind};
use crate::model::fence::NodeFence;
use crate::model::{PV_FINALIZER, PVC_FINALIZER, Pod, Pv, Pvc};
use crate::report::{SinceSource, unused_since};
use crate::rules::Fact;
use crate::rules::in_use::{blocking_pods, pv_in_use};
use crate::state;
use serde::Serialize;

/// A VolumeAttachment of the PV (storage.k8s.io/v1): the CSI attacher's record of the volume on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    pub name: String,
    pub node: String,
    pub attached: bool,
    pub terminating: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalizerInfo {
    pub name: String,
    /// Who removes it: volguard / kube-controller-manager / external-attacher / a CSI driver / other.
    pub owner: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockingPod {
    pub name: String,
    pub phase: String,
    pub node: String,
    pub finished: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub kind: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    pub phase: String,
    /// `deletionTimestamp` when the object is being deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleting_since: Option<String>,
    pub finalizers: Vec<FinalizerInfo>,
    /// PVC: its volume; PV: its claim (`namespace/name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_to: Option<String>,
    pub blocking_pods: Vec<BlockingPod>,
    pub volume_attachments: Vec<Attachment>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unused_since: Option<String>,
    pub unused_since_source: SinceSource,
    /// The RWO lock (rules.md §2f): which node and pod hold the claim, since when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rwo_lock: Option<crate::rules::rwo_lock::RwoLock>,
    /// Pods of the claim on a partitioned node, and the incident that handles each (rules.md §7).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<PartitionWait>,
    /// What the caller may not read (RBAC), left out of this explanation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_read: Vec<String>,
    /// One line: what to do next.
    pub next: String,
}

/// A claim's pod waits on a partitioned node; a fencing incident handles it (docs/fencing.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionWait {
    pub pod: String,
    pub node: String,
    pub incident: String,
    pub phase: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The incident of each blocking pod's node: the open one, else the latest that failed.
fn partitions(blocking: &[BlockingPod], fences: &[NodeFence]) -> Vec<PartitionWait> {
    use crate::model::fence::Phase;
    blocking
        .iter()
        .filter_map(|b| {
            let of_node = fences.iter().filter(|f| f.spec.node == b.node);
            let f = of_node
                .clone()
                .filter(|f| !f.status.phase.is_final())
                .chain(of_node.filter(|f| f.status.phase == Phase::Failed))
                .next()?;
            Some(PartitionWait {
                pod: b.name.clone(),
                node: b.node.clone(),
                incident: f.metadata.name.clone(),
                phase: f.status.phase.as_str(),
                message: f.status.message.clone(),
            })
        })
        .collect()
}

/// Who removes a finalizer, from its name.
pub fn finalizer_owner(f: &str) -> String {
    match f {
        PVC_FINALIZER => "kube-controller-manager (pvc-protection-controller) or volguard controller, once no pod uses the claim".into(),
        PV_FINALIZER => "kube-controller-manager (pv-protection-controller) or volguard controller, once the volume is not Bound".into(),
        "external-provisioner.volume.kubernetes.io/finalizer" => {
            "CSI external-provisioner, once the volume is deleted in the storage backend".into()
        }
        "kubernetes.io/pv-controller" => "kube-controller-manager (persistent volume controller)".into(),
        f if f.starts_with("external-attacher/") => format!(
            "CSI external-attacher of driver {}, once the volume is detached from every node",
            f.trim_start_matches("external-attacher/").replace('-', ".")
        ),
        f if f.starts_with("snapshot.storage.kubernetes.io/") => {
            "CSI snapshot controller, once no VolumeSnapshot is taken from it".into()
        }
        f if f.contains(".csi.") || f.ends_with(".csi") => format!("a CSI driver ({f})"),
        _ => "other (not a storage finalizer volguard knows)".into(),
    }
}

fn finalizers(list: Option<&Vec<String>>) -> Vec<FinalizerInfo> {
    list.into_iter()
        .flatten()
        .map(|f| FinalizerInfo {
            name: f.clone(),
            owner: finalizer_owner(f),
        })
        .collect()
}

/// Explain a PVC from the claim, its PV (if bound and found), the pods of its namespace and the
/// PV's VolumeAttachments.
pub fn build_pvc(
    pvc: &Pvc,
    pv: Option<&Pv>,
    pods: &[Pod],
    vas: &[Attachment],
    fences: &[NodeFence],
) -> Explanation {
    let blocking: Vec<BlockingPod> = blocking_pods(pvc, pods)
        .into_iter()
        .map(|p| BlockingPod {
            name: p.metadata.name.clone(),
            phase: p.phase().to_string(),
            node: p.node_name().unwrap_or("none").to_string(),
            finished: p.is_terminal(),
        })
        .collect();
    let (since, source) = unused_since(pvc);
    let waits = partitions(&blocking, fences);
    let m = &pvc.metadata;
    let other_finalizers: Vec<&String> = m
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != PVC_FINALIZER)
        .collect();
    let next = if m.is_terminating() {
        if !blocking.is_empty() {
            let (done, running): (Vec<_>, Vec<_>) = blocking.iter().partition(|b| b.finished);
            let mut parts = Vec::new();
            if !done.is_empty() {
                parts.push(format!(
                    "delete finished pod(s) {} ({})",
                    names(&done),
                    delete_command(&m.namespace, &done)
                ));
            }
            if !running.is_empty() {
                parts.push(format!(
                    "stop pod(s) {} (scale down or delete their owner)",
                    names(&running)
                ));
            }
            format!(
                "{}; the claim is then released by itself. Do not remove {PVC_FINALIZER} by hand: the volume would be deleted under running pods",
                parts.join(" and ")
            )
        } else if m.has_finalizer(PVC_FINALIZER) {
            "no pod uses it: the protection finalizer is removed within seconds; if it stays, check that the volguard controller (or kube-controller-manager) runs".into()
        } else if let Some(f) = other_finalizers.first() {
            format!("waiting for {}: {}", f, finalizer_owner(f))
        } else {
            "nothing holds it any more: it disappears at once".into()
        }
    } else if blocking.iter().any(|b| !b.finished) {
        let running: Vec<&BlockingPod> = blocking.iter().filter(|b| !b.finished).collect();
        format!(
            "in use by pod(s) {}; deleting the claim now would wait until they end",
            names(&running)
        )
    } else if !blocking.is_empty() {
        // One vocabulary with `report unused`: no running pod means unused, even while finished
        // pods still name the claim (and would hold a deletion).
        let done: Vec<&BlockingPod> = blocking.iter().collect();
        format!(
            "unused{} (no running pod); finished pod(s) {} still name it and would hold a deletion: delete them first ({}), then the claim if nobody needs its data",
            since
                .as_deref()
                .map(|t| format!(" since {t}"))
                .unwrap_or_default(),
            names(&done),
            delete_command(&m.namespace, &done)
        )
    } else if let Some(t) = &since {
        format!(
            "not used by any pod since {t}: delete it if nobody needs its data (reclaim policy of its volume decides what happens to the data)"
        )
    } else {
        "not terminating; nothing to do".into()
    };
    let next = match waits.first() {
        Some(w) => format!(
            "pod {} waits on partitioned node {}: fencing incident {} ({}) handles it (kubectl get nodefence {}); {next}",
            w.pod, w.node, w.incident, w.phase, w.incident
        ),
        None => next,
    };
    Explanation {
        kind: "PersistentVolumeClaim",
        namespace: m.namespace.clone(),
        name: m.name.clone(),
        phase: pvc.status.phase.as_deref().unwrap_or("Unknown").into(),
        deleting_since: m.deletion_timestamp.clone(),
        finalizers: finalizers(m.finalizers.as_ref()),
        bound_to: pvc.volume_name().map(|v| match pv {
            Some(_) => v.to_string(),
            None => format!("{v} (not found)"),
        }),
        blocking_pods: blocking,
        volume_attachments: vas.to_vec(),
        unused_since: since,
        unused_since_source: source,
        rwo_lock: crate::rules::rwo_lock::RwoLock::of(pvc),
        partitions: waits,
        not_read: Vec::new(),
        next,
    }
}

/// Explain a PV from the volume, its claim (if any and found) and its VolumeAttachments.
pub fn build_pv(pv: &Pv, claim: Option<&Pvc>, vas: &[Attachment]) -> Explanation {
    let m = &pv.metadata;
    let claim_ref = pv
        .spec
        .claim_ref
        .as_ref()
        .map(|c| format!("{}/{}", c.namespace, c.name));
    let live_attachments: Vec<&Attachment> = vas.iter().filter(|a| a.attached).collect();
    let next = if m.is_terminating() {
        if pv_in_use(pv) {
            match (&claim_ref, claim) {
                (Some(c), Some(_)) => format!(
                    "it is Bound to claim {c}: delete the claim first (volguard explain pvc {} -n {})",
                    c.split('/').nth(1).unwrap_or_default(),
                    c.split('/').next().unwrap_or_default()
                ),
                (Some(c), None) => format!(
                    "it is Bound to claim {c}, which no longer exists: kube-controller-manager moves it to Released shortly"
                ),
                (None, _) => "it is Bound: wait for the persistent volume controller".into(),
            }
        } else if let Some(a) = live_attachments.first() {
            format!(
                "still attached to node {} (VolumeAttachment {}): the CSI attacher detaches it once no pod on that node uses it; if the node is gone, delete the Node object",
                a.node, a.name
            )
        } else if let Some(f) = m.finalizers.iter().flatten().find(|f| *f != PV_FINALIZER) {
            format!("waiting for {f}: {}", finalizer_owner(f))
        } else if m.has_finalizer(PV_FINALIZER) {
            "not Bound: the protection finalizer is removed within seconds; if it stays, check that the volguard controller (or kube-controller-manager) runs".into()
        } else {
            "nothing holds it any more: it disappears at once".into()
        }
    } else if pv_in_use(pv) {
        format!(
            "Bound to {}; not being deleted",
            claim_ref.clone().unwrap_or_else(|| "a claim".into())
        )
    } else {
        "not Bound and not being deleted; nothing to do".into()
    };
    Explanation {
        kind: "PersistentVolume",
        namespace: String::new(),
        name: m.name.clone(),
        phase: pv.status.phase.as_deref().unwrap_or("Unknown").into(),
        deleting_since: m.deletion_timestamp.clone(),
        finalizers: finalizers(m.finalizers.as_ref()),
        bound_to: claim_ref,
        blocking_pods: Vec::new(),
        volume_attachments: vas.to_vec(),
        unused_since: None,
        unused_since_source: SinceSource::Unknown,
        rwo_lock: None,
        partitions: Vec::new(),
        not_read: Vec::new(),
        next,
    }
}

/// `kubectl delete pod -n NS A B`.
fn delete_command(namespace: &str, pods: &[&BlockingPod]) -> String {
    let names: Vec<&str> = pods.iter().map(|b| b.name.as_str()).collect();
    format!("kubectl delete pod -n {namespace} {}", names.join(" "))
}

fn names(pods: &[&BlockingPod]) -> String {
    pods.iter()
        .map(|b| b.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The table form: one fact per line, for people.
pub fn table(e: &Explanation) -> String {
    let mut out = String::new();
    let id = if e.namespace.is_empty() {
        e.name.clone()
    } else {
        format!("{}/{}", e.namespace, e.name)
    };
    out.push_str(&format!("{} {id}\n", e.kind));
    out.push_str(&format!("  phase:        {}\n", e.phase));
    out.push_str(&format!(
        "  deletion:     {}\n",
        e.deleting_since
            .as_deref()
            .map_or("not requested".to_string(), |t| format!("requested at {t}"))
    ));
    if let Some(b) = &e.bound_to {
        out.push_str(&format!("  bound to:     {b}\n"));
    }
    out.push_str("  finalizers:\n");
    if e.finalizers.is_empty() {
        out.push_str("    (none)\n");
    }
    for f in &e.finalizers {
        out.push_str(&format!("    {}  (removed by {})\n", f.name, f.owner));
    }
    if e.kind == "PersistentVolumeClaim" {
        // "Used" as `report unused` counts it: by a pod that has not finished.
        out.push_str("  used by:\n");
        let (done, running): (Vec<_>, Vec<_>) = e.blocking_pods.iter().partition(|p| p.finished);
        if running.is_empty() {
            out.push_str("    (no running pod)\n");
        }
        for p in running {
            out.push_str(&format!(
                "    {} ({} on node {})\n",
                p.name, p.phase, p.node
            ));
        }
        if !done.is_empty() {
            out.push_str("  finished pods still naming it (they hold a deletion):\n");
            for p in done {
                out.push_str(&format!(
                    "    {} ({} on node {}): delete pod {} to release it\n",
                    p.name, p.phase, p.node, p.name
                ));
            }
        }
        out.push_str(&format!(
            "  unused since: {}\n",
            match (&e.unused_since, e.unused_since_source) {
                (Some(t), SinceSource::Condition) => format!("{t} (Unused condition)"),
                (Some(t), SinceSource::Created) => format!(
                    "{t} (created then; its volguard.io/unused-since predates the claim, e.g. restored from a backup)"
                ),
                (Some(t), _) => format!("{t} (volguard.io/unused-since)"),
                (None, _) if e.blocking_pods.iter().any(|p| !p.finished) => "(in use)".into(),
                (None, _) => "not yet observed (the controller marks it within a reconcile)".into(),
            }
        ));
    }
    if e.kind == "PersistentVolumeClaim" {
        out.push_str(&format!(
            "  rwo lock:     {}\n",
            match &e.rwo_lock {
                Some(l) => format!(
                    "node {} (pod {}, since {}): pods on other nodes wait until it ends (volguard.io/rwo-lock)",
                    l.node, l.pod, l.at
                ),
                None => "none".into(),
            }
        ));
    }
    for w in &e.partitions {
        out.push_str(&format!(
            "  partition:    pod {} waits on node {}: incident {} ({}){}\n",
            w.pod,
            w.node,
            w.incident,
            w.phase,
            w.message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ));
    }
    out.push_str("  volume attachments:\n");
    if e.volume_attachments.is_empty() {
        out.push_str("    (none)\n");
    }
    for a in &e.volume_attachments {
        out.push_str(&format!(
            "    {} on node {} ({}{})\n",
            a.name,
            a.node,
            if a.attached { "attached" } else { "detached" },
            if a.terminating { ", being deleted" } else { "" }
        ));
    }
    if !e.not_read.is_empty() {
        out.push_str(&format!(
            "  not read:     {}: you may not read them; shown without them\n",
            e.not_read.join(", ")
        ));
    }
    out.push_str(&format!("  next:         {}\n", e.next));
    out
}

/// Read, explain, print.
pub async fn run(args: ExplainArgs) -> anyhow::Result<()> {
    let (view, client, ns, file) = match &args.state {
        Some(path) => {
            let view = state::open(state::Source::File(path), state::Needs::default())?;
            let ns = args.namespace.clone().unwrap_or_else(|| "default".into());
            (view, None, ns, Some(path.display().to_string()))
        }
        None => {
            let client = crate::runtime::kube::client_for(
                args.kubeconfig.as_deref(),
                args.context.as_deref(),
            )
            .await?;
            let ns = args
                .namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string());
            // A one-shot view with nothing cached: every read below is a live read (the
            // namespace's pods by a consistent LIST, as the controller reads them).
            let view = state::Cluster::Live(state::live::LiveCluster::from_store(
                client.clone(),
                std::sync::Arc::new(state::Store::default()),
                false,
            ));
            (view, Some(client), ns, None)
        }
    };
    let text = match args.kind {
        ExplainKind::Node => {
            let e = gather_node(&view, client.as_ref(), &args, file).await?;
            render(&e, args.output, node::table, format!("node/{}", e.name))?
        }
        ExplainKind::Pod => {
            let e = gather_pod(&view, client.as_ref(), &ns, &args, file).await?;
            render(&e, args.output, pod::table, format!("pod/{}", e.name))?
        }
        ExplainKind::Pvc | ExplainKind::Pv => {
            let e = gather(&view, client.as_ref(), &ns, &args, file).await?;
            let name = format!("{}/{}", e.kind.to_ascii_lowercase(), e.name);
            render(&e, args.output, table, name)?
        }
    };
    print!("{text}");
    Ok(())
}

/// One explanation in the format asked for (`name`: what `-o name` prints).
fn render<T: Serialize>(
    e: &T,
    format: crate::report::render::Format,
    table: fn(&T) -> String,
    name: String,
) -> anyhow::Result<String> {
    use crate::report::render::Format;
    Ok(match format {
        Format::Table | Format::Wide => table(e),
        Format::Name => name + "\n",
        Format::Json => serde_json::to_string_pretty(e)? + "\n",
        Format::Yaml => serde_yaml::to_string(e)?,
    })
}

/// The facts of `explain pod`: the pod, each of its claims and their volumes, the volumes'
/// VolumeAttachments (live), the namespace's pods that name the same claims (a consistent read),
/// and the fencing incidents.
async fn gather_pod(
    view: &state::Cluster,
    client: Option<&kube::Client>,
    ns: &str,
    args: &ExplainArgs,
    file: Option<String>,
) -> anyhow::Result<pod::PodExplanation> {
    let p = found(view.pod(ns, &args.name).await)?.ok_or_else(|| NotFound {
        resource: "pods",
        name: args.name.clone(),
        namespace: Some(ns.to_string()),
        file: file.clone(),
    })?;
    let names: Vec<String> = crate::rules::claims::claims_of(&p)
        .map(|c| c.name)
        .collect();
    let mut not_read = Vec::new();
    let mut pvcs = Vec::new();
    let mut pvs = Vec::new();
    let mut vas = Vec::new();
    for c in &names {
        let pvc = found(view.pvc(ns, c).await)?;
        let pv = match pvc.as_ref().and_then(|p| p.volume_name()) {
            Some(v) => match view.pv(v).await {
                Fact::Unknown(crate::rules::decision::ReadError::Refused { code: 403, .. }) => None,
                f => found(f)?,
            },
            None => None,
        };
        let va = match (&pv, client) {
            (Some(pv), Some(c)) => live::attachments(c, &pv.metadata.name, &mut not_read).await?,
            _ => Vec::new(),
        };
        pvcs.push(pvc);
        pvs.push(pv);
        vas.push(va);
    }
    let others = match view
        .pods_consistent(ns, |o| {
            crate::rules::claims::claims_of(o).any(|c| names.contains(&c.name))
        })
        .await
    {
        Fact::Found(p) => p,
        Fact::Missing => Vec::new(),
        Fact::Unknown(e) => anyhow::bail!("cannot list the pods of {ns:?}: {e}"),
    };
    let fences = all_fences(view, client, &mut not_read).await?;
    let facts: Vec<pod::ClaimFacts<'_>> = names
        .iter()
        .enumerate()
        .map(|(i, n)| pod::ClaimFacts {
            name: n.clone(),
            pvc: pvcs[i].as_deref(),
            pv: pvs[i].as_deref(),
            attachments: vas[i].clone(),
        })
        .collect();
    Ok(pod::build(&p, &facts, &others, &fences))
}

/// The facts of `explain node`: the Node, its Lease (live), its NodeFence incidents and records,
/// and the pods scheduled on it. A Node that no longer exists is explained too (its records say
/// whether its release was proven); a node nobody ever knew of is not found.
async fn gather_node(
    view: &state::Cluster,
    client: Option<&kube::Client>,
    args: &ExplainArgs,
    file: Option<String>,
) -> anyhow::Result<node::NodeExplanation> {
    let name = args.name.as_str();
    let n = found(view.node_confirmed(name).await)?;
    let lease = match view.lease_renewed(name).await {
        Fact::Found(t) => t,
        Fact::Missing | Fact::Unknown(_) => None,
    };
    let fences: Vec<NodeFence> = match view.fences_of_node(name).await {
        Fact::Found(f) => f.iter().map(|f| (**f).clone()).collect(),
        Fact::Missing => Vec::new(),
        Fact::Unknown(e) => {
            anyhow::bail!("cannot read the NodeFence records of node {name:?}: {e}")
        }
    };
    let pods = match client {
        Some(c) => match state::live::list_pods_on_node(c, name, |_| true).await {
            Fact::Found(p) => p,
            Fact::Missing => Vec::new(),
            Fact::Unknown(e) => anyhow::bail!("cannot list the pods on node {name:?}: {e}"),
        },
        None => view
            .store()
            .pods
            .all()
            .iter()
            .filter(|p| p.node_name() == Some(name))
            .map(|p| (**p).clone())
            .collect(),
    };
    if n.is_none() && fences.is_empty() && pods.is_empty() {
        return Err(NotFound {
            resource: "nodes",
            name: name.to_string(),
            namespace: None,
            file,
        }
        .into());
    }
    let alive = n.as_ref().and_then(|n| {
        crate::rules::fencing::alive(
            n.ready(),
            lease,
            args.partition_after,
            jiff::Timestamp::now(),
        )
    });
    Ok(node::build(&node::Facts {
        name,
        node: n.as_deref(),
        lease_renewed: lease,
        alive,
        fences: &fences,
        pods: &pods,
    }))
}

pub use crate::error::NotFound;

/// The facts of one explanation, read through the view (a file or a live cluster); the
/// VolumeAttachments only live (`client`). `file` names the state file in a not-found error.
async fn gather(
    view: &state::Cluster,
    client: Option<&kube::Client>,
    ns: &str,
    args: &ExplainArgs,
    file: Option<String>,
) -> anyhow::Result<Explanation> {
    match args.kind {
        ExplainKind::Pvc => {
            let pvc = found(view.pvc(ns, &args.name).await)?.ok_or_else(|| NotFound {
                resource: "persistentvolumeclaims",
                name: args.name.clone(),
                namespace: Some(ns.to_string()),
                file: file.clone(),
            })?;
            let mut not_read = Vec::new();
            let pv = match pvc.volume_name() {
                Some(v) => match view.pv(v).await {
                    // A namespace's user may not read PersistentVolumes (cluster-scoped).
                    Fact::Unknown(crate::rules::decision::ReadError::Refused {
                        code: 403, ..
                    }) => {
                        not_read.push("persistentvolumes (forbidden)".to_string());
                        None
                    }
                    f => found(f)?,
                },
                None => None,
            };
            let claim = pvc.metadata.name.clone();
            let pods = match view
                .pods_consistent(ns, |p| {
                    crate::rules::claims::claims_of(p).any(|c| c.name == claim)
                })
                .await
            {
                Fact::Found(p) => p,
                Fact::Missing => Vec::new(),
                Fact::Unknown(e) => anyhow::bail!("cannot list the pods of {ns:?}: {e}"),
            };
            let vas = match (&pv, client) {
                (Some(pv), Some(c)) => {
                    live::attachments(c, &pv.metadata.name, &mut not_read).await?
                }
                _ => Vec::new(),
            };
            let fences = all_fences(view, client, &mut not_read).await?;
            let mut e = build_pvc(&pvc, pv.as_deref(), &pods, &vas, &fences);
            if not_read.iter().any(|n| n.starts_with("persistentvolumes"))
                && let Some(v) = pvc.volume_name()
            {
                e.bound_to = Some(format!("{v} (not read)"));
            }
            e.not_read = not_read;
            Ok(e)
        }
        ExplainKind::Pv => {
            let pv = found(view.pv(&args.name).await)?.ok_or_else(|| NotFound {
                resource: "persistentvolumes",
                name: args.name.clone(),
                namespace: None,
                file: file.clone(),
            })?;
            let claim = match &pv.spec.claim_ref {
                Some(c) => found(view.pvc(&c.namespace, &c.name).await)?,
                None => None,
            };
            let mut not_read = Vec::new();
            let vas = match client {
                Some(c) => live::attachments(c, &pv.metadata.name, &mut not_read).await?,
                None => Vec::new(),
            };
            let mut e = build_pv(&pv, claim.as_deref(), &vas);
            e.not_read = not_read;
            Ok(e)
        }
        ExplainKind::Node | ExplainKind::Pod => {
            anyhow::bail!("nodes and pods have their own explanations")
        }
    }
}

/// Every fencing incident: live (what the caller may read), or the state file's.
async fn all_fences(
    view: &state::Cluster,
    client: Option<&kube::Client>,
    not_read: &mut Vec<String>,
) -> anyhow::Result<Vec<NodeFence>> {
    Ok(match client {
        Some(c) => live::fences(c, not_read).await?,
        None => view
            .store()
            .fences
            .all()
            .iter()
            .map(|f| (**f).clone())
            .collect(),
    })
}

/// A read's answer for a reader that must not guess: absent, present, or an error.
fn found<T>(f: Fact<std::sync::Arc<T>>) -> anyhow::Result<Option<std::sync::Arc<T>>> {
    match f {
        Fact::Found(t) => Ok(Some(t)),
        Fact::Missing => Ok(None),
        Fact::Unknown(e) => Err(e.into()),
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
