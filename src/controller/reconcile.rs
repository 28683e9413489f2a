//! One reconcile per key: read the cache, ask the rules, confirm with a consistent read before
//! anything is released, patch with a `test`, retry with backoff on any error.

use super::metrics::{ControllerMetrics, ResourceLabel, ResultLabel};
use super::queue::Queue;
use crate::model::{PV_FINALIZER, PVC_FINALIZER, Pod, Pv, Pvc, UNUSED_SINCE};
use crate::rules::Fact;
use crate::rules::release::{self, Blocker, PvPlan, PvcPlan, UnusedSince};
use crate::rules::rwo_lock::{self, RWO_LOCK, RwoLock};
use crate::state::Store;
use crate::state::decoded::Decoded;
use crate::state::live::{Change, list_pods_consistent};
use crate::state::writer::Writer;
use futures::StreamExt;
use k8s_openapi::api::core::v1 as k8s;
use kube::api::{Api, Patch};
use kube::runtime::events::{Event, EventType};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    Pvc { namespace: String, name: String },
    Pv(String),
}

impl Key {
    pub fn pvc(namespace: &str, name: &str) -> Key {
        Key::Pvc {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

/// Why a key is retried with backoff.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum Retry {
    #[error("a terminating claim reached the per-key path (it is released in batches)")]
    UnexpectedPlan,
    #[error("the consistent pod list of {namespace:?} failed")]
    ListFailed { namespace: String },
    /// An API error other than 404; a failed `test` (409/422) lands here too.
    #[error("{0}")]
    Api(String),
}

/// How one key's reconcile ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Done,
    Retry(Retry),
}

/// What the reconciler is told (built from the controller's flags by `controller::run`).
#[derive(Debug, Clone)]
pub struct ReconcilerConfig {
    /// This replica's name in its Events.
    pub identity: String,
    /// Terminating claims of one namespace released on one consistent LIST.
    pub list_batch: usize,
    /// Client-side rate limit of the controller's API calls.
    pub qps: f64,
    pub burst: u32,
}

/// Finalizer removals of one batch in flight at once.
const RELEASE_IN_FLIGHT: usize = 8;

pub struct Reconciler {
    pub client: kube::Client,
    pub store: Arc<Store>,
    pub queue: Arc<Queue<Key>>,
    metrics: Arc<ControllerMetrics>,
    /// Every write: patches with a `test`, Events.
    writer: Writer,
    /// Last blocker set announced per terminating PVC: an event only when it changes.
    announced: Mutex<HashMap<(String, String), Vec<Blocker>>>,
    /// RWO claims seen on several nodes, with the node set last announced (rules.md §2f detection).
    multi_node: Mutex<HashMap<(String, String), Vec<String>>>,
    batch: usize,
    limiter: RateLimiter,
    /// How long each RWO lock has been seen, on this process's clock (rules.md §2f "one clock").
    lock_clock: crate::state::lock_clock::LockClock,
}

impl Reconciler {
    pub fn new(
        client: kube::Client,
        store: Arc<Store>,
        queue: Arc<Queue<Key>>,
        metrics: Arc<ControllerMetrics>,
        config: ReconcilerConfig,
    ) -> Self {
        let writer = Writer::new(client.clone(), "volguard-controller", config.identity);
        Reconciler {
            client,
            writer,
            store,
            queue,
            metrics,
            announced: Mutex::new(HashMap::new()),
            lock_clock: crate::state::lock_clock::LockClock::live(),
            multi_node: Mutex::new(HashMap::new()),
            batch: config.list_batch,
            limiter: RateLimiter::new(config.qps, config.burst),
        }
    }

    /// Pod changes (the view already updated its claim index): enqueue the claims that may have
    /// changed state.
    pub fn on_pod_change(&self, change: Change<Pod>) {
        let (old, new) = match &change {
            Change::Applied { old, new } => (old.as_deref(), Some(new.as_ref())),
            Change::Deleted(old) => (Some(old.as_ref()), None),
            Change::Relisted => {
                // Deletes may have been missed while the watch was down: look at every PVC again.
                for p in self.store.pvcs.all() {
                    self.queue
                        .add(Key::pvc(&p.metadata.namespace, &p.metadata.name));
                }
                return;
            }
        };
        for (ns, claim) in release::claims_to_requeue(old, new) {
            self.queue.add(Key::pvc(&ns, &claim));
        }
    }

    pub fn forget_pvc(&self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        self.lock_announced().remove(&key);
        let mut m = self.multi_node.lock().unwrap_or_else(|e| e.into_inner());
        m.remove(&key);
        self.metrics.multi_node_rwo.set(m.len() as i64);
    }

    /// rules.md §2f detection: a `MultiNodeRWO` Warning event (once per change of the node set) and
    /// the `volguard_pvcs_multi_node_rwo` gauge when pods on several nodes use one RWO claim.
    async fn detect_multi_node(&self, pvc: &Pvc, cached: &[Arc<Pod>]) {
        let nodes = crate::rules::rwo::nodes_using(pvc, cached.iter());
        let key = (pvc.metadata.namespace.clone(), pvc.metadata.name.clone());
        {
            let mut m = self.multi_node.lock().unwrap_or_else(|e| e.into_inner());
            if nodes.len() < 2 {
                if m.remove(&key).is_some() {
                    self.metrics.multi_node_rwo.set(m.len() as i64);
                }
                return;
            }
            if m.get(&key) == Some(&nodes) {
                return;
            }
            m.insert(key, nodes.clone());
            self.metrics.multi_node_rwo.set(m.len() as i64);
        }
        let message = crate::rules::rwo::multi_node_message(pvc, &nodes);
        tracing::warn!(pvc = %format!("{}/{}", pvc.metadata.namespace, pvc.metadata.name), ?nodes, "{message}");
        let ev = Event {
            type_: EventType::Warning,
            reason: "MultiNodeRWO".into(),
            note: Some(message),
            action: "Detect".into(),
            secondary: None,
        };
        self.limiter.acquire().await;
        if let Err(e) = self.writer.event(&ev, &pvc_reference(pvc)).await {
            tracing::warn!(error = %e, "could not publish MultiNodeRWO event");
        }
    }

    fn lock_announced(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Vec<Blocker>>> {
        self.announced.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cached_pods(&self, namespace: &str, claim: &str) -> Vec<Arc<Pod>> {
        self.store
            .claims
            .pods_naming(namespace, claim)
            .into_iter()
            .filter_map(|n| self.store.pods.get(namespace, &n))
            .collect()
    }

    pub async fn work(self: Arc<Self>) {
        while let Some(key) = self.queue.next().await {
            self.metrics.queue_depth.set(self.queue.len() as i64);
            match &key {
                Key::Pv(name) => {
                    let out = self.reconcile_pv(name).await;
                    self.finish(&key, out);
                }
                Key::Pvc { namespace, name } => {
                    let Some(pvc) = self.store.pvcs.get(namespace, name) else {
                        self.finish(&key, Outcome::Done);
                        continue;
                    };
                    let cached = self.cached_pods(namespace, name);
                    match release::pvc_plan(&pvc, cached.iter().map(|p| p.as_ref())) {
                        PvcPlan::ConfirmUnused => {
                            // Batch: other queued terminating PVCs of this namespace share one LIST.
                            let mut batch = vec![(key.clone(), pvc)];
                            let more = self.queue.take_matching(
                                |k| matches!(k, Key::Pvc { namespace: ns, name: n } if ns == namespace && self.needs_confirm(ns, n)),
                                self.batch,
                            );
                            for k in more {
                                if let Key::Pvc {
                                    namespace: ns,
                                    name: n,
                                } = &k
                                    && let Some(p) = self.store.pvcs.get(ns, n)
                                {
                                    batch.push((k.clone(), p));
                                } else {
                                    self.finish(&k, Outcome::Done);
                                }
                            }
                            self.release_batch(namespace, batch).await;
                        }
                        plan => {
                            let out = self.reconcile_pvc(&pvc, plan, &cached).await;
                            self.finish(&key, out);
                        }
                    }
                }
            }
        }
    }

    fn needs_confirm(&self, ns: &str, name: &str) -> bool {
        self.store.pvcs.get(ns, name).is_some_and(|p| {
            let cached = self.cached_pods(ns, name);
            release::pvc_plan(&p, cached.iter().map(|p| p.as_ref())) == PvcPlan::ConfirmUnused
        })
    }

    fn finish(&self, key: &Key, out: Outcome) {
        match out {
            Outcome::Done => {
                self.metrics
                    .reconciles
                    .get_or_create(&ResultLabel { result: "success" })
                    .inc();
                self.queue.forget(key);
            }
            Outcome::Retry(why) => {
                self.metrics
                    .reconciles
                    .get_or_create(&ResultLabel { result: "retry" })
                    .inc();
                tracing::warn!(?key, reason = %why, failures = self.queue.failures(key) + 1, "reconcile failed; retrying with backoff");
                self.queue.add_rate_limited(key.clone());
            }
        }
        self.queue.done(key);
    }

    async fn reconcile_pvc(&self, pvc: &Pvc, plan: PvcPlan, cached: &[Arc<Pod>]) -> Outcome {
        let (ns, name) = (&pvc.metadata.namespace, &pvc.metadata.name);
        self.detect_multi_node(pvc, cached).await;
        match plan {
            PvcPlan::AddFinalizer => {
                let Some(patch) = release::finalizer_add_patch(&pvc.metadata, PVC_FINALIZER) else {
                    return Outcome::Done;
                };
                if let Err(o) = self
                    .patch_pvc(ns, name, Patch::Json::<serde_json::Value>(patch))
                    .await
                {
                    return o;
                }
                self.metrics
                    .finalizers_added
                    .get_or_create(&ResourceLabel { resource: "pvc" })
                    .inc();
                tracing::info!(pvc = %format!("{ns}/{name}"), "protection finalizer backfilled");
                Outcome::Done
            }
            PvcPlan::Blocked(blockers) => {
                self.announce(pvc, blockers).await;
                Outcome::Done
            }
            PvcPlan::Keep => match self.clear_stale_lock(pvc).await {
                Outcome::Done => self.maintain_unused_since(pvc, cached).await,
                retry => retry,
            },
            PvcPlan::ConfirmUnused => Outcome::Retry(Retry::UnexpectedPlan),
        }
    }

    async fn maintain_unused_since(&self, pvc: &Pvc, cached: &[Arc<Pod>]) -> Outcome {
        let (ns, name) = (&pvc.metadata.namespace, &pvc.metadata.name);
        let value = match release::unused_since(pvc, cached.iter().map(|p| p.as_ref())) {
            UnusedSince::Keep => return Outcome::Done,
            UnusedSince::Set { ended } => {
                let now = jiff::Timestamp::now();
                serde_json::Value::String(rfc3339(ended.map_or(now, |e| e.max(now))))
            }
            UnusedSince::MoveTo(t) => serde_json::Value::String(rfc3339(t)),
            UnusedSince::Clear => serde_json::Value::Null,
        };
        let patch = serde_json::json!({"metadata": {"annotations": {UNUSED_SINCE: value}}});
        match self.patch_pvc(ns, name, Patch::Merge(patch)).await {
            Ok(()) => Outcome::Done,
            Err(o) => o,
        }
    }

    /// rules.md §2f "the controller cleans up": remove the RWO lock once no pod on its node uses
    /// the claim (a consistent LIST confirms what the cache suggests) and this process has seen
    /// the lock for the grace, or its node is gone or out of service (read live). The removal
    /// `test`s the lock's value, so a lock retaken meanwhile stays. A lock too young to judge is
    /// looked at again when its grace ends (at most `BIND_GRACE` away: no date written by anyone
    /// else sets that time).
    async fn clear_stale_lock(&self, pvc: &Pvc) -> Outcome {
        let (ns, name) = (&pvc.metadata.namespace, &pvc.metadata.name);
        let Some(raw) = pvc.metadata.annotation(RWO_LOCK) else {
            return Outcome::Done;
        };
        let Some(lock) = RwoLock::parse(raw) else {
            return Outcome::Done;
        };
        let in_use_cached = self
            .store
            .claims
            .pods_naming(ns, name)
            .into_iter()
            .filter_map(|n| self.store.pods.get(ns, &n))
            .any(|p| rwo_lock::uses_on(&p, ns, name, &lock.node));
        let node_cached = self.store.nodes.get("", &lock.node);
        let node_released = node_cached.as_ref().is_none_or(|n| n.is_out_of_service());
        if in_use_cached && !node_released {
            self.lock_clock.quiet_for(ns, name, raw, true);
            return Outcome::Done;
        }
        let observed = self.lock_clock.quiet_for(ns, name, raw, false);
        if observed < rwo_lock::BIND_GRACE && !node_released {
            // Looked at again when the grace ends (the reads below may clear it sooner, when the
            // lock's placement can no longer land).
            let left = rwo_lock::BIND_GRACE - observed + std::time::Duration::from_secs(1);
            let (queue, key) = (self.queue.clone(), Key::pvc(ns, name));
            tokio::spawn(async move {
                tokio::time::sleep(left).await;
                queue.add(key);
            });
        }
        self.limiter.acquire().await;
        let node = match Api::<Decoded<crate::model::Node>>::all(self.client.clone())
            .get_opt(&lock.node)
            .await
        {
            Ok(Some(n)) => Fact::Found(n.into_inner()),
            Ok(None) => Fact::Missing,
            Err(e) => return Outcome::Retry(Retry::Api(e.to_string())),
        };
        self.limiter.acquire().await;
        let users = list_pods_consistent(&self.client, ns, |p| {
            rwo_lock::uses_on(p, ns, name, &lock.node)
        })
        .await;
        let in_use = !matches!(&users, Fact::Found(u) if u.is_empty());
        let observed = match in_use {
            true => self.lock_clock.quiet_for(ns, name, raw, true),
            false => observed,
        };
        // The pod the lock names, read live: may the placement it was written for still land?
        self.limiter.acquire().await;
        let writer = match Api::<Decoded<Pod>>::namespaced(self.client.clone(), ns)
            .get_opt(&lock.pod)
            .await
        {
            Ok(Some(p)) => Fact::Found(p.into_inner()),
            Ok(None) => Fact::Missing,
            Err(e) => return Outcome::Retry(Retry::Api(e.to_string())),
        };
        // A node gone counts only with a record of its deletion on proof (rules.md §7).
        let gone_recorded = match &node {
            Fact::Missing => match crate::state::fences::of_node(&self.client, &lock.node).await {
                Fact::Found(all) => {
                    crate::model::fence::proof_of_down(&all, &lock.node, Some(lock.at)).is_some()
                }
                _ => false,
            },
            _ => false,
        };
        let hold = rwo_lock::NodeHold {
            claim: name,
            users: users.as_ref().map(Vec::as_slice),
            writer: writer.as_ref(),
            node: node.as_ref(),
            gone_recorded,
            observed,
        };
        let Some(why) = rwo_lock::clearable(&lock, &hold) else {
            return Outcome::Done;
        };
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

    /// Emit `DeletionPostponed` when the set of blocking pods changed since the last event.
    async fn announce(&self, pvc: &Pvc, blockers: Vec<Blocker>) {
        let key = (pvc.metadata.namespace.clone(), pvc.metadata.name.clone());
        {
            let mut a = self.lock_announced();
            if a.get(&key) == Some(&blockers) {
                return;
            }
            a.insert(key.clone(), blockers.clone());
            self.metrics.blocked_pvcs.set(a.len() as i64);
        }
        let reference = pvc_reference(pvc);
        let ev = Event {
            type_: EventType::Normal,
            reason: "DeletionPostponed".into(),
            note: Some(release::postponed_message(pvc, &blockers)),
            action: "KeepFinalizer".into(),
            secondary: None,
        };
        self.limiter.acquire().await;
        if let Err(e) = self.writer.event(&ev, &reference).await {
            tracing::warn!(error = %e, "could not publish DeletionPostponed event");
            // Allow a retry on the next change.
            self.lock_announced().remove(&key);
        }
    }

    /// One consistent LIST for the namespace, then each PVC of the batch decided on it.
    async fn release_batch(&self, namespace: &str, batch: Vec<(Key, Arc<Pvc>)>) {
        self.limiter.acquire().await;
        self.metrics.consistent_lists.inc();
        // Only pods naming a claim of the batch are kept while the pages stream by.
        let names: std::collections::HashSet<&str> = batch
            .iter()
            .map(|(_, p)| p.metadata.name.as_str())
            .collect();
        let pods = match list_pods_consistent(&self.client, namespace, |p| {
            crate::rules::claims::claims_of(p).any(|c| names.contains(c.name.as_str()))
        })
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

    async fn release_one(&self, pvc: &Pvc, live_pods: &[Pod]) -> Outcome {
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
        if let Err(o) = self
            .patch_pvc(ns, name, Patch::Json::<serde_json::Value>(patch))
            .await
        {
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

    async fn reconcile_pv(&self, name: &str) -> Outcome {
        let Some(pv) = self.store.pvs.get("", name) else {
            return Outcome::Done;
        };
        let cached_claim = |pv: &Pv| match pv.spec.claim_ref.as_ref() {
            Some(r) => self
                .store
                .pvcs
                .get(&r.namespace, &r.name)
                .map_or(Fact::Missing, Fact::Found),
            None => Fact::Missing,
        };
        match release::pv_plan(&pv, cached_claim(&pv).as_ref().map(|c| &**c)) {
            PvPlan::Keep => Outcome::Done,
            PvPlan::AddFinalizer => {
                let Some(patch) = release::finalizer_add_patch(&pv.metadata, PV_FINALIZER) else {
                    return Outcome::Done;
                };
                match self.patch_pv(name, patch).await {
                    Ok(()) => {
                        self.metrics
                            .finalizers_added
                            .get_or_create(&ResourceLabel { resource: "pv" })
                            .inc();
                        Outcome::Done
                    }
                    Err(o) => o,
                }
            }
            PvPlan::Release => {
                // Confirm on a live read: the cache may lag a binding.
                let api = Api::<Decoded<Pv>>::all(self.client.clone());
                self.limiter.acquire().await;
                let live: Pv = match api.get_opt(name).await {
                    Ok(Some(d)) => d.into_inner(),
                    Ok(None) => return Outcome::Done,
                    Err(e) => return Outcome::Retry(Retry::Api(e.to_string())),
                };
                // Its claim read live too: a phase forged `Available` proves nothing (§2c).
                let claim = match live.spec.claim_ref.as_ref() {
                    Some(r) => {
                        self.limiter.acquire().await;
                        match Api::<Decoded<Pvc>>::namespaced(self.client.clone(), &r.namespace)
                            .get_opt(&r.name)
                            .await
                        {
                            Ok(Some(c)) => Fact::Found(c.into_inner()),
                            Ok(None) => Fact::Missing,
                            Err(e) => return Outcome::Retry(Retry::Api(e.to_string())),
                        }
                    }
                    None => Fact::Missing,
                };
                if release::pv_plan(&live, claim.as_ref()) != PvPlan::Release {
                    return Outcome::Done;
                }
                let Some(patch) = release::finalizer_removal_patch(&live.metadata, PV_FINALIZER)
                else {
                    return Outcome::Done;
                };
                match self.patch_pv(name, patch).await {
                    Ok(()) => {
                        self.metrics
                            .finalizers_removed
                            .get_or_create(&ResourceLabel { resource: "pv" })
                            .inc();
                        tracing::info!(pv = %name, "volume not bound; protection finalizer removed");
                        Outcome::Done
                    }
                    Err(o) => o,
                }
            }
        }
    }

    async fn patch_pvc(
        &self,
        ns: &str,
        name: &str,
        patch: Patch<serde_json::Value>,
    ) -> Result<(), Outcome> {
        self.limiter.acquire().await;
        classify(self.writer.patch_pvc(ns, name, &patch).await)
    }

    async fn patch_pv(&self, name: &str, patch: json_patch::Patch) -> Result<(), Outcome> {
        self.limiter.acquire().await;
        classify(self.writer.patch_pv(name, patch).await)
    }
}

/// 404: the object is gone, nothing left to do. Anything else (a failed `test` is 422 or 409,
/// network errors, throttling) retries with backoff after the watch delivers fresh state.
fn classify(r: Result<(), kube::Error>) -> Result<(), Outcome> {
    match r {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Err(Outcome::Done),
        Err(e) => Err(Outcome::Retry(Retry::Api(e.to_string()))),
    }
}

fn pvc_reference(pvc: &Pvc) -> k8s::ObjectReference {
    k8s::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        name: Some(pvc.metadata.name.clone()),
        namespace: Some(pvc.metadata.namespace.clone()),
        uid: Some(pvc.metadata.uid.clone()).filter(|u| !u.is_empty()),
        ..Default::default()
    }
}

fn rfc3339(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Client-side token bucket: `qps` sustained, `burst` at once, so a startup over many objects
/// does not stampede the apiserver. Hand-written because kube's `Client` has no client-side limit
/// (client-go's has `--kube-api-qps/burst`), and a rate-limit crate (governor) would bring its own
/// clock and a dependency tree for twenty lines. The lock is held across the wait on purpose:
/// tokio's mutex is fair, so writers are served in arrival order.
pub struct RateLimiter {
    state: tokio::sync::Mutex<(f64, tokio::time::Instant)>,
    qps: f64,
    burst: f64,
}

impl RateLimiter {
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimiter {
            state: tokio::sync::Mutex::new((burst, tokio::time::Instant::now())),
            qps: qps.max(0.001),
            burst,
        }
    }

    pub async fn acquire(&self) {
        let mut s = self.state.lock().await;
        let now = tokio::time::Instant::now();
        s.0 = (s.0 + now.duration_since(s.1).as_secs_f64() * self.qps).min(self.burst);
        s.1 = now;
        if s.0 < 1.0 {
            let wait = (1.0 - s.0) / self.qps;
            tokio::time::sleep(std::time::Duration::from_secs_f64(wait)).await;
            s.0 = 1.0;
            s.1 = tokio::time::Instant::now();
        }
        s.0 -= 1.0;
    }
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
