//! Pods indexed by the claims they name: namespace → claim → pod names.

use crate::model::Pod;
use crate::rules::claims::claims_of;
use std::collections::HashMap;
use std::sync::Mutex;

/// Nested by namespace so a lookup borrows its two `&str`s (a `(String, String)` key cost two
/// allocations per admission fact), hashed with foldhash as the stores are (`store.rs`).
type Hasher = foldhash::fast::RandomState;
type Claims = HashMap<Box<str>, Names, Hasher>;
type Index = HashMap<Box<str>, Claims, Hasher>;

/// The pods naming one claim: almost always one (a claim is a pod's own), so that one is kept
/// inline. A `HashSet<String>` per claim was a 128-byte table and a 24-byte key beside each
/// name, ~240 of the ~975 bytes a cached pod held (`benches/cache_bytes.rs`).
#[derive(Debug)]
enum Names {
    One(Box<str>),
    Many(Vec<Box<str>>),
}

impl Names {
    fn insert(&mut self, pod: &str) {
        match self {
            Names::One(one) if &**one == pod => {}
            Names::One(one) => {
                let first = std::mem::take(one);
                *self = Names::Many(vec![first, pod.into()]);
            }
            Names::Many(all) if all.iter().any(|n| &**n == pod) => {}
            Names::Many(all) => all.push(pod.into()),
        }
    }
    /// Drop `pod`; true when no pod is left.
    fn remove(&mut self, pod: &str) -> bool {
        match self {
            Names::One(one) => &**one == pod,
            Names::Many(all) => {
                all.retain(|n| &**n != pod);
                match all.len() {
                    0 => true,
                    1 => {
                        *self = Names::One(all.pop().unwrap_or_default());
                        false
                    }
                    _ => false,
                }
            }
        }
    }
    fn to_vec(&self) -> Vec<String> {
        match self {
            Names::One(one) => vec![one.to_string()],
            Names::Many(all) => all.iter().map(|n| n.to_string()).collect(),
        }
    }
}

#[derive(Default)]
pub struct ClaimIndex {
    inner: Mutex<Index>,
}

impl ClaimIndex {
    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn remove(&self, pod: &Pod) {
        let mut m = self.lock();
        let ns = &pod.metadata.namespace;
        let Some(claims) = m.get_mut(ns.as_str()) else {
            return;
        };
        for c in claims_of(pod) {
            if claims
                .get_mut(c.name.as_str())
                .is_some_and(|names| names.remove(&pod.metadata.name))
            {
                claims.remove(c.name.as_str());
            }
        }
        if claims.is_empty() {
            m.remove(ns.as_str());
        }
    }

    pub fn add(&self, pod: &Pod) {
        insert(&mut self.lock(), pod);
    }

    pub(super) fn rebuild<'a>(&self, pods: impl IntoIterator<Item = &'a Pod>) {
        let mut fresh = Index::default();
        for pod in pods {
            insert(&mut fresh, pod);
        }
        *self.lock() = fresh;
    }

    pub(super) fn pods_naming(&self, namespace: &str, claim: &str) -> Vec<String> {
        self.lock()
            .get(namespace)
            .and_then(|claims| claims.get(claim))
            .map(Names::to_vec)
            .unwrap_or_default()
    }
}

fn insert(m: &mut Index, pod: &Pod) {
    let mut claims = claims_of(pod).peekable();
    if claims.peek().is_none() {
        return;
    }
    let ns = m.entry(pod.metadata.namespace.as_str().into()).or_default();
    let name = &pod.metadata.name;
    for c in claims {
        match ns.get_mut(c.name.as_str()) {
            Some(names) => names.insert(name),
            None => {
                ns.insert(c.name.into(), Names::One(name.as_str().into()));
            }
        }
    }
}

#[cfg(test)]
#[path = "claim_index_tests.rs"]
mod tests;
