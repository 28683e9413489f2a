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
use crate::rules::fencing::{self as rules, Limits, Open};
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

    /// One step of one incident; `Ok(true)` once it is final.
    async fn advance(&self, name: &str) -> Result<bool, kube::Error> {
        let Some(mut f) = self.records.get(name).await? else {
            return Ok(true);
        };
        if f.status.phase.is_final() || f.is_release_record() {
            return Ok(true);
        }
        let node = Api::<Node>::all(self.client().clone())
            .get_opt(&f.spec.node)
            .await?;
        let lease = observe::lease(self.client(), &f.spec.node).await?;
        let ready = node.as_ref().and_then(|n| observe::ready(n).0);
        let seen = f.status.lease_renew_time.clone();
        let healed = rules::healed(lease.as_deref(), seen.as_deref(), ready);
        match f.status.phase {
            Phase::Detected | Phase::Fencing if healed => {
                if f.status.phase == Phase::Fencing {
                    // Whatever the backend did so far is undone (best effort: nothing was released).
                    let kind = self.current(&f);
                    let _ = self
                        .cfg
                        .backends
                        .unfence(self.client(), kind, &f, Duration::from_secs(10))
                        .await;
                }
                let msg = format!(
                    "node {} renewed its Lease and is Ready again before any release",
                    f.spec.node
                );
                self.records
                    .record(
                        &mut f,
                        Phase::Aborted,
                        "aborted",
                        false,
                        "FenceAborted",
                        msg,
                    )
                    .await?;
            }
            Phase::Detected | Phase::Fencing if node.is_none() => {
                let msg = "the Node was deleted: PodGC releases its pods (rules.md §2d row 4)"
                    .to_string();
                self.records
                    .step(&mut f, Phase::Done, "node-deleted", msg)
                    .await?;
            }
            Phase::Detected => self.request(&mut f, 0, None).await?,
            Phase::Fencing => self.fence(&mut f).await?,
            Phase::Fenced => {
                // Re-checked right before the taint (rules.md §7), also for an incident found
                // `Fenced` after a restart: the Lease still silent since detection, not Ready.
                if let Err(reason) = rules::proof(lease.as_deref(), seen.as_deref(), ready) {
                    let kind = self.current(&f);
                    self.backend_failed(kind);
                    let msg =
                        format!("{reason} (re-checked before the taint); nothing was released");
                    self.records
                        .record(
                            &mut f,
                            Phase::Failed,
                            "proof-failed",
                            true,
                            "FenceFailed",
                            msg,
                        )
                        .await?;
                    return Ok(true);
                }
                // The taint releases every volume on the node: only when the fence covers them
                // all (rules.md §7 "A fence has a scope"); otherwise the incident holds, saying why.
                let scope = self.cfg.backends.scope(self.current(&f));
                let used = observe::storage_on(self.client(), &f.spec.node).await?;
                let missing = rules::uncovered(&scope, &used);
                if !missing.is_empty() {
                    let why = rules::scope_message(&f.spec.node, &scope, &missing);
                    if f.status.message.as_deref() != Some(why.as_str()) {
                        tracing::warn!(node = %f.spec.node, %why, "fencing: fence does not cover the node's volumes");
                        self.records
                            .announce(&f, true, "FenceScopeIncomplete", why.clone())
                            .await;
                    }
                    f.status.uncovered = missing.iter().map(ToString::to_string).collect();
                    self.note(&mut f, why).await?;
                    return Ok(false);
                }
                f.status.uncovered.clear();
                let affected = observe::affected(self.client(), &f.spec.node)
                    .await
                    .unwrap_or_default();
                // What the kubelet last reported mounted and attached: recovery waits until they
                // are gone, or the machine rebooted (rules.md §7 "Recover").
                if let Some(n) = &node {
                    f.status.released_volumes = observe::volumes(n);
                }
                self.records.taint(&f).await?;
                f.status.released_at = Some(now());
                let msg = format!(
                    "{OUT_OF_SERVICE_TAINT} added to node {}: PodGC removes its pods and their volumes are detached",
                    f.spec.node
                );
                self.records
                    .record(
                        &mut f,
                        Phase::Released,
                        "released",
                        true,
                        "NodeReleased",
                        msg,
                    )
                    .await?;
                self.announce_affected(&f, &affected).await;
            }
            Phase::Released if node.is_none() => {
                self.records
                    .step(&mut f, Phase::Done, "node-deleted", "the Node was deleted")
                    .await?;
            }
            Phase::Released if healed => {
                f.status.unfence_requested_at = Some(now());
                let msg = format!(
                    "node {} is back (Lease renewed, Ready): the taint stays until its fence is undone",
                    f.spec.node
                );
                self.records
                    .record(
                        &mut f,
                        Phase::Recovering,
                        "recovering",
                        true,
                        "NodeReturned",
                        msg,
                    )
                    .await?;
            }
            Phase::Released => {}
            Phase::Recovering => {
                // The released pods' processes may still run, or flush buffered writes, when
                // storage returns: unfence only after a reboot or once the kubelet reports none
                // of the released volumes (rules.md §7 "Recover", rook#17790).
                let (boot_now, volumes_now) = match &node {
                    Some(n) => (observe::boot_id(n), observe::volumes(n)),
                    None => (None, Vec::new()),
                };
                if let Err(why) = rules::rebooted_or_released(
                    boot_now.as_deref(),
                    f.status.boot_id.as_deref(),
                    &volumes_now,
                    &f.status.released_volumes,
                ) {
                    if f.status.message.as_deref() != Some(why.as_str()) {
                        self.records
                            .announce(&f, true, "RecoveryHeld", why.clone())
                            .await;
                    }
                    self.note(&mut f, why).await?;
                    return Ok(false);
                }
                let kind = self.current(&f);
                match self
                    .cfg
                    .backends
                    .unfence(
                        self.client(),
                        kind,
                        &f,
                        self.cfg.backends.timeout(kind).max(Duration::from_secs(5)),
                    )
                    .await
                {
                    Answer::Done(ev) => {
                        self.records.untaint(&f.spec.node).await?;
                        if let Some(s) = seconds_since(f.status.unfence_requested_at.as_deref()) {
                            self.metrics.time_to_recover.observe(s);
                        }
                        let msg = format!(
                            "{ev}; {OUT_OF_SERVICE_TAINT} removed from node {}",
                            f.spec.node
                        );
                        self.records
                            .record(
                                &mut f,
                                Phase::Done,
                                "recovered",
                                false,
                                "NodeRecovered",
                                msg,
                            )
                            .await?;
                    }
                    Answer::Pending(msg) => self.note(&mut f, msg).await?,
                    Answer::Failed(msg) => {
                        self.backend_failed(kind);
                        // The taint stays: a node whose fence cannot be undone does not take pods.
                        self.note(&mut f, format!("unfence failed, will retry: {msg}"))
                            .await?;
                    }
                }
            }
            Phase::Done | Phase::Failed | Phase::Aborted => return Ok(true),
        }
        Ok(f.status.phase.is_final())
    }

    fn backend_failed(&self, kind: BackendKind) {
        self.metrics
            .backend_failures
            .get_or_create(&metrics::BackendLabel {
                backend: kind.as_str(),
            })
            .inc();
    }

    fn current(&self, f: &NodeFence) -> BackendKind {
        f.spec
            .backends
            .get(f.status.backend_index)
            .copied()
            .unwrap_or(BackendKind::Manual)
    }

    /// Record "fence requested from backend `index`" before anything is asked of it.
    async fn request(
        &self,
        f: &mut NodeFence,
        index: usize,
        why: Option<String>,
    ) -> Result<(), kube::Error> {
        let Some(kind) = f.spec.backends.get(index).copied() else {
            let msg = format!(
                "no fence backend left{}",
                why.map(|w| format!(": {w}")).unwrap_or_default()
            );
            self.records
                .step(f, Phase::Failed, "failed", msg.clone())
                .await?;
            self.records
                .announce(
                    f,
                    true,
                    "FenceFailed",
                    format!("{msg}; nothing was released"),
                )
                .await;
            return Ok(());
        };
        f.status.backend_index = index;
        f.status.backend = Some(kind);
        f.status.fence_requested_at = Some(now());
        let msg = format!(
            "fence requested from backend {} (timeout {}s){}",
            kind.as_str(),
            self.cfg.backends.timeout(kind).as_secs(),
            why.map(|w| format!(" after: {w}")).unwrap_or_default()
        );
        self.records
            .record(
                f,
                Phase::Fencing,
                "fence-requested",
                true,
                "FenceRequested",
                msg,
            )
            .await?;
        Ok(())
    }

    async fn fence(&self, f: &mut NodeFence) -> Result<(), kube::Error> {
        let kind = self.current(f);
        let timeout = self.cfg.backends.timeout(kind);
        let elapsed = seconds_since(f.status.fence_requested_at.as_deref()).unwrap_or(0.0);
        let remaining = timeout.as_secs_f64() - elapsed;
        // A controller that took over after the timeout ran out (the old leader died mid-call)
        // asks once more before giving up: the backend may have fenced meanwhile.
        let first_ask = lock(&self.asked).insert((f.metadata.name.clone(), f.status.backend_index));
        let answer = if !self.cfg.backends.configured(kind) {
            Answer::Failed(format!("backend {} is not configured", kind.as_str()))
        } else if remaining <= 0.0 && !first_ask {
            Answer::Failed(format!("no answer within {}s", timeout.as_secs()))
        } else {
            let budget = Duration::from_secs_f64(remaining.max(LAST_ASK.as_secs_f64()));
            self.cfg
                .backends
                .fence(self.client(), kind, f, budget)
                .await
        };
        match answer {
            Answer::Done(ev) => {
                // The proof is read after the answer: a fence that did not hold shows here.
                let lease = observe::lease(self.client(), &f.spec.node).await?;
                let node = Api::<Node>::all(self.client().clone())
                    .get_opt(&f.spec.node)
                    .await?;
                let ready = node.as_ref().and_then(|n| observe::ready(n).0);
                match rules::proof(
                    lease.as_deref(),
                    f.status.lease_renew_time.as_deref(),
                    ready,
                ) {
                    Ok(()) => {
                        f.status.fenced_at = Some(now());
                        if kind == BackendKind::Manual {
                            f.status.confirmed_by = f
                                .metadata
                                .annotation(crate::model::fence::CONFIRMED_BY)
                                .map(str::to_string);
                        }
                        if let Some(s) = seconds_since_ts(f.metadata.creation_timestamp) {
                            self.metrics.time_to_fence.observe(s);
                        }
                        let msg = format!(
                            "{ev}; proof: the Lease is still at renewTime {} and the node is not Ready",
                            f.status.lease_renew_time.as_deref().unwrap_or("never")
                        );
                        self.records
                            .record(f, Phase::Fenced, "fenced", false, "NodeFenced", msg)
                            .await?;
                    }
                    Err(reason) => {
                        self.backend_failed(kind);
                        self.records
                            .step(f, Phase::Failed, "proof-failed", reason.clone())
                            .await?;
                        self.records
                            .announce(
                                f,
                                true,
                                "FenceFailed",
                                format!("{reason}; nothing was released"),
                            )
                            .await;
                    }
                }
            }
            Answer::Pending(msg) => self.note(f, msg).await?,
            Answer::Failed(msg) => {
                self.backend_failed(kind);
                let why = format!("backend {} failed: {msg}", kind.as_str());
                match rules::next_backend(f.status.backend_index, f.spec.backends.len()) {
                    Some(next) => self.request(f, next, Some(why)).await?,
                    None => self.request(f, f.spec.backends.len(), Some(why)).await?,
                }
            }
        }
        Ok(())
    }

    /// A backend's progress note: written only when it changed (no write per tick).
    async fn note(&self, f: &mut NodeFence, msg: String) -> Result<(), kube::Error> {
        if f.status.message.as_deref() == Some(msg.as_str()) {
            return Ok(());
        }
        let phase = f.status.phase;
        self.records.step(f, phase, "progress", msg).await
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
