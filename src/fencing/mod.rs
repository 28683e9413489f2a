//! Partition healing (rules.md §7): detect a node that stopped heartbeating, decide whether to
//! act, fence it through a backend, prove the fence, release its volumes with the out-of-service
//! taint, and undo it all when the node returns. Runs in the controller's leader only.
//!
//! Every step is written to the incident's NodeFence *before* it is acted on, with the object's
//! resourceVersion: a controller that restarts resumes the incident where it stood, and two
//! controllers can never both advance one. The decisions are `rules::fencing`'s.

pub mod agent;
pub mod backend;
pub mod confirm;
pub mod incident;
pub mod metrics;
pub mod observe;

use crate::model::OUT_OF_SERVICE_TAINT;
use crate::model::fence::{
    BackendKind, CONFIRM_NODE_DOWN, NodeFence, NodeFenceSpec, NodeFenceStatus, Phase,
};
use crate::rules::fencing::{self as rules, Do, Limits, Now, Open, Record, Transition};
use backend::{Answer, Backends};
use incident::{Records, now};
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::api::{Api, ListParams};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a backend gets when it is asked after its timeout already ran out (a takeover).
const LAST_ASK: Duration = Duration::from_secs(5);

/// The fencing controller's settings (`volguard controller --fencing-*`).
pub struct FencingConfig {
    pub interval: Duration,
    pub limits: Limits,
    /// The backends an `auto` incident tries, in order.
    pub chain: Vec<BackendKind>,
    pub backends: Backends,
}

pub struct Fencer {
    cfg: FencingConfig,
    records: Records,
    metrics: Arc<metrics::FencingMetrics>,
    clock: Mutex<observe::LeaseClock>,
    drivers: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// The last reason each node was held for (logged and announced once per change).
    held: Mutex<HashMap<String, String>>,
    /// (incident, backend index) this process has asked at least once.
    asked: Mutex<std::collections::HashSet<(String, usize)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn parse_ts(s: Option<&str>) -> Option<jiff::Timestamp> {
    s.and_then(|s| s.parse().ok())
}

fn seconds_since(s: Option<&str>) -> Option<f64> {
    seconds_since_ts(parse_ts(s))
}

fn seconds_since_ts(t: Option<jiff::Timestamp>) -> Option<f64> {
    t.map(|t| {
        jiff::Timestamp::now()
            .duration_since(t)
            .as_secs_f64()
            .max(0.0)
    })
}

fn node_ref(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.into()),
        ..Default::default()
    }
}

impl FencingConfig {
    pub fn from_args(a: &crate::cli::FencingArgs) -> anyhow::Result<FencingConfig> {
        use anyhow::Context;
        let dur = |d: jiff::SignedDuration| Duration::try_from(d).unwrap_or(Duration::ZERO);
        let webhook = match &a.fence_webhook_url {
            None => None,
            Some(url) => Some(backend::WebhookConfig {
                url: url.clone(),
                ca_pem: match &a.fence_webhook_ca {
                    None => None,
                    Some(p) => {
                        Some(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?)
                    }
                },
                timeout: dur(a.fence_webhook_timeout),
            }),
        };
        let secret = match &a.networkfence_secret {
            None => None,
            Some(s) => Some(
                s.split_once('/')
                    .map(|(ns, n)| (ns.to_string(), n.to_string()))
                    .with_context(|| {
                        format!("--networkfence-secret {s:?}: expected NAMESPACE/NAME")
                    })?,
            ),
        };
        Ok(FencingConfig {
            interval: dur(a.fencing_interval).max(Duration::from_millis(200)),
            limits: Limits {
                partition_after: a.partition_after,
                max_unhealthy: a.max_unhealthy_nodes,
                max_concurrent: a.max_concurrent_fences.max(1),
            },
            chain: a.fence_backends.clone(),
            backends: Backends::new(
                webhook,
                backend::NetworkFenceConfig {
                    class: a.networkfence_class.clone(),
                    driver: a.networkfence_driver.clone(),
                    secret,
                    timeout: dur(a.networkfence_timeout),
                },
                dur(a.manual_fence_timeout),
            )?,
        })
    }
}

impl Fencer {
    pub fn new(
        client: kube::Client,
        identity: String,
        cfg: FencingConfig,
        metrics: Arc<metrics::FencingMetrics>,
    ) -> Arc<Fencer> {
        Arc::new(Fencer {
            cfg,
            records: Records::new(client, identity),
            metrics,
            clock: Mutex::default(),
            drivers: Mutex::default(),
            held: Mutex::default(),
            asked: Mutex::default(),
        })
    }

    fn client(&self) -> &kube::Client {
        &self.records.client
    }

    /// Look every `interval`: resume open incidents, open new ones (until the task is dropped).
    pub async fn run(self: Arc<Self>) {
        loop {
            if let Err(e) = self.clone().tick().await {
                tracing::warn!(error = %e, "fencing: could not read the cluster; retrying");
            }
            tokio::time::sleep(self.cfg.interval).await;
        }
    }

    /// Stop every incident's driver (leadership lost or shutdown): the incidents stay recorded
    /// and the next leader resumes them.
    pub fn stop(&self) {
        for (_, d) in lock(&self.drivers).drain() {
            d.abort();
        }
    }

    async fn tick(self: Arc<Self>) -> Result<(), kube::Error> {
        // Detection reads the apiserver's watch cache (`resourceVersion=0`: no etcd read per tick
        // at a thousand nodes); every step that acts reads live (`advance`).
        let nodes = Api::<Node>::all(self.client().clone())
            .list(&ListParams::default().match_any())
            .await?
            .items;
        let leases = observe::leases(self.client()).await?;
        let incidents = self.records.list().await?;
        for p in Phase::ALL {
            let n = incidents
                .iter()
                .filter(|f| f.status.phase == p && !f.is_release_record())
                .count();
            self.metrics
                .incidents
                .get_or_create(&metrics::PhaseLabel { phase: p.as_str() })
                .set(n as i64);
        }
        let open = |f: &&NodeFence| !f.status.phase.is_final() && !f.is_release_record();
        for f in incidents.iter().filter(open) {
            self.clone().ensure_driver(&f.metadata.name);
        }
        let open_for = |node: &str| incidents.iter().filter(open).any(|f| f.spec.node == node);
        // Who is partitioned now, by our own clock of each Lease's changes.
        let at = Instant::now();
        let mut unhealthy = Vec::new();
        {
            let mut clock = lock(&self.clock);
            let names: Vec<String> = nodes
                .iter()
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            clock.forget_except(&names);
            for n in &nodes {
                let name = n.metadata.name.clone().unwrap_or_default();
                let silent = leases
                    .get(&name)
                    .map(|renew| clock.observe(&name, renew.clone(), at));
                let h = observe::health(n, silent);
                // A node already out of service (fenced, or confirmed down by a person) is
                // handled: it does not make the next partition look like a storm.
                if h.unhealthy(self.cfg.limits.partition_after) && !tainted(n) {
                    unhealthy.push((n.clone(), h));
                }
            }
        }
        self.metrics.scope_held.set(
            incidents
                .iter()
                .filter(|f| f.status.phase == Phase::Fenced && !f.status.uncovered.is_empty())
                .count() as i64,
        );
        let storm = rules::storm(unhealthy.len(), nodes.len(), self.cfg.limits.max_unhealthy);
        self.metrics.unhealthy_nodes.set(unhealthy.len() as i64);
        self.metrics.storm.set(i64::from(storm));
        // A person's out-of-service taint on a confirmed node becomes a manual incident.
        for n in &nodes {
            let name = n.metadata.name.clone().unwrap_or_default();
            if tainted(n) && confirmed(n) && !open_for(&name) {
                let lease = observe::lease(self.client(), &name).await?;
                self.clone().record_manual(n, lease).await?;
            }
        }
        let mut active = incidents
            .iter()
            .filter(|f| matches!(f.status.phase, Phase::Detected | Phase::Fencing))
            .filter(|f| !f.is_release_record())
            .count();
        for (n, h) in unhealthy {
            let name = n.metadata.name.clone().unwrap_or_default();
            if open_for(&name) {
                continue;
            }
            if let Some(f) = incidents
                .iter()
                .filter(|f| f.spec.node == name && f.status.phase == Phase::Failed)
                .max_by_key(|f| f.metadata.creation_timestamp)
            {
                self.hold(&name, format!(
                    "incident {} failed ({}); delete it (kubectl delete nodefence {}) to let volguard try again",
                    f.metadata.name,
                    f.status.message.as_deref().unwrap_or("see its evidence"),
                    f.metadata.name
                )).await;
                continue;
            }
            let affected = observe::affected(self.client(), &name).await?;
            let decision = rules::open(
                &h,
                affected.pods.len(),
                rules::forgiveness(affected.tolerations.iter().copied()),
                storm,
                active,
                &self.cfg.limits,
                jiff::Timestamp::now(),
            );
            match decision {
                Open::Hold(reason) => {
                    if affected.pods.is_empty() {
                        // Not volguard's business (no opted-in claim): upstream's behaviour.
                        continue;
                    }
                    self.hold(&name, reason).await;
                }
                Open::Yes => {
                    // The caches said so; an incident begins only on what the apiserver says now,
                    // and records the Lease as read live (what the proof compares against).
                    let live = Api::<Node>::all(self.client().clone())
                        .get_opt(&name)
                        .await?;
                    let lease = observe::lease(self.client(), &name).await?;
                    let still = live
                        .as_ref()
                        .is_some_and(|l| observe::ready(l).0 != Some(true))
                        && lease == leases.get(&name).cloned().flatten();
                    if !still {
                        continue;
                    }
                    lock(&self.held).remove(&name);
                    let spec = NodeFenceSpec {
                        node: name.clone(),
                        backends: affected.backends(&self.cfg.chain),
                        addresses: observe::addresses(&n),
                        release: None,
                    };
                    let mut status = NodeFenceStatus {
                        lease_renew_time: lease,
                        boot_id: live.as_ref().and_then(observe::boot_id),
                        ..Default::default()
                    };
                    let pods: Vec<&String> = affected.pods.keys().collect();
                    status.evidence.push(crate::model::fence::Evidence {
                        time: now(),
                        step: "detected".into(),
                        message: format!(
                            "Lease silent for {}s (renewTime {}), node not Ready; pods holding opted-in RWO claims: {pods:?}",
                            h.lease_silent_for.map(|d| d.as_secs()).unwrap_or_default(),
                            status.lease_renew_time.as_deref().unwrap_or("never")
                        ),
                    });
                    status.message = Some("partition detected".into());
                    let f = self.records.create(spec, status).await?;
                    tracing::warn!(node = %name, incident = %f.metadata.name, "fencing: partition detected");
                    self.records
                        .announce(&f, true, "PartitionDetected", format!(
                            "node {name} stopped renewing its Lease and is not Ready; incident {} will fence it before its volumes move",
                            f.metadata.name
                        ))
                        .await;
                    active += 1;
                    self.clone().ensure_driver(&f.metadata.name);
                }
            }
        }
        Ok(())
    }

    /// Log and announce why a node is not fenced, once per reason.
    async fn hold(&self, node: &str, reason: String) {
        let changed =
            lock(&self.held).insert(node.to_string(), reason.clone()) != Some(reason.clone());
        if changed {
            tracing::warn!(node, %reason, "fencing: partitioned node not fenced");
            self.records
                .event(
                    &node_ref(node),
                    true,
                    "FencingHeld",
                    format!("node {node} is partitioned but not fenced: {reason}"),
                )
                .await;
        }
    }

    async fn record_manual(
        self: Arc<Self>,
        n: &Node,
        lease: Option<String>,
    ) -> Result<(), kube::Error> {
        let name = n.metadata.name.clone().unwrap_or_default();
        let spec = NodeFenceSpec {
            node: name.clone(),
            backends: vec![BackendKind::Manual],
            addresses: observe::addresses(n),
            release: None,
        };
        let mut status = NodeFenceStatus {
            phase: Phase::Released,
            backend: Some(BackendKind::Manual),
            lease_renew_time: lease,
            boot_id: observe::boot_id(n),
            released_volumes: observe::volumes(n),
            released_at: Some(now()),
            // The username volguard's webhook stamped beside the confirmation (rules.md §8).
            confirmed_by: Some(
                n.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(crate::model::fence::CONFIRMED_BY))
                    .map_or_else(
                        || format!("node annotation {CONFIRM_NODE_DOWN} (setter not stamped)"),
                        |who| who.clone(),
                    ),
            ),
            message: Some(
                "a person confirmed the node down and added the out-of-service taint".into(),
            ),
            ..Default::default()
        };
        status.evidence.push(crate::model::fence::Evidence {
            time: now(),
            step: "released".into(),
            message: format!("{OUT_OF_SERVICE_TAINT} added by a person with {CONFIRM_NODE_DOWN}=true (allowed by volguard's webhook)"),
        });
        let f = self.records.create(spec, status).await?;
        self.records
            .announce(&f, false, "ManualFenceRecorded", format!(
                "node {name} was taken out of service by a person who confirmed it down; incident {} removes the taint when the node returns",
                f.metadata.name
            ))
            .await;
        self.ensure_driver(&f.metadata.name);
        Ok(())
    }

    fn ensure_driver(self: Arc<Self>, name: &str) {
        let mut drivers = lock(&self.drivers);
        drivers.retain(|_, d| !d.is_finished());
        if drivers.contains_key(name) {
            return;
        }
        let me = self.clone();
        let n = name.to_string();
        drivers.insert(
            name.to_string(),
            tokio::spawn(async move {
                use tracing::Instrument;
                loop {
                    let span = tracing::info_span!("incident", incident = %n);
                    match me.advance(&n).instrument(span).await {
                        Ok(true) => return,
                        Ok(false) => {}
                        Err(e) => tracing::warn!(incident = %n, error = %e, "fencing: step failed; retrying"),
                    }
                    tokio::time::sleep(me.cfg.interval).await;
                }
            }),
        );
    }

    /// One step of one incident; `Ok(true)` once it is final. What to do is
    /// `rules::fencing::step`'s; this reads what it needs, asks a backend when told to, and
    /// writes the transition (`apply`).
    async fn advance(&self, name: &str) -> Result<bool, kube::Error> {
        let Some(mut f) = self.records.get(name).await? else {
            return Ok(true);
        };
        if f.status.phase.is_final() || f.is_release_record() {
            return Ok(true);
        }
        let backends = self.backends_of(&f);
        let seen = self.read(&f, true).await?;
        let next = rules::step(&record_of(&f, &backends), &seen.now());
        let next = match next {
            Do::AskFence => {
                let answer = self.ask_fence(&f).await;
                // The proof is read after the answer: a fence that did not hold shows there.
                let after = self.read(&f, false).await?;
                rules::after_fence(&record_of(&f, &backends), &after.now(), answer)
            }
            Do::AskUnfence => {
                let kind = self.current(&f);
                let answer = self
                    .cfg
                    .backends
                    .unfence(
                        self.client(),
                        kind,
                        &f,
                        self.cfg.backends.timeout(kind).max(Duration::from_secs(5)),
                    )
                    .await;
                if matches!(answer, Answer::Failed(_)) {
                    self.backend_failed(kind);
                }
                rules::after_unfence(&record_of(&f, &backends), answer)
            }
            other => other,
        };
        if let Do::Write(t) = next {
            self.apply(&mut f, t, seen.node.as_ref()).await?;
        }
        Ok(f.status.phase.is_final())
    }

    /// The backends of an incident, each with its timeout (what `rules::fencing::request` names).
    fn backends_of(&self, f: &NodeFence) -> Vec<(BackendKind, u64)> {
        f.spec
            .backends
            .iter()
            .map(|k| (*k, self.cfg.backends.timeout(*k).as_secs()))
            .collect()
    }

    /// The node, its Lease and, while `Fenced` (`with_storage`), what its pods use that the
    /// current backend's fence does not cover: live reads, never a cache.
    async fn read(&self, f: &NodeFence, with_storage: bool) -> Result<Seen, kube::Error> {
        let node = Api::<Node>::all(self.client().clone())
            .get_opt(&f.spec.node)
            .await?;
        let lease = observe::lease(self.client(), &f.spec.node).await?;
        let scope = self.cfg.backends.scope(self.current(f));
        let missing = if with_storage && f.status.phase == Phase::Fenced {
            let used = observe::storage_on(self.client(), &f.spec.node).await?;
            Some(rules::uncovered(&scope, &used))
        } else {
            None
        };
        Ok(Seen {
            ready: node.as_ref().and_then(|n| observe::ready(n).0),
            boot_id: node.as_ref().and_then(observe::boot_id),
            volumes: node.as_ref().map(observe::volumes).unwrap_or_default(),
            node,
            lease,
            scope,
            missing,
        })
    }

    /// Ask the current backend to fence, within what is left of its timeout. A controller that
    /// took over after the timeout ran out (the old leader died mid-call) asks once more before
    /// giving up: the backend may have fenced meanwhile.
    async fn ask_fence(&self, f: &NodeFence) -> Answer {
        let kind = self.current(f);
        let timeout = self.cfg.backends.timeout(kind);
        let elapsed = seconds_since(f.status.fence_requested_at.as_deref()).unwrap_or(0.0);
        let remaining = timeout.as_secs_f64() - elapsed;
        let first_ask = lock(&self.asked).insert((f.metadata.name.clone(), f.status.backend_index));
        if !self.cfg.backends.configured(kind) {
            Answer::Failed(format!("backend {} is not configured", kind.as_str()))
        } else if remaining <= 0.0 && !first_ask {
            Answer::Failed(format!("no answer within {}s", timeout.as_secs()))
        } else {
            let budget = Duration::from_secs_f64(remaining.max(LAST_ASK.as_secs_f64()));
            self.cfg
                .backends
                .fence(self.client(), kind, f, budget)
                .await
        }
    }

    /// Write a transition: the status fields its effects stamp, the effects that act on the
    /// cluster in the order the record promises (the taint before `Released` is written, so a
    /// restart finds `Fenced` and re-checks the proof), then the record and its Events.
    async fn apply(
        &self,
        f: &mut NodeFence,
        t: Transition,
        node: Option<&Node>,
    ) -> Result<(), kube::Error> {
        let e = &t.effects;
        if e.unfence_best_effort {
            // Whatever the backend did so far is undone (best effort: nothing was released).
            let kind = self.current(f);
            let _ = self
                .cfg
                .backends
                .unfence(self.client(), kind, f, Duration::from_secs(10))
                .await;
        }
        if e.backend_failed {
            self.backend_failed(self.current(f));
        }
        if let Some(i) = e.request
            && let Some(kind) = f.spec.backends.get(i).copied()
        {
            f.status.backend_index = i;
            f.status.backend = Some(kind);
            f.status.fence_requested_at = Some(now());
        }
        if e.fenced {
            f.status.fenced_at = Some(now());
            if self.current(f) == BackendKind::Manual {
                f.status.confirmed_by = f
                    .metadata
                    .annotation(crate::model::fence::CONFIRMED_BY)
                    .map(str::to_string);
            }
            if let Some(s) = seconds_since_ts(f.metadata.creation_timestamp) {
                self.metrics.time_to_fence.observe(s);
            }
        }
        if let Some(u) = &e.uncovered {
            if !u.is_empty() {
                tracing::warn!(node = %f.spec.node, why = %t.message, "fencing: fence does not cover the node's volumes");
            }
            f.status.uncovered = u.clone();
        }
        let affected = if e.announce_affected {
            observe::affected(self.client(), &f.spec.node)
                .await
                .unwrap_or_default()
        } else {
            observe::Affected::default()
        };
        if e.taint {
            // What the kubelet last reported mounted and attached: recovery waits until they are
            // gone, or the machine rebooted (rules.md §7 "Recover").
            if let Some(n) = node {
                f.status.released_volumes = observe::volumes(n);
            }
            self.records.taint(f).await?;
            f.status.released_at = Some(now());
        }
        if e.unfence_requested {
            f.status.unfence_requested_at = Some(now());
        }
        if e.untaint {
            self.records.untaint(&f.spec.node).await?;
            if let Some(s) = seconds_since(f.status.unfence_requested_at.as_deref()) {
                self.metrics.time_to_recover.observe(s);
            }
        }
        self.records.step(f, t.phase, t.step, t.message).await?;
        if let Some(a) = t.announce {
            self.records.announce(f, a.warning, a.reason, a.note).await;
        }
        if e.announce_affected {
            self.announce_affected(f, &affected).await;
        }
        Ok(())
    }

    fn backend_failed(&self, kind: BackendKind) {
        self.metrics
            .backend_failures
            .get_or_create(&metrics::BackendLabel {
                backend: kind.as_str(),
            })
            .inc();
    }

    /// The backend the incident is at.
    fn current(&self, f: &NodeFence) -> BackendKind {
        f.spec
            .backends
            .get(f.status.backend_index)
            .copied()
            .unwrap_or(BackendKind::Manual)
    }

    async fn announce_affected(&self, f: &NodeFence, affected: &observe::Affected) {
        for (pod, claims) in &affected.pods {
            let (ns, name) = pod.split_once('/').unwrap_or(("", pod));
            let note = format!(
                "node {} was fenced (incident {}): its out-of-service taint lets PodGC remove this pod and its volumes detach",
                f.spec.node, f.metadata.name
            );
            let on = ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: Some(ns.into()),
                name: Some(name.into()),
                ..Default::default()
            };
            self.records.event(&on, true, "NodeFenced", note).await;
            for c in claims {
                let (cns, cname) = c.split_once('/').unwrap_or(("", c));
                let on = ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("PersistentVolumeClaim".into()),
                    namespace: Some(cns.into()),
                    name: Some(cname.into()),
                    ..Default::default()
                };
                let note = format!(
                    "released from fenced node {} (incident {}): pod {name} is replaced elsewhere",
                    f.spec.node, f.metadata.name
                );
                self.records.event(&on, true, "VolumeReleased", note).await;
            }
        }
    }
}

/// What `read` saw of an incident's node.
struct Seen {
    node: Option<Node>,
    ready: Option<bool>,
    lease: Option<String>,
    boot_id: Option<String>,
    volumes: Vec<String>,
    scope: rules::Scope,
    missing: Option<Vec<rules::Storage>>,
}

impl Seen {
    fn now(&self) -> Now<'_> {
        Now {
            node: self.node.is_some(),
            ready: self.ready,
            lease: self.lease.as_deref(),
            boot_id: self.boot_id.as_deref(),
            volumes: &self.volumes,
            scope: self.missing.as_deref().map(|m| (&self.scope, m)),
        }
    }
}

/// The incident as `rules::fencing::step` reads it.
fn record_of<'a>(f: &'a NodeFence, backends: &'a [(BackendKind, u64)]) -> Record<'a> {
    Record {
        node: &f.spec.node,
        phase: f.status.phase,
        lease_at_detection: f.status.lease_renew_time.as_deref(),
        boot_id_at_detection: f.status.boot_id.as_deref(),
        released_volumes: &f.status.released_volumes,
        message: f.status.message.as_deref(),
        backend_index: f.status.backend_index,
        backends,
    }
}

fn tainted(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT))
}

fn confirmed(n: &Node) -> bool {
    n.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIRM_NODE_DOWN))
        .is_some_and(|v| v == "true")
}
