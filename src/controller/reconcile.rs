//! One reconcile per key: read the cache, ask the rules, confirm with a consistent read before
//! anything is released, patch with a `test`, retry with backoff on any error.

use super::metrics::{ControllerMetrics, ResourceLabel, ResultLabel};
use super::queue::Queue;
use crate::model::{PV_FINALIZER, PVC_FINALIZER, Pod, Pv, Pvc, UNUSED_SINCE};
use crate::rules::Fact;
use crate::rules::release::{self, Blocker, PvPlan, PvcPlan, UnusedSince};
use crate::rules::rwo_lock::{self, RWO_LOCK, RwoLock};
use crate::state::live::Change;
use crate::state::{Fresh, PodsIn, Readable, View, Write, Writer};
use futures::StreamExt;
use k8s_openapi::api::core::v1 as k8s;
use kube::api::Patch;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// The object changed since it was read: a failed `test` or precondition (409, 422).
    #[error("changed since read: {0}")]
    Changed(String),
    /// Any other API error but 404.
    #[error("{0}")]
    Api(String),
}

/// How one key's reconcile ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Done,
    Retry(Retry),
    /// Nothing to do yet: look again after this long (kube-runtime's `Action::requeue`).
    RequeueAfter(Duration),
}

/// What the reconciler is told (built from the controller's flags by `controller::run`).
#[derive(Debug, Clone)]
pub struct ReconcilerConfig {
    /// Terminating claims of one namespace released on one consistent LIST.
    pub list_batch: usize,
    /// How long a claim is seen unused before it is first marked (`--unused-grace`).
    pub unused_grace: Duration,
    /// Client-side rate limit of the controller's API calls.
    pub qps: f64,
    pub burst: u32,
    /// kube-apiserver's `--request-timeout` (`--apiserver-request-timeout`): the lock's grace.
    pub apiserver_request_timeout: Duration,
}

/// Finalizer removals of one batch in flight at once.
const RELEASE_IN_FLIGHT: usize = 8;

pub struct Reconciler {
    /// The controller's view (its watch caches; live reads through it).
    pub view: View,
    pub queue: Arc<Queue<Key>>,
    metrics: Arc<ControllerMetrics>,
    /// Every write: patches with a `test`, Events.
    writer: Writer,
    /// Last blocker set announced per terminating PVC: an event only when it changes.
    announced: Mutex<HashMap<(String, String), Vec<Blocker>>>,
    /// RWO claims seen on several nodes, with the node set last announced (rules.md §2f detection).
    multi_node: Mutex<HashMap<(String, String), Vec<String>>>,
    batch: usize,
    unused_grace: Duration,
    limiter: RateLimiter,
    /// What holds a RWO lock on its node, read as the webhook reads it, with this process's
    /// clock of how long each lock has been seen (rules.md §2f "one clock").
    holds: crate::lock_hold::LockHolds,
    /// Since when each unmarked Bound claim has been seen unused (the mark written takes the
    /// wall time); dropped once it is used, marked or deleted.
    unused_seen: crate::runtime::seen::Seen<(String, String), ()>,
}

impl Reconciler {
    /// `writer` writes as "volguard-controller" (`View::writer`).
    pub fn new(
        view: View,
        writer: Writer,
        queue: Arc<Queue<Key>>,
        metrics: Arc<ControllerMetrics>,
        config: ReconcilerConfig,
    ) -> Self {
        let clock = crate::lock_hold::LockClock::tidying(config.apiserver_request_timeout);
        let holds = crate::lock_hold::LockHolds::new(view.clone(), clock);
        Reconciler {
            writer,
            view,
            queue,
            metrics,
            announced: Mutex::new(HashMap::new()),
            holds,
            unused_seen: crate::runtime::seen::Seen::default(),
            multi_node: Mutex::new(HashMap::new()),
            batch: config.list_batch,
            unused_grace: config.unused_grace,
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
                for p in self.view.sweep::<Pvc>(None) {
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
        self.unused_seen.forget(&key);
        let mut m = self.multi_node.lock().unwrap_or_else(|e| e.into_inner());
        m.remove(&key);
        self.metrics.multi_node_rwo.set(m.len() as i64);
    }

    fn cached_pods(&self, namespace: &str, claim: &str) -> Vec<Arc<Pod>> {
        self.view.held_naming(namespace, claim)
    }

    pub async fn work(self: Arc<Self>) {
        while let Some(key) = self.queue.next().await {
            self.metrics.queue_depth.set(self.queue.len() as i64);
            match &key {
                Key::Pv(name) => {
                    let out = self.execute(self.reconcile_pv(name).await).await;
                    self.finish(&key, out);
                }
                Key::Pvc { namespace, name } => {
                    let Some(pvc) = self.view.held::<Pvc>(namespace, name) else {
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
                                    && let Some(p) = self.view.held::<Pvc>(ns, n)
                                {
                                    batch.push((k.clone(), p));
                                } else {
                                    self.finish(&k, Outcome::Done);
                                }
                            }
                            self.release_batch(namespace, batch).await;
                        }
                        plan => {
                            let action = self.reconcile_pvc(&pvc, plan, &cached).await;
                            let out = self.execute(action).await;
                            self.finish(&key, out);
                        }
                    }
                }
            }
        }
    }

    fn needs_confirm(&self, ns: &str, name: &str) -> bool {
        self.view.held::<Pvc>(ns, name).is_some_and(|p| {
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
            Outcome::RequeueAfter(after) => {
                self.metrics
                    .reconciles
                    .get_or_create(&ResultLabel { result: "success" })
                    .inc();
                self.queue.forget(key);
                self.queue.add_after(key.clone(), after);
            }
        }
        self.queue.done(key);
    }

    /// What to do about claim `pvc` on plan `plan` (`cached`: the pods the cache shows naming it).
    async fn reconcile_pvc(&self, pvc: &Pvc, plan: PvcPlan, cached: &[Arc<Pod>]) -> Action {
        let (ns, name) = (&pvc.metadata.namespace, &pvc.metadata.name);
        let told = self.detect_multi_node(pvc, cached);
        let action = match plan {
            PvcPlan::AddFinalizer => {
                match release::finalizer_add_patch(&pvc.metadata, PVC_FINALIZER) {
                    Some(patch) => Action::write(
                        pvc_patch(pvc, Patch::Json(patch)),
                        Done::FinalizerAdded {
                            resource: "pvc",
                            object: format!("{ns}/{name}"),
                        },
                    ),
                    None => Action::done(),
                }
            }
            PvcPlan::Blocked(blockers) => Action::done().telling(self.announce(pvc, blockers)),
            // A lock looked at again later does not hold up the claim's unused clock: both run,
            // and the earlier look again wins; a lock whose hold could not be read is asked again
            // first.
            PvcPlan::Keep => {
                let lock = self.clear_stale_lock(pvc).await;
                match lock.retries() {
                    true => lock,
                    false => lock.and(self.maintain_unused_since(pvc, cached)),
                }
            }
            PvcPlan::ConfirmUnused => Action::then(Outcome::Retry(Retry::UnexpectedPlan)),
        };
        action.telling(told)
    }

    /// The claim's unused-since mark (KEP-5541) brought up to date, or when to look again.
    fn maintain_unused_since(&self, pvc: &Pvc, cached: &[Arc<Pod>]) -> Action {
        let (ns, name) = (&pvc.metadata.namespace, &pvc.metadata.name);
        let pods = cached.iter().map(|p| p.as_ref());
        let unmarked_unused = release::unmarked_and_unused(pvc, pods.clone());
        let (seen_for, first_seen) = self.seen_unused(ns, name, unmarked_unused);
        let grace_left = self.unused_grace.saturating_sub(seen_for);
        let value = match release::unused_since(pvc, pods, grace_left) {
            UnusedSince::Keep => return Action::done(),
            UnusedSince::Wait(left) => {
                return Action::then(Outcome::RequeueAfter(left + Duration::from_millis(100)));
            }
            UnusedSince::Set { ended } => {
                serde_json::Value::String(rfc3339(ended.map_or(first_seen, |e| e.max(first_seen))))
            }
            UnusedSince::MoveTo(t) => serde_json::Value::String(rfc3339(t)),
            UnusedSince::Clear => serde_json::Value::Null,
        };
        // The claim's uid rides along: a claim deleted and made again under this name since the
        // cache saw it differs there, and the apiserver refuses the patch (uid is immutable)
        // rather than mark a claim that was never seen unused.
        let mut patch = serde_json::json!({"metadata": {"annotations": {UNUSED_SINCE: value}}});
        if !pvc.metadata.uid.is_empty() {
            patch["metadata"]["uid"] = serde_json::Value::from(&*pvc.metadata.uid);
        }
        Action::write(
            pvc_patch(pvc, Patch::Merge(patch)),
            Done::UnusedWritten {
                namespace: ns.clone(),
                name: name.clone(),
            },
        )
    }

    /// How long claim `ns/name` has been seen unused and unmarked (`unused`: what this look
    /// found; anything else forgets it), and since when by the wall clock.
    fn seen_unused(&self, ns: &str, name: &str, unused: bool) -> (Duration, jiff::Timestamp) {
        let key = (ns.to_string(), name.to_string());
        if !unused {
            self.unused_seen.forget(&key);
            return (Duration::ZERO, jiff::Timestamp::now());
        }
        let s = self.unused_seen.observe(key, (), Duration::ZERO);
        (s.held, s.wall)
    }

    /// What to do about volume `name`: its finalizer backfilled, or removed once a live read
    /// shows it bound to nothing.
    async fn reconcile_pv(&self, name: &str) -> Action {
        let Some(pv) = self.view.held::<Pv>("", name) else {
            return Action::done();
        };
        let cached_claim = |pv: &Pv| match pv.spec.claim_ref.as_ref() {
            Some(r) => self
                .view
                .held::<Pvc>(&r.namespace, &r.name)
                .map_or(Fact::Missing, Fact::Found),
            None => Fact::Missing,
        };
        match release::pv_plan(&pv, cached_claim(&pv).as_ref().map(|c| &**c)) {
            PvPlan::Keep => Action::done(),
            PvPlan::AddFinalizer => {
                match release::finalizer_add_patch(&pv.metadata, PV_FINALIZER) {
                    Some(patch) => Action::write(
                        pv_patch(name, patch),
                        Done::FinalizerAdded {
                            resource: "pv",
                            object: name.to_string(),
                        },
                    ),
                    None => Action::done(),
                }
            }
            PvPlan::Release => {
                let retry = |e: &dyn std::fmt::Display| {
                    Action::then(Outcome::Retry(Retry::Api(e.to_string())))
                };
                // Confirm on a live read: the cache may lag a binding.
                self.limiter.acquire().await;
                // Unbounded: these reads never had a deadline (the limiter paces them).
                let live: Pv = match self.view.read(Pv::named("", name, Fresh::Unbounded)).await {
                    Fact::Found(d) => Arc::unwrap_or_clone(d),
                    Fact::Missing => return Action::done(),
                    Fact::Unknown(e) => return retry(&e),
                };
                // Its claim read live too: a phase forged `Available` proves nothing (§2c).
                let claim = match live.spec.claim_ref.as_ref() {
                    Some(r) => {
                        self.limiter.acquire().await;
                        match self
                            .view
                            .read(Pvc::named(&r.namespace, &r.name, Fresh::Unbounded))
                            .await
                        {
                            Fact::Unknown(e) => return retry(&e),
                            c => c.map(Arc::unwrap_or_clone),
                        }
                    }
                    None => Fact::Missing,
                };
                if release::pv_plan(&live, claim.as_ref()) != PvPlan::Release {
                    return Action::done();
                }
                match release::finalizer_removal_patch(&live.metadata, PV_FINALIZER) {
                    Some(patch) => Action::write(
                        pv_patch(name, patch),
                        Done::VolumeReleased {
                            name: name.to_string(),
                        },
                    ),
                    None => Action::done(),
                }
            }
        }
    }
}

/// 404: the object is gone, nothing left to do. Anything else (a failed `test` is 422 or 409,
/// network errors, throttling) retries with backoff after the watch delivers fresh state.
fn classify(r: Result<(), kube::Error>) -> Result<(), Outcome> {
    match r {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Err(Outcome::Done),
        Err(kube::Error::Api(e)) if matches!(e.code, 409 | 422) => {
            Err(Outcome::Retry(Retry::Changed(e.to_string())))
        }
        Err(e) => Err(Outcome::Retry(Retry::Api(e.to_string()))),
    }
}

/// A patch on claim `pvc` (JSON: its ops begin with their `test`s; merge: it carries the uid).
fn pvc_patch(pvc: &Pvc, patch: Patch<serde_json::Value>) -> Write {
    Write::Pvc {
        namespace: pvc.metadata.namespace.clone(),
        name: pvc.metadata.name.clone(),
        patch,
    }
}

/// A JSON patch on volume `name` (its ops begin with their `test`s).
fn pv_patch(name: &str, patch: json_patch::Patch) -> Write {
    Write::Pv {
        name: name.to_string(),
        patch: Patch::Json(patch),
    }
}

fn rfc3339(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

mod action;
mod events;
pub mod overrides;
mod release_batch;
mod stale_lock;

pub use crate::runtime::rate_limit::RateLimiter;
use action::{Action, Done, Told};

#[cfg(test)]
#[path = "reconcile_tests.rs"]
pub(crate) mod tests;
