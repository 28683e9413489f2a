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
pub struct Refused(Mutex<HashMap<RefusalKey, Instant>>);

impl Refused {
    fn waiting(&self, key: &RefusalKey) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        m.retain(|_, until| *until > now);
        m.contains_key(key)
    }

    fn note(&self, key: RefusalKey) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(key, Instant::now() + AFTER_REFUSAL);
    }
}

impl Reconciler {
    /// One pass over the cached claims and volumes: each object with an expired override gets
    /// an action (its lift, then an Event saying so), made as a key's are (`execute`).
    pub async fn lift_overrides(&self, reader: Reader, refused: &Refused) {
        for pvc in self.view.sweep::<Pvc>(None) {
            let m = &pvc.metadata;
            if let Some(l) = lift(m, reader.mode, reader.expiry) {
                let write = |patch| Write::Pvc {
                    namespace: m.namespace.clone(),
                    name: m.name.clone(),
                    patch,
                };
                self.lift_one::<k8s::PersistentVolumeClaim>("pvc", m, l, write, refused)
                    .await;
            }
        }
        for pv in self.view.sweep::<Pv>(None) {
            let m = &pv.metadata;
            if let Some(l) = lift(m, reader.mode, reader.expiry) {
                let write = |patch| Write::Pv {
                    name: m.name.clone(),
                    patch,
                };
                self.lift_one::<k8s::PersistentVolume>("pv", m, l, write, refused)
                    .await;
            }
        }
    }

    /// Make one object's lift. A failed `test` (the object changed since the cache read it) or
    /// a gone object lifts nothing: the next pass looks again. Any other failure waits
    /// `AFTER_REFUSAL` before that object is tried again.
    async fn lift_one<K: kube::Resource<DynamicType = ()>>(
        &self,
        resource: &'static str,
        meta: &crate::model::Meta,
        l: Lift,
        write: impl FnOnce(Patch<serde_json::Value>) -> Write,
        refused: &Refused,
    ) {
        let key = (resource, meta.namespace.clone(), meta.name.clone());
        if refused.waiting(&key) {
            return;
        }
        match self.execute(lifting::<K>(resource, meta, l, write)).await {
            Outcome::Retry(Retry::Api(e)) => {
                tracing::warn!(%resource, name = %meta.name, error = %e,
                    "could not lift an expired override; trying again in 5 minutes");
                self.metrics
                    .override_lift_failures
                    .get_or_create(&ResourceLabel { resource })
                    .inc();
                refused.note(key);
            }
            Outcome::Done | Outcome::RequeueAfter(_) | Outcome::Retry(_) => {}
        }
    }
}

/// Which object a refusal is remembered for: its resource, namespace and name.
type RefusalKey = (&'static str, String, String);

/// The action that lifts `l` from one object (`write`: its patch on that object) and says so in
/// an Event on it.
fn lifting<K: kube::Resource<DynamicType = ()>>(
    resource: &'static str,
    meta: &crate::model::Meta,
    l: Lift,
    write: impl FnOnce(Patch<serde_json::Value>) -> Write,
) -> Action {
    let why = format!(
        "{}. volguard lifted it: setting it again (`kubectl annotate --overwrite` included) is stamped anew and counts.",
        l.why
    );
    let reference = k8s::ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: Some(meta.name.clone()),
        namespace: (!meta.namespace.is_empty()).then(|| meta.namespace.clone()),
        // `kubectl describe` lists the Events whose uid is the object's.
        uid: (!meta.uid.is_empty()).then(|| meta.uid.to_string()),
        ..Default::default()
    };
    let event = Write::event(reference, false, "OverrideLifted", why.clone(), "Lift");
    let done = Done::OverrideLifted {
        resource,
        object: meta.name.clone(),
        lifted: l.keys.len() as u64,
        why,
    };
    Action::write(write(Patch::Json(l.patch)), done)
        .told_after(event, Told::new("OverrideLifted", None))
}
