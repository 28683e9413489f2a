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
                let out = self.execute(self.release_one(&pvc, pods)).await;
                (key, out)
            })
            .buffer_unordered(RELEASE_IN_FLIGHT);
        while let Some((key, out)) = done.next().await {
            self.finish(&key, out);
        }
    }

    /// What to do about terminating claim `pvc` on a consistent LIST of its namespace's pods:
    /// tell who keeps it, or release it with a `test` of what was read.
    pub(super) fn release_one(&self, pvc: &Pvc, live_pods: &[Pod]) -> Action {
        let (ns, name) = (&pvc.metadata.namespace, &pvc.metadata.name);
        let blockers = release::blockers(pvc, live_pods);
        if !blockers.is_empty() {
            // The cache was behind: the live list shows users.
            return Action::done().telling(self.announce(pvc, blockers));
        }
        match release::finalizer_removal_patch(&pvc.metadata, PVC_FINALIZER) {
            Some(patch) => Action::write(
                pvc_patch(pvc, Patch::Json(patch)),
                Done::ClaimReleased {
                    namespace: ns.clone(),
                    name: name.clone(),
                },
            ),
            None => Action::done(),
        }
    }
}
