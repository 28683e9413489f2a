//! rules.md §8 "renewing an override": the leader lifts the overrides on claims, volumes and nodes
//! that count for nothing until a person sets them again (`rules::proof::lift`), so that setting
//! one again, `kubectl annotate --overwrite` included, is a new setting, stamped and judged. Pods
//! are not written: the controller may only delete them (there, remove the override, then set it).

use super::*;
use crate::rules::proof::{Lift, Reader, lift};

/// How often the leader looks, from its caches: an override is lifted at most this long after it
/// stopped counting (or after its object last changed).
pub const LIFT_EVERY: Duration = Duration::from_secs(10);

impl Reconciler {
    /// One pass over the cached claims, volumes and nodes; returns the overrides lifted.
    pub async fn lift_overrides(&self, reader: Reader) -> u64 {
        let mut lifted = 0;
        for pvc in self.store.pvcs.all() {
            let m = &pvc.metadata;
            if let Some(l) = lift(m, reader.mode, reader.expiry) {
                lifted += self
                    .lift_one::<k8s::PersistentVolumeClaim>("pvc", Some(&m.namespace), &m.name, l)
                    .await;
            }
        }
        for pv in self.store.pvs.all() {
            if let Some(l) = lift(&pv.metadata, reader.mode, reader.expiry) {
                lifted += self
                    .lift_one::<k8s::PersistentVolume>("pv", None, &pv.metadata.name, l)
                    .await;
            }
        }
        for node in self.store.nodes.all() {
            if let Some(l) = lift(&node.metadata, reader.mode, reader.expiry) {
                lifted += self
                    .lift_one::<k8s::Node>("node", None, &node.metadata.name, l)
                    .await;
            }
        }
        lifted
    }

    /// Lift `l` from one object and say so in an Event on it. A failed `test` (someone set the
    /// override again, or the cache was behind) lifts nothing: the next pass looks again.
    async fn lift_one<K: kube::Resource<DynamicType = ()>>(
        &self,
        resource: &'static str,
        namespace: Option<&str>,
        name: &str,
        l: Lift,
    ) -> u64 {
        self.limiter.acquire().await;
        let keys: Vec<&str> = l.keys.iter().map(|k| k.annotation()).collect();
        if let Err(e) = self.writer.patch_json::<K>(namespace, name, l.patch).await {
            tracing::debug!(%resource, %name, error = %e, "override not lifted (changed meanwhile?)");
            return 0;
        }
        self.metrics
            .overrides_lifted
            .get_or_create(&ResourceLabel { resource })
            .inc_by(keys.len() as u64);
        let note = format!(
            "{}. volguard lifted it: setting it again (`kubectl annotate --overwrite` included) is stamped anew and counts.",
            l.why
        );
        tracing::info!(%resource, %name, "{note}");
        let reference = k8s::ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
            name: Some(name.to_string()),
            namespace: namespace.map(str::to_string),
            ..Default::default()
        };
        let ev = Event {
            type_: EventType::Normal,
            reason: "OverrideLifted".into(),
            // Events cap their note at 1 KiB.
            note: Some(note.chars().take(1000).collect()),
            action: "Lift".into(),
            secondary: None,
        };
        self.limiter.acquire().await;
        if let Err(e) = self.writer.event(&ev, &reference).await {
            tracing::warn!(error = %e, "could not publish OverrideLifted event");
        }
        keys.len() as u64
    }
}
