//! What the controller tells people: a claim used from two nodes (`MultiNodeRWO`), and which pods
//! keep a terminating claim (`DeletionPostponed`), each once per change of what it says.

use super::*;

impl Reconciler {
    /// rules.md §2f detection: a `MultiNodeRWO` Warning event (once per change of the node set) and
    /// the `volguard_pvcs_multi_node_rwo` gauge when pods on several nodes use one RWO claim.
    pub(super) fn detect_multi_node(
        &self,
        pvc: &Pvc,
        cached: &[Arc<Pod>],
    ) -> Option<(Write, Told)> {
        let nodes = crate::rules::rwo::nodes_using(pvc, cached.iter());
        let key = (pvc.metadata.namespace.clone(), pvc.metadata.name.clone());
        {
            let mut m = self.multi_node.lock().unwrap_or_else(|e| e.into_inner());
            if nodes.len() < 2 {
                if m.remove(&key).is_some() {
                    self.metrics.multi_node_rwo.set(m.len() as i64);
                }
                return None;
            }
            if m.get(&key) == Some(&nodes) {
                return None;
            }
            m.insert(key, nodes.clone());
            self.metrics.multi_node_rwo.set(m.len() as i64);
        }
        let message = crate::rules::rwo::multi_node_message(pvc, &nodes);
        tracing::warn!(pvc = %format!("{}/{}", pvc.metadata.namespace, pvc.metadata.name), ?nodes, "{message}");
        let ev = Write::event(pvc_reference(pvc), true, "MultiNodeRWO", message, "Detect");
        Some((ev, Told::new("MultiNodeRWO", None)))
    }

    pub(super) fn lock_announced(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String), Vec<Blocker>>> {
        self.announced.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `DeletionPostponed`, when the set of blocking pods changed since the last event (its
    /// failure forgets it, so the next change says it again).
    pub(super) fn announce(&self, pvc: &Pvc, blockers: Vec<Blocker>) -> Option<(Write, Told)> {
        let key = (pvc.metadata.namespace.clone(), pvc.metadata.name.clone());
        {
            let mut a = self.lock_announced();
            if a.get(&key) == Some(&blockers) {
                return None;
            }
            a.insert(key.clone(), blockers.clone());
            self.metrics.blocked_pvcs.set(a.len() as i64);
        }
        let note = release::postponed_message(pvc, &blockers);
        let ev = Write::event(
            pvc_reference(pvc),
            false,
            "DeletionPostponed",
            note,
            "KeepFinalizer",
        );
        Some((ev, Told::new("DeletionPostponed", Some(key))))
    }
}

pub(super) fn pvc_reference(pvc: &Pvc) -> k8s::ObjectReference {
    k8s::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        name: Some(pvc.metadata.name.clone()),
        namespace: Some(pvc.metadata.namespace.clone()),
        uid: Some(pvc.metadata.uid.to_string()).filter(|u| !u.is_empty()),
        ..Default::default()
    }
}
