//! Pruned Kubernetes objects: only the fields volguard's rules, controller and report read.
//!
//! The same types decode AdmissionReview objects, `--state` files and (through serde) the objects
//! of live watches, so there is one mapping from the Kubernetes wire format. Unknown fields are
//! ignored, which is what keeps a cache of 100k objects small; a field of the wrong JSON type is a
//! decode error, which admission turns into a 400.
//!
//! Optional strings that are only ever replaced whole (phases, node, volume and class names) are
//! `Box<str>`, 16 bytes in place of `String`'s 24: every cached pod, PVC and PV carries several
//! (`make bench`'s cache bytes per object: serve 613 → 589, controller 599 → 581).

use serde::{Deserialize, Serialize};
use std::borrow::Cow;

pub mod fence;
pub mod quantity;
pub mod selector;
#[cfg(test)]
pub mod testing;
mod wire;
pub(crate) use wire::{FieldKey, Optional, review_pass, time};
pub use wire::{SmallMap, from_json};

pub const PVC_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const PV_FINALIZER: &str = "kubernetes.io/pv-protection";

/// Annotations volguard reads; every other annotation is dropped from cached objects.
pub const ANNOTATION_PREFIX: &str = "volguard.io/";
pub const ALLOW_FINALIZER_REMOVAL: &str = "volguard.io/allow-finalizer-removal";
pub const CONFIRM_FORCE_DELETE: &str = "volguard.io/confirm-force-delete";
pub const UNUSED_SINCE: &str = "volguard.io/unused-since";
pub const IGNORE_UNUSED: &str = "volguard.io/ignore-unused";
/// rules.md §2i: `"true"` on a PVC, PV or Namespace refuses its DELETE.
pub const DELETE_PROTECTION: &str = "volguard.io/delete-protection";

pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Read by "unused since": nothing is unused since before it existed (rules.md §4). Kept
    /// as a time, not its text: the text was a heap block on every cached object (`make bench`'s
    /// cache bytes per object: serve 623 → 613, controller 604 → 599). A value that is not a time
    /// reads as absent, as `created_at` always treated it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "wire::lenient_time"
    )]
    pub creation_timestamp: Option<jiff::Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// `None` when absent or `null`: the mutating patch must then create the list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizers: Option<Vec<String>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "wire::volguard_annotations"
    )]
    pub annotations: Option<SmallMap>,
    /// Not read by any admission rule: skipped while a review decodes (`wire::review_pass`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "wire::unread_in_review"
    )]
    pub labels: Option<SmallMap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_references: Option<Vec<OwnerReference>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
}

impl Meta {
    pub fn is_terminating(&self) -> bool {
        self.deletion_timestamp.is_some()
    }

    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers
            .as_deref()
            .is_some_and(|f| f.iter().any(|x| x == finalizer))
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.as_ref()?.get(key)
    }

    /// Annotation set to exactly `"true"` (Kubernetes convention for boolean annotations).
    pub fn annotation_true(&self, key: &str) -> bool {
        self.annotation(key) == Some("true")
    }

    /// `creationTimestamp` as a time (`None` when absent or not a time).
    pub fn created_at(&self) -> Option<jiff::Timestamp> {
        self.creation_timestamp
    }

    /// UID of the controller owner reference, if any.
    pub fn controller_uid(&self) -> Option<&str> {
        self.owner_references
            .as_deref()?
            .iter()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.as_str())
    }

    /// Drop what no rule reads (annotations of other tools, labels when not wanted), for caches.
    pub fn prune(&mut self, keep_labels: bool) {
        if let Some(a) = &mut self.annotations {
            a.retain(|k, _| k.starts_with(ANNOTATION_PREFIX));
            if a.is_empty() {
                self.annotations = None;
            }
        }
        if !keep_labels {
            self.labels = None;
        }
    }
}

// ---------------------------------------------------------------- Pod

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub spec: PodSpec,
    #[serde(default)]
    pub status: PodStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Only its shape: where the RWO placement hint appends its preferred term (rules.md §2f).
    /// Boxed and dropped from caches: admission of a pod CREATE is its only reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<AffinityShape>>,
    /// Only how long the pod tolerates `node.kubernetes.io/unreachable` (fencing's forgiveness,
    /// rules.md §7): the list is folded while it decodes, never kept.
    #[serde(
        default,
        rename = "tolerations",
        deserialize_with = "wire::unreachable_toleration",
        serialize_with = "wire::as_unreachable_toleration",
        skip_serializing_if = "Tolerates::is_not_at_all"
    )]
    pub tolerates_unreachable: Tolerates,
}

/// How long a pod tolerates `node.kubernetes.io/unreachable` with effect NoExecute. Seconds in
/// a `u32` (136 years; a negative toleration is 0, as the taint manager reads it): eight bytes in
/// every pod, which admission futures carry (`a_decision_future_stays_small_whatever_the_rule`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tolerates {
    #[default]
    NotAtAll,
    Seconds(u32),
    Forever,
}

impl Tolerates {
    pub fn is_not_at_all(&self) -> bool {
        *self == Tolerates::NotAtAll
    }
}

/// The taint a partitioned node gets from the node lifecycle controller.
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct AffinityShape {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeAffinityShape>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinityShape {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_during_scheduling_ignored_during_execution: Option<Vec<PreferredTerm>>,
}

/// A preferred scheduling term, as far as the hint needs it: which hostnames it names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PreferredTerm {
    /// A NodeSelectorTerm, compared whole; an object like every other nested field.
    #[serde(default, deserialize_with = "wire::object_value")]
    pub preference: serde_json::Value,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimSource>,
    /// Only presence matters: the claim is `<pod>-<volume>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<Present>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct ClaimSource {
    #[serde(default)]
    pub claim_name: String,
    /// `readOnly: true`: the pod mounts the claim read-only, so it takes no RWO lock (rules.md §2f).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

/// A JSON object whose content is irrelevant (decodes from any object, encodes as `{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct Present {}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Box<str>>,
    /// The latest `containerStatuses[].state.terminated.finishedAt`, kept as it was written
    /// (decoded without a vector per pod: admission decodes every pod it reviews).
    #[serde(
        default,
        rename = "containerStatuses",
        deserialize_with = "wire::latest_finished_at",
        serialize_with = "wire::as_finished_container",
        skip_serializing_if = "Option::is_none"
    )]
    pub finished_at: Option<String>,
    /// The latest `conditions[].lastTransitionTime`.
    #[serde(
        default,
        rename = "conditions",
        deserialize_with = "wire::latest_transition",
        serialize_with = "wire::as_condition",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_transition: Option<String>,
}

impl Pod {
    pub fn node_name(&self) -> Option<&str> {
        self.spec.node_name.as_deref().filter(|n| !n.is_empty())
    }
    /// rules.md "scheduled pod": `spec.nodeName != ""`.
    pub fn is_scheduled(&self) -> bool {
        self.node_name().is_some()
    }
    /// rules.md "terminal pod": phase Succeeded or Failed.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status.phase.as_deref(), Some("Succeeded" | "Failed"))
    }
    /// rules.md "shut-down pod": being deleted with grace period 0.
    pub fn is_shut_down(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
            && self.metadata.deletion_grace_period_seconds == Some(0)
    }
    pub fn phase(&self) -> &str {
        self.status.phase.as_deref().unwrap_or("Unknown")
    }
    /// When a terminal pod stopped using its volumes: its last container's `finishedAt`, else
    /// its latest condition transition (rules.md §4). `None` for running pods or when unrecorded.
    pub fn ended_at(&self) -> Option<jiff::Timestamp> {
        if !self.is_terminal() {
            return None;
        }
        let parse = |t: &Option<String>| t.as_deref().and_then(|t| t.parse().ok());
        parse(&self.status.finished_at).or_else(|| parse(&self.status.last_transition))
    }
    /// For caches: only a terminal pod's end time is ever read.
    pub fn prune_status(&mut self) {
        self.spec.affinity = None;
        if !self.is_terminal() {
            self.status.finished_at = None;
            self.status.last_transition = None;
        }
    }
}

// ---------------------------------------------------------------- PVC

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Pvc {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub spec: PvcSpec,
    #[serde(default)]
    pub status: PvcStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PvcSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_name: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<Box<str>>,
    /// Read by the report, never by admission: skipped while a review decodes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "wire::unread_in_review"
    )]
    pub resources: Option<Resources>,
    #[serde(default, skip_serializing_if = "AccessModes::is_empty")]
    pub access_modes: AccessModes,
}

/// `spec.accessModes` as bits: one byte per cached claim instead of a vector of strings (the
/// serve cache holds every PVC of the cluster). Unknown modes are kept as `OTHER`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccessModes(u8);

impl AccessModes {
    const NAMES: [&'static str; 4] = [
        "ReadWriteOnce",
        "ReadOnlyMany",
        "ReadWriteMany",
        "ReadWriteOncePod",
    ];
    const OTHER: u8 = 1 << 7;

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }
    pub fn has(&self, mode: &str) -> bool {
        Self::NAMES
            .iter()
            .position(|n| *n == mode)
            .is_some_and(|i| self.0 & (1 << i) != 0)
    }
    pub fn insert(&mut self, mode: &str) {
        self.0 |= Self::NAMES
            .iter()
            .position(|n| *n == mode)
            .map_or(Self::OTHER, |i| 1 << i);
    }
}

impl<const N: usize> From<[&str; N]> for AccessModes {
    fn from(modes: [&str; N]) -> Self {
        let mut m = AccessModes::default();
        for x in modes {
            m.insert(x);
        }
        m
    }
}

impl Serialize for AccessModes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            Self::NAMES
                .iter()
                .enumerate()
                .filter(|(i, _)| self.0 & (1 << i) != 0)
                .map(|(_, n)| *n),
        )
    }
}

impl<'de> Deserialize<'de> for AccessModes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let modes: Option<Vec<Cow<'de, str>>> = Deserialize::deserialize(d)?;
        let mut m = AccessModes::default();
        for x in modes.iter().flatten() {
            m.insert(x);
        }
        Ok(m)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<StorageRequest>,
}

/// `resources.requests`: only `storage` is read (other keys are ignored while decoding).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct StorageRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PvcStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

impl Pvc {
    pub fn volume_name(&self) -> Option<&str> {
        self.spec.volume_name.as_deref().filter(|n| !n.is_empty())
    }
    pub fn is_bound(&self) -> bool {
        self.status.phase.as_deref() == Some("Bound")
    }
    pub fn requested_storage(&self) -> Option<&str> {
        self.spec
            .resources
            .as_ref()?
            .requests
            .as_ref()?
            .storage
            .as_deref()
    }
    /// rules.md §2f: `ReadWriteOnce` or `ReadWriteOncePod`, and not `ReadWriteMany`. A
    /// `ReadOnlyMany` beside them changes nothing for a read-write mount, which any node may make.
    pub fn is_rwo(&self) -> bool {
        let has = |m: &str| self.spec.access_modes.has(m);
        (has("ReadWriteOnce") || has("ReadWriteOncePod")) && !has("ReadWriteMany")
    }
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }
    /// For caches: keep only the `Unused` condition, the one volguard reads.
    pub fn prune(&mut self) {
        self.metadata.prune(true);
        self.status.conditions.retain(|c| c.type_ == "Unused");
        self.status.conditions.shrink_to_fit();
    }
}

// ---------------------------------------------------------------- PV

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Pv {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub spec: PvSpec,
    #[serde(default)]
    pub status: PvStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PvSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_ref: Option<ClaimRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_reclaim_policy: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<Box<str>>,
    /// The CSI driver (`spec.csi.driver`): what a driver-scoped fence covers (rules.md §7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi: Option<CsiSource>,
    /// The in-tree sources fencing names in its scope message; any other reads as "in-tree".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs: Option<Present>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iscsi: Option<Present>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<Present>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<Present>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rbd: Option<Present>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fc: Option<Present>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct CsiSource {
    #[serde(default)]
    pub driver: Box<str>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct ClaimRef {
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PvStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Box<str>>,
}

impl Pv {
    /// rules.md §3: a PV is in use while `status.phase == Bound`.
    pub fn is_bound(&self) -> bool {
        self.status.phase.as_deref() == Some("Bound")
    }
    /// The storage system behind the volume: `(true, driver)` for CSI, `(false, kind)` for an
    /// in-tree source (`"in-tree"` for one not named here).
    pub fn source(&self) -> (bool, &str) {
        let s = &self.spec;
        if let Some(c) = &s.csi {
            return (true, &c.driver);
        }
        let kind = [
            (s.nfs.is_some(), "nfs"),
            (s.iscsi.is_some(), "iscsi"),
            (s.host_path.is_some(), "hostPath"),
            (s.local.is_some(), "local"),
            (s.rbd.is_some(), "rbd"),
            (s.fc.is_some(), "fc"),
        ]
        .into_iter()
        .find_map(|(on, k)| on.then_some(k));
        (false, kind.unwrap_or("in-tree"))
    }
}

// ---------------------------------------------------------------- Node

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

/// `storage.k8s.io/v1` StorageClass: only its metadata (its volguard annotations decide fencing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct StorageClass {
    #[serde(default)]
    pub metadata: Meta,
}

/// DeleteOptions as sent in a DELETE admission request's `options`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i64>,
}

/// `policy/v1` Eviction (the object of a `pods/eviction` CREATE): which pod, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Eviction {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_options: Option<DeleteOptions>,
}

/// A pod's containers as the attach/detach controller reads them (rules.md §2h): it treats a
/// terminating pod none of whose containers runs (each `terminated` or `waiting`) as stopped and
/// detaches its volumes. Decoded only for a `pods/status` review.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContainerStates {
    #[serde(default)]
    status: Option<ContainerStatesStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ContainerStatesStatus {
    #[serde(default, rename = "containerStatuses")]
    container_statuses: Option<Vec<ContainerStateOf>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ContainerStateOf {
    #[serde(default)]
    state: Option<ContainerStateKeys>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ContainerStateKeys {
    #[serde(default)]
    waiting: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    terminated: Option<serde::de::IgnoredAny>,
}

impl ContainerStates {
    /// Some container runs: its state is neither `terminated` nor `waiting` (upstream's
    /// `notRunning`, inverted). No statuses: none runs.
    pub fn any_running(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or_default()
            .iter()
            .any(|c| {
                c.state
                    .as_ref()
                    .is_none_or(|s| s.waiting.is_none() && s.terminated.is_none())
            })
    }
}

/// `v1` Namespace: only its metadata (delete protection, rules.md §2i).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Namespace {
    #[serde(default)]
    pub metadata: Meta,
}

/// `v1` Binding (the object of a `pods/binding` CREATE: the scheduler's bind).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub target: ObjectReference,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

/// The authenticated caller of an admission request (authentication.k8s.io/v1 UserInfo).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

impl UserInfo {
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

wire::object_only!(
    Meta,
    OwnerReference,
    Pod,
    PodSpec,
    AffinityShape,
    NodeAffinityShape,
    PreferredTerm,
    Volume,
    ClaimSource,
    Present,
    PodStatus,
    Pvc,
    PvcSpec,
    Resources,
    StorageRequest,
    PvcStatus,
    Condition,
    Pv,
    PvSpec,
    ClaimRef,
    PvStatus,
    CsiSource,
    Node,
    NodeSpec,
    NodeStatus,
    NodeAddress,
    NodeInfo,
    AttachedVolume,
    Taint,
    Lease,
    LeaseSpec,
    StorageClass,
    DeleteOptions,
    Eviction,
    Namespace,
    Binding,
    ObjectReference,
    UserInfo,
);

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
