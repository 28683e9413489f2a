//! Releases in batches: one consistent pod LIST per namespace for the claims that wait on it,
//! then each claim's finalizer removed with a `test` of what was read.

use super::*;
use crate::state::query;

impl Reconciler {
    /// One consistent LIST for the namespace, then each PVC of the batch decided on it.
    pub(super) async fn release_batch(&self, namespace: &str, batch: Vec<(Key, Arc<Pvc>)>) {
        self.limiter.acquire().await;
        self.metrics.consistent_lists.inc();
        // Only pods naming a claim of the batch are kept while the pages stream by.
        let names: std::collections::HashSet<&str> = batch
            .iter()
            .map(|(_, p)| p.metadata.name.as_str())
            .collect();
        let keep =
            |p: &Pod| crate::rules::claims::claims_of(p).any(|c| names.contains(c.name.as_str()));
        let pods = match self
            .view
            .read(query::Pods(PodsIn::Namespace(namespace), keep, Fresh::Live))
            .await
        {
            Fact::Found(p) => p,
            Fact::Missing | Fact::Unknown(_) => {
                // Nothing is released on a guess: every PVC of the batch retries with backoff.
                for (k, _) in batch {
                    self.finish(
                        &k,
                        Outcome::Retry(Retry::ListFailed {
                            namespace: namespace.to_string(),
                        }),
                    );
                }
                return;
            }
        };
        // The batch's patches in flight together (the limiter still paces them): one at a time,
        // a batch of 100 waits 100 round trips on an apiserver with room for more.
        let pods = &pods;
        let mut done = futures::stream::iter(batch)
            .map(|(key, pvc)| async move {
                let out = self.release_one(&pvc, pods).await;
                (key, out)
            })
            .buffer_unordered(RELEASE_IN_FLIGHT);
        while let Some((key, out)) = done.next().await {
            self.finish(&key, out);
        }
    }

    pub(super) async fn release_one(&self, pvc: &Pvc, live_pods: &[Pod]) -> Outcome {
        let (ns, name) = (&pvc.metadata.namespace, &pvc.metadata.name);
        let blockers = release::blockers(pvc, live_pods);
        if !blockers.is_empty() {
            // The cache was behind: the live list shows users.
            self.announce(pvc, blockers).await;
            return Outcome::Done;
        }
        let Some(patch) = release::finalizer_removal_patch(&pvc.metadata, PVC_FINALIZER) else {
            return Outcome::Done;
        };
        if let Err(o) = self.write(pvc_patch(pvc, Patch::Json(patch))).await {
            return o;
        }
        self.forget_pvc(ns, name);
        self.metrics
            .blocked_pvcs
            .set(self.lock_announced().len() as i64);
        self.metrics
            .finalizers_removed
            .get_or_create(&ResourceLabel { resource: "pvc" })
            .inc();
        tracing::info!(pvc = %format!("{ns}/{name}"), "no pod uses the claim (consistent read); protection finalizer removed");
        Outcome::Done
    }
}
