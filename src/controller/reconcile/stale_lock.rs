//! rules.md §2f "the controller cleans up": a RWO lock whose node holds no user of the claim, as
//! a quorum read shows it, is cleared with the claim's resourceVersion.

use super::*;
use crate::rules::decision::ReadError;
use crate::rules::rwo_lock::Cleanup;

impl Reconciler {
    /// rules.md §2f "the controller cleans up": remove the RWO lock once no pod on its node uses
    /// the claim (a consistent LIST confirms what the cache suggests) and this process has seen
    /// it so for the grace (a bind's lock: `BIND_LOCK_TIDY`, the next placement takes it over by
    /// itself), or its node is gone or out of service (read live). The removal `test`s the lock's
    /// value, so a lock retaken meanwhile stays. A lock too young to judge is looked at again when
    /// its wait ends (no date written by anyone else sets that time).
    pub(super) async fn clear_stale_lock(&self, pvc: &Pvc) -> Outcome {
        let (ns, name) = (&pvc.metadata.namespace, &pvc.metadata.name);
        let Some(raw) = pvc.metadata.annotation(RWO_LOCK) else {
            return Outcome::Done;
        };
        let Some(lock) = RwoLock::parse(raw) else {
            return Outcome::Done;
        };
        let in_use = self
            .view
            .store()
            .claims
            .pods_naming(ns, name)
            .into_iter()
            .filter_map(|n| self.view.store().pods.get(ns, &n))
            .any(|p| rwo_lock::uses_on(&p, ns, name, &lock.node));
        let node = self.view.store().nodes.get("", &lock.node);
        let cached = rwo_lock::CachedHold {
            in_use,
            node: node.as_deref(),
            via: lock.via,
        };
        let observed = self
            .lock_clock
            .quiet_for(ns, name, raw, cached.seen_in_use());
        let plan = match rwo_lock::cleanup_cached(&cached, observed) {
            Cleanup::ReadLive => {
                // Sampled before the live read of the lock's pod, as the webhook does.
                let writer_stored = self.view.store().pod_stored(ns, &lock.pod, &lock.uid);
                let live = match self.read_hold(ns, name, &lock).await {
                    Ok(live) => live,
                    Err(retry) => return retry,
                };
                let mut hold = rwo_lock::NodeHold {
                    claim: name,
                    users: live.users.as_ref().map(Vec::as_slice),
                    writer: live.writer.as_ref(),
                    node: live.node.as_ref(),
                    gone_recorded: live.gone_recorded,
                    observed,
                    writer_stored,
                };
                if hold.seen_in_use() {
                    hold.observed = self.lock_clock.quiet_for(ns, name, raw, true);
                }
                rwo_lock::cleanup_live(&lock, &hold)
            }
            plan => plan,
        };
        match plan {
            Cleanup::Keep => Outcome::Done,
            Cleanup::LookAgainAfter(after) => Outcome::RequeueAfter(after),
            Cleanup::Clear(why) => self.clear_lock(ns, name, raw, &lock, why).await,
            // `cleanup_live` decides from the live read: it never asks for another.
            Cleanup::ReadLive => Outcome::Done,
        }
    }

    /// What holds the lock, read live: its node, the pods on it that use the claim (a consistent
    /// LIST), the pod the lock names (may the placement it was written for still land?), and for
    /// a node gone, a record of its deletion on proof (rules.md §7).
    async fn read_hold(&self, ns: &str, name: &str, lock: &RwoLock) -> Result<LiveHold, Outcome> {
        // Unbounded: these reads never had a deadline (the limiter paces them).
        let api = |e: ReadError| Outcome::Retry(Retry::Api(e.to_string()));
        self.limiter.acquire().await;
        let node = match self.view.node(&lock.node, Fresh::Unbounded).await {
            Fact::Unknown(e) => return Err(api(e)),
            n => n.map(Arc::unwrap_or_clone),
        };
        self.limiter.acquire().await;
        let users = self
            .view
            .pods(
                PodsIn::NamespaceOnNode(ns, &lock.node),
                |p| rwo_lock::uses_on(p, ns, name, &lock.node),
                Fresh::Live,
            )
            .await;
        self.limiter.acquire().await;
        let writer = match self.view.pod(ns, &lock.pod, Fresh::Unbounded).await {
            Fact::Unknown(e) => return Err(api(e)),
            p => p.map(Arc::unwrap_or_clone),
        };
        // The one reading of a deletion record every door shares (the Lease checked with it),
        // paced as the reads above; made only for a node read gone.
        let gone_recorded = match &node {
            Fact::Missing => {
                self.limiter.acquire().await;
                crate::fencing::records::gone_record(&self.view, &lock.node, &node, Some(lock.at))
                    .await
                    .is_some()
            }
            _ => false,
        };
        Ok(LiveHold {
            node,
            users,
            writer,
            gone_recorded,
        })
    }

    /// Remove the lock, `test`ing its value: a lock retaken meanwhile stays.
    async fn clear_lock(
        &self,
        ns: &str,
        name: &str,
        raw: &str,
        lock: &RwoLock,
        why: &str,
    ) -> Outcome {
        let path = format!("/metadata/annotations/{}", RWO_LOCK.replace('/', "~1"));
        let patch: json_patch::Patch = match serde_json::from_value(serde_json::json!([
            {"op": "test", "path": path, "value": raw},
            {"op": "remove", "path": path},
        ])) {
            Ok(p) => p,
            Err(e) => return Outcome::Retry(Retry::Api(e.to_string())),
        };
        if let Err(o) = self
            .patch_pvc(ns, name, Patch::Json::<serde_json::Value>(patch))
            .await
        {
            return o;
        }
        self.metrics.locks_cleared.inc();
        tracing::info!(pvc = %format!("{ns}/{name}"), first_holder = %lock.pod, node = %lock.node, reason = why,
            "ReadWriteOnce lock cleared (consistent read)");
        Outcome::Done
    }
}

/// The facts of a lock's holder, read live.
struct LiveHold {
    node: Fact<crate::model::Node>,
    users: Fact<Vec<Pod>>,
    writer: Fact<Pod>,
    gone_recorded: bool,
}
