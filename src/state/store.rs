//! In-memory maps of pruned objects, keyed namespace → name so lookups borrow `&str` keys.

use crate::model::{Meta, Node, Pod, Pv, Pvc};
use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A cached Kubernetes object type.
pub trait Object: Clone + Send + Sync + 'static {
    const KIND: &'static str;
    fn meta(&self) -> &Meta;
    /// Drop fields no rule reads (memory matters at 100k objects).
    fn prune(&mut self);
}

impl Object for Pvc {
    const KIND: &'static str = "PersistentVolumeClaim";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {
        Pvc::prune(self)
    }
}
impl Object for Pv {
    const KIND: &'static str = "PersistentVolume";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {
        self.metadata.prune(false);
        // No rule reads a PV's uid or owners.
        self.metadata.uid = String::new();
        self.metadata.owner_references = None;
    }
}
impl Object for Node {
    const KIND: &'static str = "Node";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {
        Node::prune(self);
        self.metadata.uid = String::new();
        self.metadata.resource_version = None;
        self.metadata.owner_references = None;
    }
}
impl Object for Pod {
    const KIND: &'static str = "Pod";
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn prune(&mut self) {
        self.metadata.prune(false);
        self.metadata.owner_references = None;
    }
}

type Inner<T> = HashMap<String, HashMap<String, Arc<T>>>;

/// namespace → name → object. Cluster-scoped objects live under namespace `""`.
pub struct ObjectMap<T> {
    inner: RwLock<Inner<T>>,
}

impl<T: Object> Default for ObjectMap<T> {
    fn default() -> Self {
        ObjectMap {
            inner: RwLock::new(HashMap::new()),
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
        self.read().get(namespace)?.get(name).cloned()
    }

    /// Insert or replace, pruning first. Returns the previous object.
    pub fn apply(&self, mut obj: T) -> Option<Arc<T>> {
        obj.prune();
        let m = obj.meta();
        let (ns, name) = (m.namespace.clone(), m.name.clone());
        self.write()
            .entry(ns)
            .or_default()
            .insert(name, Arc::new(obj))
    }

    pub fn delete(&self, namespace: &str, name: &str) -> Option<Arc<T>> {
        let mut w = self.write();
        let ns = w.get_mut(namespace)?;
        let old = ns.remove(name);
        if ns.is_empty() {
            w.remove(namespace);
        }
        old
    }

    /// Replace the whole content (a watch relist).
    pub fn replace(&self, objs: Vec<T>) {
        let mut fresh: Inner<T> = HashMap::new();
        for mut o in objs {
            o.prune();
            let m = o.meta();
            fresh
                .entry(m.namespace.clone())
                .or_default()
                .insert(m.name.clone(), Arc::new(o));
        }
        *self.write() = fresh;
    }

    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<T>> {
        self.read()
            .get(namespace)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn all(&self) -> Vec<Arc<T>> {
        self.read()
            .values()
            .flat_map(|m| m.values().cloned())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.read().values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// All the objects volguard reads.
#[derive(Default)]
pub struct Store {
    pub pvcs: ObjectMap<Pvc>,
    pub pvs: ObjectMap<Pv>,
    pub nodes: ObjectMap<Node>,
    pub pods: ObjectMap<Pod>,
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
