//! Pods indexed by the claims they name: namespace → claim → pod names.

use crate::model::Pod;
use crate::rules::claims::claims_of;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Nested by namespace so a lookup borrows its two `&str`s (a `(String, String)` key cost two
/// allocations per admission fact), hashed with foldhash as the stores are (`store.rs`).
type Hasher = foldhash::fast::RandomState;
type Claims = HashMap<String, HashSet<String, Hasher>, Hasher>;
type Index = HashMap<String, Claims, Hasher>;

#[derive(Default)]
pub struct ClaimIndex {
    inner: Mutex<Index>,
}

impl ClaimIndex {
    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn remove(&self, pod: &Pod) {
        let mut m = self.lock();
        let ns = &pod.metadata.namespace;
        let Some(claims) = m.get_mut(ns) else { return };
        for c in claims_of(pod) {
            if let Some(set) = claims.get_mut(&c.name) {
                set.remove(&pod.metadata.name);
                if set.is_empty() {
                    claims.remove(&c.name);
                }
            }
        }
        if claims.is_empty() {
            m.remove(ns);
        }
    }

    pub fn add(&self, pod: &Pod) {
        insert(&mut self.lock(), pod);
    }

    pub fn rebuild<'a>(&self, pods: impl IntoIterator<Item = &'a Pod>) {
        let mut fresh = Index::default();
        for pod in pods {
            insert(&mut fresh, pod);
        }
        *self.lock() = fresh;
    }

    pub fn pods_naming(&self, namespace: &str, claim: &str) -> Vec<String> {
        self.lock()
            .get(namespace)
            .and_then(|claims| claims.get(claim))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

fn insert(m: &mut Index, pod: &Pod) {
    let mut claims = claims_of(pod).peekable();
    if claims.peek().is_none() {
        return;
    }
    let ns = m.entry(pod.metadata.namespace.clone()).or_default();
    for c in claims {
        ns.entry(c.name)
            .or_default()
            .insert(pod.metadata.name.clone());
    }
}

#[cfg(test)]
#[path = "claim_index_tests.rs"]
mod tests;
