//! `NodeFence` (volguard.io/v1alpha1, cluster-scoped): one partition incident, from detection to
//! recovery (rules.md §7). The record operators read (`kubectl get nodefences`) and the state the
//! fencing controller resumes from after a restart.

use serde::{Deserialize, Serialize};

pub const GROUP: &str = "volguard.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "NodeFence";
pub const PLURAL: &str = "nodefences";

/// StorageClass (and namespace, pod) annotation: `auto`, `manual` or `off` (rules.md §7 "Opt in").
pub const FENCING: &str = "volguard.io/fencing";
/// StorageClass annotation: this class's incidents use these backends, in order (comma list of
/// `webhook`, `networkfence`, `manual`), instead of `--fence-backends`.
pub const FENCE_BACKENDS: &str = "volguard.io/fence-backends";
/// Node annotation volguard's controller writes with the taint: the incident that proved it.
pub const FENCE_INCIDENT: &str = "volguard.io/fence-incident";
/// NodeFence label: the node (incidents are listed by node).
pub const NODE_LABEL: &str = "volguard.io/node";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// Partition seen; nothing asked of a backend yet.
    #[default]
    Detected,
    /// A backend was asked to fence (recorded before the call).
    Fencing,
    /// A backend confirmed and the node's Lease stayed silent since the request.
    Fenced,
    /// The out-of-service taint is on: PodGC and the attach/detach controller release the volumes.
    Released,
    /// The node is back: unfencing, the taint stays until that succeeds.
    Recovering,
    Done,
    /// Every backend failed or a fence did not hold: nothing was released.
    Failed,
    /// The node healed before the release: nothing was released.
    Aborted,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Detected => "Detected",
            Phase::Fencing => "Fencing",
            Phase::Fenced => "Fenced",
            Phase::Released => "Released",
            Phase::Recovering => "Recovering",
            Phase::Done => "Done",
            Phase::Failed => "Failed",
            Phase::Aborted => "Aborted",
        }
    }
    pub const ALL: [Phase; 8] = [
        Phase::Detected,
        Phase::Fencing,
        Phase::Fenced,
        Phase::Released,
        Phase::Recovering,
        Phase::Done,
        Phase::Failed,
        Phase::Aborted,
    ];
    /// Nothing more happens to an incident in this phase.
    pub fn is_final(self) -> bool {
        matches!(self, Phase::Done | Phase::Failed | Phase::Aborted)
    }
}

/// How a backend fences: by policy, in order (rules.md §7 "Fence").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// POST to a fence agent's HTTPS URL.
    Webhook,
    /// A csi-addons NetworkFence for the node's addresses.
    Networkfence,
    /// A person runs `kubectl volguard fence confirm NODE`.
    Manual,
}

impl crate::rules::Choices for BackendKind {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (
            BackendKind::Webhook,
            "webhook",
            "POST to a fence agent's HTTPS URL",
        ),
        (
            BackendKind::Networkfence,
            "networkfence",
            "a csi-addons NetworkFence for the node's addresses",
        ),
        (
            BackendKind::Manual,
            "manual",
            "a person runs `kubectl volguard fence confirm NODE`",
        ),
    ];
}

impl BackendKind {
    /// A comma list as `volguard.io/fence-backends` holds it (`None` if any entry is unknown).
    pub fn parse_list(s: &str) -> Option<Vec<BackendKind>> {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| match p {
                "webhook" => Some(BackendKind::Webhook),
                "networkfence" => Some(BackendKind::Networkfence),
                "manual" => Some(BackendKind::Manual),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .filter(|v| !v.is_empty())
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Webhook => "webhook",
            BackendKind::Networkfence => "networkfence",
            BackendKind::Manual => "manual",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct NodeFenceSpec {
    pub node: String,
    /// The backends this incident tries, in order (fixed when it is created).
    #[serde(default)]
    pub backends: Vec<BackendKind>,
    /// The node's addresses when the incident began (what a network fence cuts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// Set when this record is a release volguard allowed outside its own fencing: a Node deleted
    /// with pods on it, or a trusted remediator's out-of-service taint (rules.md §7). Such a record
    /// is never driven, only read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<Release>,
}

/// What released a node's volumes outside volguard's own fencing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReleaseAction {
    /// The Node was deleted (PodGC then force-deletes its pods).
    #[default]
    NodeDelete,
    /// The out-of-service taint was added by a trusted remediator after its own fencing.
    Taint,
}

/// A release volguard allowed while pods on the node used claims: what, who, and what proved the
/// machine down. Written by the webhook before it answers; the spec never changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Release {
    #[serde(default)]
    pub action: ReleaseAction,
    pub by: String,
    pub proof: String,
    /// The pods (namespace/name) that used claims on the node when it was deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<String>,
}

/// One recorded step: when, what, and the evidence behind it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    pub time: String,
    pub step: String,
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct NodeFenceStatus {
    #[serde(default)]
    pub phase: Phase,
    /// The backend in use (index into `spec.backends`).
    #[serde(default)]
    pub backend_index: usize,
    /// Its name, for `kubectl get` columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
    /// The node Lease's renewTime when the partition was detected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_renew_time: Option<String>,
    /// When the current backend was asked to fence (written before the call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence_requested_at: Option<String>,
    /// The machine's `status.nodeInfo.bootID` when the partition was detected (a different one
    /// on return proves a reboot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The volumes the node's kubelet last reported in use or attached when it was released.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub released_volumes: Vec<String>,
    /// What the node's pods use that the fence does not cover (the incident holds while any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncovered: Vec<String>,
    /// When a backend confirmed the fence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fenced_at: Option<String>,
    /// When the out-of-service taint went on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_at: Option<String>,
    /// When the node came back and unfencing was requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfence_requested_at: Option<String>,
    /// Who confirmed a manual fence (their authenticated username).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct NodeFence {
    #[serde(default)]
    pub metadata: super::Meta,
    #[serde(default)]
    pub spec: NodeFenceSpec,
    #[serde(default)]
    pub status: NodeFenceStatus,
}

/// What a record proves (rules.md §8 "a record names what it proves"): a guard accepts only the
/// kinds it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proves {
    /// The machine is fenced (volguard's own fence held and covers its volumes, or a person
    /// confirmed it down through `fence confirm`, verified by the controller).
    MachineOff,
    /// The Node was deleted on proof (its deletion judged by volguard and recorded).
    NodeDeleted,
    /// A trusted remediator added the out-of-service taint after its own fencing.
    Taint,
}

/// What "the pod's node is gone" needs (rules.md §2d row 4, §2h, §2f): a deletion on proof, or a
/// fence of the machine that held.
pub const GONE: &[Proves] = &[Proves::NodeDeleted, Proves::MachineOff];
/// What deleting a Node whose pods use claims needs (rules.md §7): the machine fenced, by
/// volguard or by a trusted remediator before its taint, or this deletion already recorded (a
/// retried DELETE finds the record its first attempt wrote).
pub const DELETE_NODE: &[Proves] = &[Proves::MachineOff, Proves::Taint, Proves::NodeDeleted];

impl NodeFence {
    /// What this record proves of its node, if anything: a release allowed on proof (a Node
    /// deletion, a trusted remediator's taint), or a fence that held (`Fenced` covering every
    /// volume, `Released`, or `Done` because the Node was deleted after its release). A fence
    /// the node recovered from proves nothing any more.
    pub fn proves(&self) -> Option<Proves> {
        if let Some(r) = &self.spec.release {
            return Some(match r.action {
                ReleaseAction::NodeDelete => Proves::NodeDeleted,
                ReleaseAction::Taint => Proves::Taint,
            });
        }
        let s = &self.status;
        let held = (s.phase == Phase::Fenced && s.uncovered.is_empty())
            || s.phase == Phase::Released
            || (s.phase == Phase::Done
                && s.released_at.is_some()
                && s.unfence_requested_at.is_none());
        held.then_some(Proves::MachineOff)
    }

    /// Whether this record proves node `node` down, in one of the kinds `need`s, for what began
    /// there at `since` (a pod's creation): a record older than the pod it would release covers an
    /// earlier machine of that name. Without times (offline fixtures) the record counts.
    pub fn proves_down(&self, node: &str, since: Option<jiff::Timestamp>, need: &[Proves]) -> bool {
        if self.spec.node != node {
            return false;
        }
        let after = match (since, self.metadata.creation_timestamp) {
            (Some(since), Some(created)) => created >= since,
            _ => true,
        };
        self.proves().is_some_and(|p| need.contains(&p)) && after
    }

    /// A record of a release outside volguard's fencing: read, never driven.
    pub fn is_release_record(&self) -> bool {
        self.spec.release.is_some()
    }
}

/// The incident among `all` that proves `node` down, in one of the kinds `need`s, for what began
/// at `since`, if any.
pub fn proof_of_down<'a>(
    all: &'a [std::sync::Arc<NodeFence>],
    node: &str,
    since: Option<jiff::Timestamp>,
    need: &[Proves],
) -> Option<&'a NodeFence> {
    all.iter()
        .map(|f| f.as_ref())
        .find(|f| f.proves_down(node, since, need))
}

super::wire::object_only!(NodeFenceSpec, Release, Evidence, NodeFenceStatus, NodeFence);
