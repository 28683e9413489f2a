//! In-memory maps of pruned objects, keyed namespace → name so lookups borrow `&str` keys.

use crate::model::{Lease, Meta, Namespace, Node, Pod, Pv, Pvc, StorageClass};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A cached Kubernetes object type.
pub trait Object: Clone + Send + Sync + 'static {
    const KIND: &'static str;
    fn meta(&self) -> &Meta;
    /// Drop fields no rule reads (memory matters at 100k objects).
    fn prune(&mut self);
    fn drop_labels(&mut self);
    /// Whether `carry` keeps anything: the others skip the lookup of the version replaced (a pod
    /// watch applies the most events).
    const CARRIES: bool = false;
    /// What the cache keeps of the version this one replaces (`old`: none, a first sight).
    fn carry(&mut self, _old: Option<&Self>) {}
}

impl Object for Pvc {
    fn drop_labels(&mut self) {
        self.metadata.labels = None;
    }
    const CARRIES: bool = true;
    /// When the cache first held this lock value: kept while the value stays, now for a new one.
    fn carry(&mut self, old: Option<&Self>) {
        let lock = crate::rules::rwo_lock::RWO_LOCK;
        let seen = match old {
            Some(o)
                if o.lock_seen().is_seen()
                    && o.metadata.annotation(lock) == self.metadata.annotation(lock) =>
            {
                o.lock_seen()
            }
            _ => crate::model::LockSeen::now(),
        };
        self.set_lock_seen(seen);
    }
    const KIND: &'static str = "PersistentVolumeClaim";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {
        Pvc::prune(self)
    }
}
impl Object for Pv {
    fn drop_labels(&mut self) {
        self.metadata.labels = None;
    }
    const KIND: &'static str = "PersistentVolume";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {
        self.metadata.prune(false);
        // No rule reads a PV's uid or owners, nor its claim's uid.
        self.metadata.uid = Box::default();
        self.metadata.owner_references = None;
        if let Some(c) = &mut self.spec.claim_ref {
            c.uid = None;
        }
    }
}
impl Object for Node {
    fn drop_labels(&mut self) {
        self.metadata.labels = None;
    }
    const KIND: &'static str = "Node";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {
        Node::prune(self);
        self.metadata.uid = Box::default();
        self.metadata.resource_version = None;
        self.metadata.owner_references = None;
    }
}
/// Leases, StorageClasses and Namespaces: their name, volguard annotations (and a Lease's
/// renewTime) are all anyone reads.
fn prune_to_annotations(m: &mut Meta) {
    m.prune(false);
    m.uid = Box::default();
    m.resource_version = None;
    m.owner_references = None;
    m.finalizers = None;
}
impl Object for Lease {
    fn drop_labels(&mut self) {
        self.metadata.labels = None;
    }
    const KIND: &'static str = "Lease";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {
        prune_to_annotations(&mut self.metadata);
    }
}
impl Object for StorageClass {
    fn drop_labels(&mut self) {
        self.metadata.labels = None;
    }
    const KIND: &'static str = "StorageClass";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {
        prune_to_annotations(&mut self.metadata);
    }
}
impl Object for Namespace {
    fn drop_labels(&mut self) {
        self.metadata.labels = None;
    }
    const KIND: &'static str = "Namespace";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {
        prune_to_annotations(&mut self.metadata);
    }
}

impl Object for crate::model::fence::NodeFence {
    fn drop_labels(&mut self) {}
    const KIND: &'static str = crate::model::fence::KIND;
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {}
}
impl Object for Pod {
    fn drop_labels(&mut self) {
        self.metadata.labels = None;
    }
    const KIND: &'static str = "Pod";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {
        self.metadata.prune(false);
        self.metadata.owner_references = None;
        // Pods are never patched by volguard: no resourceVersion needed.
        self.metadata.resource_version = None;
        // Only volumes that outlive the pod matter to the rules (claims, inline NFS, CSI...;
        // projected tokens, configMaps... do not).
        self.spec.volumes.retain(|v| !v.ends_with_pod());
        self.spec.volumes.shrink_to_fit();
        self.prune_status();
    }
}

/// A cached object keyed by its own name: the set needs no second copy of every name.
struct ByName<T>(Arc<T>);

impl<T: Object> std::borrow::Borrow<str> for ByName<T> {
    fn borrow(&self) -> &str {
        &self.0.meta().name
    }
}
impl<T: Object> std::hash::Hash for ByName<T> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // Must hash exactly like the `str` it borrows as.
        std::borrow::Borrow::<str>::borrow(self).hash(h)
    }
}
impl<T: Object> PartialEq for ByName<T> {
    fn eq(&self, o: &Self) -> bool {
        self.0.meta().name == o.0.meta().name
    }
}
impl<T: Object> Eq for ByName<T> {}

/// foldhash: keyed per process like std's SipHash (object names are chosen by users), and a
/// fraction of its cost on the two lookups of every admission fact.
type Hasher = foldhash::fast::RandomState;
type Inner<T> = HashMap<String, HashSet<ByName<T>, Hasher>, Hasher>;

/// namespace → name → object. Cluster-scoped objects live under namespace `""`.
pub struct ObjectMap<T> {
    inner: RwLock<Inner<T>>,
    /// Labels are only read by `report unused -l`; every other cache drops them.
    keep_labels: bool,
    /// How far its watch has caught up (a map no watch fills stays at none).
    pub(super) mark: super::mark::Mark,
}

impl<T: Object> Default for ObjectMap<T> {
    fn default() -> Self {
        ObjectMap {
            inner: RwLock::new(HashMap::default()),
            keep_labels: false,
            mark: Default::default(),
        }
    }
}

impl<T: Object> ObjectMap<T> {
    // A panic while holding the lock cannot leave a map half-updated (single insert/remove), so
    // a poisoned lock is still safe to use.
    fn read(&self) -> RwLockReadGuard<'_, Inner<T>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
    fn write(&self) -> RwLockWriteGuard<'_, Inner<T>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<T>> {
        self.read().get(namespace)?.get(name).map(|e| e.0.clone())
    }

    fn prune(&self, obj: &mut T) {
        obj.prune();
        if !self.keep_labels {
            obj.drop_labels();
        }
    }

    /// Insert or replace, pruning first. Returns the previous object.
    pub fn apply(&self, mut obj: T) -> Option<Arc<T>> {
        self.prune(&mut obj);
        let ns = obj.meta().namespace.clone();
        let mut w = self.write();
        let set = w.entry(ns).or_default();
        // Under the write lock: a reader never sees this version without what it carries.
        if T::CARRIES {
            obj.carry(set.get(obj.meta().name.as_str()).map(|e| e.0.as_ref()));
        }
        set.replace(ByName(Arc::new(obj))).map(|e| e.0)
    }

    pub(super) fn delete(&self, namespace: &str, name: &str) -> Option<Arc<T>> {
        let mut w = self.write();
        let ns = w.get_mut(namespace)?;
        let old = ns.take(name).map(|e| e.0);
        if ns.is_empty() {
            w.remove(namespace);
        }
        old
    }

    /// Replace the whole content (a watch relist).
    pub(super) fn replace(&self, objs: Vec<T>) {
        let mut fresh: Inner<T> = HashMap::default();
        // Read only by a kind that carries something (a relist of every pod takes no lock here).
        let old = T::CARRIES.then(|| self.read());
        for mut o in objs {
            self.prune(&mut o);
            if let Some(old) = &old {
                let was = old
                    .get(&o.meta().namespace)
                    .and_then(|m| m.get(o.meta().name.as_str()));
                o.carry(was.map(|e| e.0.as_ref()));
            }
            fresh
                .entry(o.meta().namespace.clone())
                .or_default()
                .replace(ByName(Arc::new(o)));
        }
        drop(old);
        *self.write() = fresh;
    }

    pub(super) fn in_namespace(&self, namespace: &str) -> Vec<Arc<T>> {
        self.read()
            .get(namespace)
            .map(|m| m.iter().map(|e| e.0.clone()).collect())
            .unwrap_or_default()
    }

    pub(super) fn all(&self) -> Vec<Arc<T>> {
        self.read()
            .values()
            .flat_map(|m| m.iter().map(|e| e.0.clone()))
            .collect()
    }

    pub(super) fn len(&self) -> usize {
        self.read().values().map(HashSet::len).sum()
    }
}

/// A kind the store holds a map of: what `View::sweep` and `View::held` read.
pub trait Held: Object {
    fn map(store: &Store) -> &ObjectMap<Self>;
}

macro_rules! held {
    ($($kind:ty => $field:ident),* $(,)?) => {$(
        impl Held for $kind {
            fn map(store: &Store) -> &ObjectMap<Self> {
                &store.$field
            }
        }
    )*};
}

held!(
    Pvc => pvcs,
    Pv => pvs,
    Node => nodes,
    Pod => pods,
    Lease => leases,
    StorageClass => classes,
    crate::model::fence::NodeFence => fences,
);

/// All the objects volguard reads.
#[derive(Default)]
pub struct Store {
    pub pvcs: ObjectMap<Pvc>,
    pub pvs: ObjectMap<Pv>,
    pub nodes: ObjectMap<Node>,
    pub pods: ObjectMap<Pod>,
    /// Node Leases (`kube-node-lease`), watched for fencing's detection.
    pub leases: ObjectMap<Lease>,
    /// StorageClasses, watched for fencing's opt-in.
    pub classes: ObjectMap<StorageClass>,
    /// Fencing incidents: only a state file fills this (live, they are read when needed).
    pub fences: ObjectMap<crate::model::fence::NodeFence>,
    /// Pods by the claims they name (kept by whoever fills `pods`: the loader, a pod watch).
    pub claims: super::claim_index::ClaimIndex,
    /// Pods that name claims, seen stored and then gone (kept by the pod watch).
    pub gone_pods: super::gone_pods::GonePods,
    /// Offline, the RWO lock's compare-and-swap is this store's (`state::writer`).
    pub(super) swap: std::sync::Mutex<()>,
}

/// What this process's pod watch saw of one pod (a UID is never created twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSeen {
    /// Stored and then deleted: deleted for good.
    Gone,
    /// In the cache now.
    Stored,
    /// Never seen (or no UID to know it by).
    Unseen,
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;

impl Store {
    /// What this process saw of the pod `ns/name` of `uid` (`View::pod_seen`).
    pub(super) fn pod_seen(&self, ns: &str, name: &str, uid: &str) -> PodSeen {
        if uid.is_empty() {
            return PodSeen::Unseen;
        }
        // The cache first: the watch deletes a pod from it before it notes the UID gone, so a
        // delete landing between the two looks is seen by one of them.
        let cached = self
            .pods
            .get(ns, name)
            .is_some_and(|p| *p.metadata.uid == *uid);
        if self.gone_pods.contains(uid) {
            PodSeen::Gone
        } else if cached {
            PodSeen::Stored
        } else {
            PodSeen::Unseen
        }
    }

    /// A store whose PVCs keep their labels (for label selectors in reports).
    pub(super) fn keeping_labels() -> Store {
        Store {
            pvcs: ObjectMap {
                inner: RwLock::new(HashMap::default()),
                keep_labels: true,
                mark: Default::default(),
            },
            ..Default::default()
        }
    }
}
