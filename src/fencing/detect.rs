//! Detection (rules.md §7): every `--fencing-interval`, who is partitioned by this process's
//! own clock of each Lease, whether it is a storm, and whether to open an incident (the
//! decisions are `rules::fencing::open`'s); a person's taint on a confirmed node becomes a
//! manual incident.

use super::*;

impl Fencer {
    pub(super) async fn tick(self: Arc<Self>) -> Result<(), Error> {
        // Detection reads the view's watches of Nodes and Leases (no apiserver read per tick at a
        // thousand nodes); every step that acts reads live. Until they synced, an absent Lease
        // would look like a silent one: wait.
        if !self.view().synced() {
            return Ok(());
        }
        let nodes = self.view().sweep::<crate::model::Node>(None);
        let incidents = self.records.list().await?;
        self.gauge_incidents(&incidents);
        let open = |f: &&NodeFence| !f.status.phase.is_final() && !f.is_release_record();
        for f in incidents.iter().filter(open) {
            self.clone().ensure_driver(&f.metadata.name);
        }
        let open_for = |node: &str| incidents.iter().filter(open).any(|f| f.spec.node == node);
        let unhealthy = self.partitioned(&nodes);
        let storm = rules::storm(unhealthy.len(), nodes.len(), self.cfg.limits.max_unhealthy);
        self.metrics.unhealthy_nodes.set(unhealthy.len() as i64);
        self.metrics.storm.set(i64::from(storm));
        // A person's out-of-service taint on a confirmed node becomes a manual incident.
        for n in &nodes {
            let name = &n.metadata.name;
            if tainted(n) && confirmed(n) && !open_for(name) {
                self.clone().record_manual(name).await?;
            }
        }
        let mut active = incidents
            .iter()
            .filter(|f| matches!(f.status.phase, Phase::Detected | Phase::Fencing))
            .filter(|f| !f.is_release_record())
            .count();
        for (n, h) in unhealthy {
            let name = n.metadata.name.clone();
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
            let affected = observe::affected(self.view(), &name).await?;
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
                // Not volguard's business (no opted-in claim): upstream's behaviour.
                Open::Hold(_) if affected.pods.is_empty() => {}
                Open::Hold(reason) => self.hold(&name, reason).await,
                Open::Yes => {
                    if self.clone().open_incident(&name, &h, &affected).await? {
                        active += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// The incidents by phase, those awaiting a person, and those whose scope is held.
    fn gauge_incidents(&self, incidents: &[NodeFence]) {
        let current = |f: &&NodeFence| !f.is_release_record();
        for p in Phase::ALL {
            let n = incidents
                .iter()
                .filter(current)
                .filter(|f| f.status.phase == p)
                .count();
            self.metrics
                .incidents
                .get_or_create(&metrics::PhaseLabel { phase: p.as_str() })
                .set(n as i64);
        }
        self.metrics.awaiting_person.set(
            incidents
                .iter()
                .filter(current)
                .filter(|f| f.status.phase == Phase::Fencing)
                .filter(|f| self.current(f) == BackendKind::Manual)
                .count() as i64,
        );
        self.metrics.scope_held.set(
            incidents
                .iter()
                .filter(|f| f.status.phase == Phase::Fenced && !f.status.uncovered.is_empty())
                .count() as i64,
        );
    }

    /// The Lease's renewTime as the view's watch last saw it.
    fn renewed(&self, name: &str) -> Option<Option<String>> {
        self.view()
            .held::<crate::model::Lease>(observe::LEASE_NAMESPACE, name)
            .map(|l| l.spec.renew_time.clone())
    }

    /// Who is partitioned now, by our own clock of each Lease's changes. A node already out of
    /// service (fenced, or confirmed down by a person) is handled: it does not make the next
    /// partition look like a storm.
    fn partitioned(&self, nodes: &[Arc<Node>]) -> Vec<(Arc<Node>, rules::NodeHealth)> {
        let names: Vec<String> = nodes.iter().map(|n| n.metadata.name.clone()).collect();
        self.clock.retain(|n| names.contains(n));
        let mut unhealthy = Vec::new();
        for n in nodes {
            let name = &n.metadata.name;
            let silent = self
                .renewed(name)
                .map(|renew| self.clock.observe(name.clone(), renew, Duration::ZERO).held);
            let h = observe::health(n, silent);
            if h.unhealthy(self.cfg.limits.partition_after) && !tainted(n) {
                unhealthy.push((n.clone(), h));
            }
        }
        unhealthy
    }

    /// Open an incident for `name`, which the caches say is partitioned, only on what the
    /// apiserver says now; it records the Lease as read live (what the proof compares against).
    /// False when the live read disagrees.
    async fn open_incident(
        self: Arc<Self>,
        name: &str,
        h: &rules::NodeHealth,
        affected: &observe::Affected,
    ) -> Result<bool, Error> {
        let live = observe::node(self.view(), name).await?;
        let lease = observe::lease(self.view(), name).await?;
        let still = live.as_ref().is_some_and(|l| l.ready() != Some(true))
            && lease == self.renewed(name).flatten();
        if !still {
            return Ok(false);
        }
        lock(&self.held).remove(name);
        let spec = NodeFenceSpec {
            node: name.to_string(),
            backends: affected.backends(&self.cfg.chain),
            addresses: live.as_ref().map(|l| l.addresses()).unwrap_or_default(),
            release: None,
        };
        let mut status = NodeFenceStatus {
            lease_renew_time: lease,
            boot_id: live.as_ref().and_then(|l| l.boot_id()).map(str::to_string),
            ..Default::default()
        };
        status.evidence.push(crate::model::fence::Evidence {
            time: now(),
            step: "detected".into(),
            message: detected_evidence(&status, h, affected),
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
        self.ensure_driver(&f.metadata.name);
        Ok(true)
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

    /// The node is read whole and live: its volume lists are what recovery waits on.
    async fn record_manual(self: Arc<Self>, name: &str) -> Result<(), Error> {
        // What the watch showed, confirmed on the stored Node.
        let Some(n) = observe::node(self.view(), name).await? else {
            return Ok(());
        };
        if !(tainted(&n) && confirmed(&n)) {
            return Ok(());
        }
        let lease = observe::lease(self.view(), name).await?;
        let name = name.to_string();
        let spec = NodeFenceSpec {
            node: name.clone(),
            backends: vec![BackendKind::Manual],
            addresses: n.addresses(),
            release: None,
        };
        let mut status = NodeFenceStatus {
            phase: Phase::Released,
            backend: Some(BackendKind::Manual),
            lease_renew_time: lease,
            boot_id: n.boot_id().map(str::to_string),
            released_volumes: n.volumes(),
            released_at: Some(now()),
            // The username volguard's webhook stamped beside the confirmation (rules.md §8).
            confirmed_by: Some(match confirmation(&n) {
                Read::Valid(p) => p.by().to_string(),
                Read::Ignored(why) => format!("node annotation {CONFIRM_NODE_DOWN}: {why}"),
                Read::Absent => format!("node annotation {CONFIRM_NODE_DOWN} (absent)"),
            }),
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
}

/// What was observed and since when: the renewTime's age by the wall clock, and how long this
/// controller itself has watched it unchanged (which restarts with the controller, so it can be
/// shorter).
fn detected_evidence(
    status: &NodeFenceStatus,
    h: &rules::NodeHealth,
    affected: &observe::Affected,
) -> String {
    let pods: Vec<&String> = affected.pods.keys().collect();
    let renewed = status.lease_renew_time.as_deref();
    let age = renewed
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| {
            format!(
                " ({}s ago by this controller's clock)",
                jiff::Timestamp::now().duration_since(t).as_secs()
            )
        })
        .unwrap_or_default();
    format!(
        "Lease renewTime {}{age}; seen unchanged by this controller for {}s; node not Ready; \
         pods holding opted-in RWO claims: {pods:?}",
        renewed.unwrap_or("never"),
        h.lease_silent_for.map(|d| d.as_secs()).unwrap_or_default(),
    )
}
