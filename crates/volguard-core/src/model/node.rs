//! `v1` Node and its Lease, pruned to what fencing and the guards read; a volume's attachment to
//! a node.

use super::*;

/// A VolumeAttachment of a PV (storage.k8s.io/v1): the CSI attacher's record of the volume on a
/// node, as `explain` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    pub name: String,
    pub node: String,
    pub attached: bool,
    pub terminating: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Node {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub spec: NodeSpec,
    /// Only the `Ready` condition is kept (a node that reports Ready is not down: rules.md §7).
    #[serde(default, skip_serializing_if = "NodeStatus::is_empty")]
    pub status: NodeStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Where a fence agent reaches the machine (fencing, rules.md §7).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<NodeAddress>,
    /// The machine's boot (`bootID`): a new one after a fence proves it restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeInfo>,
    /// What the kubelet reports mounted: read live by fencing's recovery, dropped from caches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes_in_use: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes_attached: Vec<AttachedVolume>,
}

impl NodeStatus {
    fn is_empty(&self) -> bool {
        self.conditions.is_empty()
            && self.addresses.is_empty()
            && self.node_info.is_none()
            && self.volumes_in_use.is_empty()
            && self.volumes_attached.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct NodeAddress {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub address: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    #[serde(default, rename = "bootID")]
    pub boot_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct AttachedVolume {
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    #[serde(default)]
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default)]
    pub effect: String,
}

impl Node {
    pub fn is_out_of_service(&self) -> bool {
        self.spec
            .taints
            .iter()
            .any(|t| t.key == OUT_OF_SERVICE_TAINT)
    }
    /// `Some(true)` when the node reports Ready, `Some(false)` NotReady or Unknown, `None` when
    /// it reports nothing.
    pub fn ready(&self) -> Option<bool> {
        self.status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status == "True")
    }
    /// The Ready condition and when it last changed.
    pub fn ready_since(&self) -> (Option<bool>, Option<jiff::Timestamp>) {
        match self.status.conditions.iter().find(|c| c.type_ == "Ready") {
            None => (None, None),
            Some(c) => (
                Some(c.status == "True"),
                c.last_transition_time
                    .as_deref()
                    .and_then(|t| t.parse().ok()),
            ),
        }
    }
    /// A control-plane node (never fenced by volguard).
    pub fn is_control_plane(&self) -> bool {
        CONTROL_PLANE_LABELS.iter().any(|l| {
            self.metadata
                .labels
                .as_ref()
                .is_some_and(|m| m.contains_key(l))
        })
    }
    /// The addresses a fence agent may reach (internal and external IPs).
    pub fn addresses(&self) -> Vec<String> {
        self.status
            .addresses
            .iter()
            .filter(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP")
            .map(|a| a.address.clone())
            .collect()
    }
    pub fn boot_id(&self) -> Option<&str> {
        self.status
            .node_info
            .as_ref()
            .map(|i| i.boot_id.as_str())
            .filter(|b| !b.is_empty())
    }
    /// The volumes the kubelet reports mounted (`volumesInUse`) or attached (`volumesAttached`),
    /// sorted, each once.
    pub fn volumes(&self) -> Vec<String> {
        let mut v = self.status.volumes_in_use.clone();
        v.extend(self.status.volumes_attached.iter().map(|a| a.name.clone()));
        v.sort();
        v.dedup();
        v
    }
    /// The KEP-5683 condition (alpha in 1.37, `NodeLifecycleConditions`) that says the node is in
    /// planned maintenance, if one is True.
    pub fn maintenance(&self) -> Option<&str> {
        self.status
            .conditions
            .iter()
            .find(|c| MAINTENANCE_CONDITIONS.contains(&c.type_.as_str()) && c.status == "True")
            .map(|c| c.type_.as_str())
    }
    /// For caches: the out-of-service taint, the Ready condition (and its time), the maintenance
    /// conditions, the control-plane label, addresses and boot: what admission and fencing's
    /// detection read. The kubelet's volume lists are read live, never cached.
    pub fn prune(&mut self) {
        let labels = self.metadata.labels.take();
        self.metadata.prune(false);
        if let Some(mut l) = labels {
            l.retain(|k, _| CONTROL_PLANE_LABELS.contains(&k));
            self.metadata.labels = (!l.is_empty()).then_some(l);
        }
        self.spec.taints.retain(|t| t.key == OUT_OF_SERVICE_TAINT);
        self.status
            .conditions
            .retain(|c| c.type_ == "Ready" || MAINTENANCE_CONDITIONS.contains(&c.type_.as_str()));
        for c in &mut self.status.conditions {
            c.reason = None;
        }
        self.status.conditions.shrink_to_fit();
        self.status
            .addresses
            .retain(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP");
        self.status.addresses.shrink_to_fit();
        self.status.volumes_in_use = Vec::new();
        self.status.volumes_attached = Vec::new();
    }
}

/// Labels that mark a control-plane node.
pub const CONTROL_PLANE_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];

/// KEP-5683's Node conditions of planned work (rules.md §7): a node reporting one True is not
/// partitioned, whatever its Lease says.
pub const MAINTENANCE_CONDITIONS: [&str; 3] = [
    "MaintenanceInProgress",
    "DrainInProgress",
    "GracefulNodeShutdownInProgress",
];

// ---------------------------------------------------------------- Lease, StorageClass

/// `coordination.k8s.io/v1` Lease of a node (`kube-node-lease`): only when it was last renewed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub spec: LeaseSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct LeaseSpec {
    /// Kept as written: only "changed or not" matters (the kubelet's clock is never compared
    /// with ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_time: Option<String>,
}

/// The namespace of node Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
