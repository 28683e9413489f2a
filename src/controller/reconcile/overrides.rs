//! rules.md §8 "renewing an override": the leader lifts a person's override on a claim or volume
//! once it has certainly expired (`rules::proof::lift`), so that setting it again, `kubectl
//! annotate --overwrite` included, is a new setting, stamped and judged. Pods and nodes are not
//! written: the controller may only delete pods, and a node's confirmation is part of a fencing
//! incident's record (there, remove the override, then set it again).

use super::*;
use crate::rules::proof::{Lift, Reader, lift};
use std::time::Instant;

/// How often the leader looks, from its caches.
pub const LIFT_EVERY: Duration = Duration::from_secs(10);
/// An object whose lift was refused is tried again no sooner than this (a policy or RBAC of the
/// cluster's own may refuse it for good; a changed object is simply looked at on the next pass).
const AFTER_REFUSAL: Duration = Duration::from_secs(300);

/// Objects whose last lift was refused, and when it may be tried again.
#[derive(Default)]
pub struct Refused(Mutex<HashMap<(&'static str, String, String), Instant>>);

impl Refused {
    fn waiting(&self, key: &(&'static str, String, String)) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        m.retain(|_, until| *until > now);
        m.contains_key(key)
    }

    fn note(&self, key: (&'static str, String, String)) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(key, Instant::now() + AFTER_REFUSAL);
    }
}

impl Reconciler {
    /// One pass over the cached claims and volumes; returns the overrides lifted.
    pub async fn lift_overrides(&self, reader: Reader, refused: &Refused) -> u64 {
        let mut lifted = 0;
        for pvc in self.view.sweep::<Pvc>(None) {
            let m = &pvc.metadata;
            if let Some(l) = lift(m, reader.mode, reader.expiry) {
                lifted += self
                    .lift_one::<k8s::PersistentVolumeClaim>("pvc", m, l, refused, |patch| {
                        Write::Pvc {
                            namespace: m.namespace.clone(),
                            name: m.name.clone(),
                            patch,
                        }
                    })
                    .await;
            }
        }
        for pv in self.view.sweep::<Pv>(None) {
            if let Some(l) = lift(&pv.metadata, reader.mode, reader.expiry) {
                lifted += self
                    .lift_one::<k8s::PersistentVolume>("pv", &pv.metadata, l, refused, |patch| {
                        Write::Pv {
                            name: pv.metadata.name.clone(),
                            patch,
                        }
                    })
                    .await;
            }
        }
        lifted
    }

    /// Lift `l` from one object (`write`: its patch on that object) and say so in an Event on it.
    /// A failed `test` (the object changed since the cache read it) lifts nothing: the next pass
    /// looks again.
    async fn lift_one<K: kube::Resource<DynamicType = ()>>(
        &self,
        resource: &'static str,
        meta: &crate::model::Meta,
        l: Lift,
        refused: &Refused,
        write: impl FnOnce(Patch<serde_json::Value>) -> Write,
    ) -> u64 {
        let namespace = (!meta.namespace.is_empty()).then_some(meta.namespace.as_str());
        let key = (resource, meta.namespace.clone(), meta.name.clone());
        if refused.waiting(&key) {
            return 0;
        }
        self.limiter.acquire().await;
        let n = l.keys.len() as u64;
        let labels = ResourceLabel { resource };
        match self.writer.apply(write(Patch::Json(l.patch))).await {
            Ok(()) => {}
            // The `test` failed or the object is gone: it changed since the cache read it.
            Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409 | 422) => return 0,
            Err(e) => {
                tracing::warn!(%resource, name = %meta.name, error = %e,
                    "could not lift an expired override; trying again in 5 minutes");
                self.metrics
                    .override_lift_failures
                    .get_or_create(&labels)
                    .inc();
                refused.note(key);
                return 0;
            }
        }
        self.metrics
            .overrides_lifted
            .get_or_create(&labels)
            .inc_by(n);
        let note = format!(
            "{}. volguard lifted it: setting it again (`kubectl annotate --overwrite` included) is stamped anew and counts.",
            l.why
        );
        tracing::info!(%resource, name = %meta.name, "{note}");
        let reference = k8s::ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
            name: Some(meta.name.clone()),
            namespace: namespace.map(str::to_string),
            // `kubectl describe` lists the Events whose uid is the object's.
            uid: (!meta.uid.is_empty()).then(|| meta.uid.to_string()),
            ..Default::default()
        };
        let ev = Write::event(reference, false, "OverrideLifted", note, "Lift");
        self.limiter.acquire().await;
        if let Err(e) = self.writer.apply(ev).await {
            tracing::warn!(error = %e, "could not publish OverrideLifted event");
        }
        n
    }
}
