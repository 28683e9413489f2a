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

pub mod audit_report;
pub mod fence;
mod node;
mod object;
mod pod;
pub mod quantity;
pub mod selector;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod wire;
pub use node::*;
pub use pod::*;
pub use wire::{FieldKey, Optional, time};
pub use wire::{SmallMap, from_json};

pub const PVC_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const PV_FINALIZER: &str = "kubernetes.io/pv-protection";

/// Annotations volguard reads; every other annotation is dropped from cached objects.
pub const ANNOTATION_PREFIX: &str = "volguard.io/";
pub const UNUSED_SINCE: &str = "volguard.io/unused-since";
pub const IGNORE_UNUSED: &str = "volguard.io/ignore-unused";
/// rules.md §2i: `"true"` on a PVC, PV or Namespace refuses its DELETE.
pub const DELETE_PROTECTION: &str = "volguard.io/delete-protection";

pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// On a PV the in-tree plugin handed to CSI (`storagehelpers.AnnMigratedTo`): the PV controller
/// leaves its reclaim to the external provisioner. The one annotation of another tool kept when
/// decoding and in caches: it decides whether the PV controller reclaims (`rules::upstream`).
pub const MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";

/// Whether an annotation is kept when decoding and in caches.
pub(crate) fn kept_annotation(key: &str) -> bool {
    key.starts_with(ANNOTATION_PREFIX) || key == MIGRATED_TO
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// `Box<str>` rather than `String` here and below: 8 bytes less each, which took `Arc<Pod>`,
    /// `Arc<Pv>` and `Arc<Node>` from mimalloc's 448-byte class to its 384-byte one
    /// (`benches/cache_bytes.rs`).
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub uid: Box<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<Box<str>>,
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
    pub deletion_timestamp: Option<Box<str>>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
            a.retain(|k, _| kept_annotation(k));
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
pub struct Pvc {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub spec: PvcSpec,
    #[serde(default)]
    pub status: PvcStatus,
}

/// `Pvc::lock_seen`: a local observation carried beside the object, equal whatever it holds (two
/// claims are the same claim whenever this process first saw their lock). Whole seconds on this
/// process's monotonic clock, rounded up (a first sight placed later: the grace looks younger,
/// never older), in four bytes that fit the claim's padding: an `Instant` took the cached claim
/// past its allocator size class (64 bytes more on every claim).
#[derive(Debug, Clone, Copy, Default)]
pub struct LockSeen(Option<std::num::NonZeroU32>);

/// The process-wide origin of `LockSeen`'s seconds.
fn lock_seen_origin() -> std::time::Instant {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(std::time::Instant::now)
}

impl LockSeen {
    /// Seen now.
    pub fn now() -> LockSeen {
        let secs = lock_seen_origin().elapsed().as_secs().saturating_add(1);
        LockSeen(std::num::NonZeroU32::new(
            u32::try_from(secs).unwrap_or(u32::MAX),
        ))
    }

    /// How long ago, at least (`None`: not seen by this process's cache).
    pub fn ago(&self) -> Option<std::time::Duration> {
        let at = std::time::Duration::from_secs(u64::from(self.0?.get()));
        Some(lock_seen_origin().elapsed().saturating_sub(at))
    }

    pub fn is_seen(&self) -> bool {
        self.0.is_some()
    }
}

impl PartialEq for LockSeen {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for LockSeen {}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PvcSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_name: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<Box<str>>,
    /// Read by the report, never by admission. Not an `Option` (nor is `requests`): each `Option`
    /// layer over the one `Box<str>` took 8 bytes more (`null` still decodes, as absent).
    #[serde(
        default,
        skip_serializing_if = "Resources::is_empty",
        deserialize_with = "wire::null_as_default"
    )]
    pub resources: Resources,
    #[serde(default, skip_serializing_if = "AccessModes::is_empty")]
    pub access_modes: AccessModes,
    /// When this process's cache first held the claim's current RWO lock value (`Pvc::lock_seen`).
    /// Not part of the object: never decoded, encoded or compared. Kept here, beside the one-byte
    /// `access_modes`, because the spec's padding holds it for nothing: on the claim itself it took
    /// the cached claim past its allocator size class.
    #[serde(skip)]
    pub lock_seen: LockSeen,
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
    #[serde(
        default,
        skip_serializing_if = "StorageRequest::is_empty",
        deserialize_with = "wire::null_as_default"
    )]
    pub requests: StorageRequest,
}

impl Resources {
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// `resources.requests`: only `storage` is read (other keys are ignored while decoding).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct StorageRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Box<str>>,
}

impl StorageRequest {
    pub fn is_empty(&self) -> bool {
        self.storage.is_none()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PvcStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Box<str>>,
    /// A boxed slice (16 bytes, not a vector's 24): with `spec.resources` flat, `Arc<Pvc>` fits
    /// mimalloc's 320-byte class instead of its 384-byte one. Caches keep only `Unused`.
    #[serde(default, skip_serializing_if = "<[Condition]>::is_empty")]
    pub conditions: Box<[Condition]>,
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
    /// When this process's cache first held the claim's current RWO lock value (set as the cache
    /// applies it; unseen on a claim read any other way). That value was stored no later, so the
    /// request of the placement it names is over once the grace has passed since (rules.md §2f).
    pub fn lock_seen(&self) -> LockSeen {
        self.spec.lock_seen
    }

    pub fn set_lock_seen(&mut self, seen: LockSeen) {
        self.spec.lock_seen = seen;
    }

    pub fn volume_name(&self) -> Option<&str> {
        self.spec.volume_name.as_deref().filter(|n| !n.is_empty())
    }
    pub fn is_bound(&self) -> bool {
        self.status.phase.as_deref() == Some("Bound")
    }
    pub fn requested_storage(&self) -> Option<&str> {
        self.spec.resources.requests.storage.as_deref()
    }
    /// rules.md §2f: `ReadWriteOnce` or `ReadWriteOncePod`, and not `ReadWriteMany`. A
    /// `ReadOnlyMany` beside them changes nothing for a read-write mount, which any node may make.
    pub fn is_rwo(&self) -> bool {
        let has = |m: &str| self.spec.access_modes.has(m);
        (has("ReadWriteOnce") || has("ReadWriteOncePod")) && !has("ReadWriteMany")
    }
    /// The StorageClass the claim names. `storageClassName: ""` asks for no class (a volume bound
    /// statically), so it names none: reading a class called "" failed every fencing look at a
    /// node running such a claim (`make bench-scale`'s claims are all bound that way).
    pub fn class_name(&self) -> Option<&str> {
        self.spec
            .storage_class_name
            .as_deref()
            .filter(|n| !n.is_empty())
    }
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }
    /// For caches: keep only the `Unused` condition, the one volguard reads.
    pub fn prune(&mut self) {
        self.metadata.prune(true);
        if self.status.conditions.iter().any(|c| c.type_ != "Unused") {
            let mut kept = std::mem::take(&mut self.status.conditions).into_vec();
            kept.retain(|c| c.type_ == "Unused");
            self.status.conditions = kept.into_boxed_slice();
        }
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
    RequiredNodeSelector,
    NodeSelectorTerm,
    NodeSelectorRequirement,
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
