//! Pods indexed by the claims they name: (namespace, claim) → pod names.

use crate::model::Pod;
use crate::rules::claims::claims_of;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

#[derive(Default)]
pub struct ClaimIndex {
    inner: Mutex<HashMap<(String, String), HashSet<String>>>,
}

impl ClaimIndex {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), HashSet<String>>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn remove(&self, pod: &Pod) {
        let mut m = self.lock();
        for c in claims_of(pod) {
            let key = (pod.metadata.namespace.clone(), c.name);
            if let Some(set) = m.get_mut(&key) {
                set.remove(&pod.metadata.name);
                if set.is_empty() {
                    m.remove(&key);
                }
            }
        }
    }

    pub fn add(&self, pod: &Pod) {
        let mut m = self.lock();
        for c in claims_of(pod) {
            m.entry((pod.metadata.namespace.clone(), c.name))
                .or_default()
                .insert(pod.metadata.name.clone());
        }
    }

    pub fn rebuild<'a>(&self, pods: impl IntoIterator<Item = &'a Pod>) {
        let mut fresh: HashMap<(String, String), HashSet<String>> = HashMap::new();
        for pod in pods {
            for c in claims_of(pod) {
                fresh
                    .entry((pod.metadata.namespace.clone(), c.name))
                    .or_default()
                    .insert(pod.metadata.name.clone());
            }
        }
        *self.lock() = fresh;
    }

    pub fn pods_naming(&self, namespace: &str, claim: &str) -> Vec<String> {
        self.lock()
            .get(&(namespace.to_string(), claim.to_string()))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
#[path = "claim_index_tests.rs"]
mod tests;
