//! `explain pvc|pv`, pure: what keeps a claim or a volume, from the objects read.

use super::*;

pub use crate::model::Attachment;

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

/// What a claim or volume is bound to, and whether it was read: data, not prose
/// (`{"name": "pv-1", "state": "notFound"}`); the table prints `pv-1 (not found)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BoundTo {
    /// The volume's name, or the claim's `namespace/name`.
    pub name: String,
    pub state: BoundState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum BoundState {
    Found,
    NotFound,
    /// The caller may not read it (RBAC).
    NotRead,
    /// Named by the object, not looked up (a PV's claimRef).
    Named,
}

impl std::fmt::Display for BoundTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let note = match self.state {
            BoundState::Found | BoundState::Named => "",
            BoundState::NotFound => " (not found)",
            BoundState::NotRead => " (not read)",
        };
        write!(f, "{}{note}", self.name)
    }
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
    pub bound_to: Option<BoundTo>,
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
    let next = if m.is_terminating() {
        next_terminating(pvc, &blocking)
    } else {
        next_live(pvc, &blocking, since.as_deref())
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
        deleting_since: m.deletion_timestamp.as_deref().map(str::to_string),
        finalizers: finalizers(m.finalizers.as_ref()),
        bound_to: pvc.volume_name().map(|v| BoundTo {
            name: v.to_string(),
            state: match pv {
                Some(_) => BoundState::Found,
                None => BoundState::NotFound,
            },
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

/// What to do about a claim being deleted.
fn next_terminating(pvc: &Pvc, blocking: &[BlockingPod]) -> String {
    let m = &pvc.metadata;
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
        return format!(
            "{}; the claim is then released by itself. Do not remove {PVC_FINALIZER} by hand: the volume would be deleted under running pods",
            parts.join(" and ")
        );
    }
    let other = m.finalizers.iter().flatten().find(|f| *f != PVC_FINALIZER);
    if m.has_finalizer(PVC_FINALIZER) {
        "no pod uses it: the protection finalizer is removed within seconds; if it stays, check that the volguard controller (or kube-controller-manager) runs".into()
    } else if let Some(f) = other {
        format!("waiting for {}: {}", f, finalizer_owner(f))
    } else {
        "nothing holds it any more: it disappears at once".into()
    }
}

/// What to do about a claim not being deleted: in use, unused (since when), or nothing.
fn next_live(pvc: &Pvc, blocking: &[BlockingPod], since: Option<&str>) -> String {
    let running: Vec<&BlockingPod> = blocking.iter().filter(|b| !b.finished).collect();
    if !running.is_empty() {
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
            since.map(|t| format!(" since {t}")).unwrap_or_default(),
            names(&done),
            delete_command(&pvc.metadata.namespace, &done)
        )
    } else if let Some(t) = since {
        format!(
            "not used by any pod since {t}: delete it if nobody needs its data (reclaim policy of its volume decides what happens to the data)"
        )
    } else {
        "not terminating; nothing to do".into()
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
        deleting_since: m.deletion_timestamp.as_deref().map(str::to_string),
        finalizers: finalizers(m.finalizers.as_ref()),
        bound_to: claim_ref.map(|name| BoundTo {
            name,
            state: BoundState::Named,
        }),
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
