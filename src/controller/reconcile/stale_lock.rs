//! rules.md §2f "the controller cleans up": a RWO lock whose node holds no user of the claim, as
//! the apiserver shows it (the webhook's reading, `lock_hold`), is cleared by a patch that `test`s the lock's value.

use super::*;
use crate::rules::rwo_lock::Cleanup;

impl Reconciler {
    /// rules.md §2f "the controller cleans up": remove the RWO lock once no pod on its node uses
    /// the claim (the apiserver confirms what the cache suggests, read as a take-over reads it) and this process has seen
    /// it so for the grace (a bind's lock: `BIND_LOCK_TIDY`, the next placement takes it over by
    /// itself), or its node is gone (with its record) or out of service (confirmed live). The removal `test`s the lock's
    /// value, so a lock retaken meanwhile stays. A lock too young to judge is looked at again when
    /// its wait ends (no date written by anyone else sets that time).
    pub(super) async fn clear_stale_lock(&self, pvc: &Pvc) -> Action {
        let (ns, name) = (&pvc.metadata.namespace, &pvc.metadata.name);
        let Some(raw) = pvc.metadata.annotation(RWO_LOCK) else {
            return Action::done();
        };
        let Some(lock) = RwoLock::parse(raw) else {
            return Action::done();
        };
        let in_use = self
            .cached_pods(ns, name)
            .iter()
            .any(|p| rwo_lock::uses_on(p, ns, name, &lock.node));
        let node = self.view.held::<crate::model::Node>("", &lock.node);
        let cached = rwo_lock::CachedHold {
            in_use,
            node: node.as_deref(),
            via: lock.via,
        };
        let clock = self.holds.clock();
        let quiet = clock.quiet_for(ns, name, raw, cached.seen_in_use());
        let observed = clock.age(quiet, &lock);
        let plan = match rwo_lock::cleanup_cached(&cached, observed) {
            Cleanup::ReadLive => {
                // Sampled before the live reads, as the webhook does.
                let writer_stored = self.holds.writer_stored(ns, &lock);
                // The webhook's reading of a hold (the cache's user first, the users' LIST and
                // the lock's pod at once, the pod seen gone, the node from the cache, the
                // deletion record), each live read waiting for the controller's limit and
                // answered within the live read's cap (a read not answered is retried below).
                let hold = self
                    .holds
                    .read(pvc, &lock, Fresh::Live, Some(&self.limiter))
                    .await;
                match rwo_lock::cleanup_live(&lock, &hold.judged(name, writer_stored)) {
                    // Kept because a fact it hinged on could not be read: asked again.
                    Cleanup::Keep if hold.undecided() => {
                        return Action::then(Outcome::Retry(Retry::Api(format!(
                            "what holds the ReadWriteOnce lock on node {:?} could not be read",
                            lock.node
                        ))));
                    }
                    plan => plan,
                }
            }
            plan => plan,
        };
        match plan {
            Cleanup::Keep => Action::done(),
            Cleanup::LookAgainAfter(after) => Action::then(Outcome::RequeueAfter(after)),
            Cleanup::Clear(why) => clear_lock(ns, name, raw, &lock, why),
            // `cleanup_live` decides from the live read: it never asks for another.
            Cleanup::ReadLive => Action::done(),
        }
    }
}

/// Remove the lock, `test`ing its value: a lock retaken meanwhile stays.
fn clear_lock(ns: &str, name: &str, raw: &str, lock: &RwoLock, why: &'static str) -> Action {
    let path = format!("/metadata/annotations/{}", RWO_LOCK.replace('/', "~1"));
    let patch: json_patch::Patch = match serde_json::from_value(serde_json::json!([
        {"op": "test", "path": path, "value": raw},
        {"op": "remove", "path": path},
    ])) {
        Ok(p) => p,
        Err(e) => return Action::then(Outcome::Retry(Retry::Api(e.to_string()))),
    };
    let write = Write::Pvc {
        namespace: ns.to_string(),
        name: name.to_string(),
        patch: Patch::Json(patch),
    };
    Action::write(
        write,
        Done::LockCleared {
            namespace: ns.to_string(),
            name: name.to_string(),
            pod: lock.pod.clone(),
            node: lock.node.clone(),
            why,
        },
    )
}
