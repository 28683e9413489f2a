//! The driver (rules.md §7): one task per open incident takes a step every
//! `--fencing-interval` — reads the node, its Lease and the storage its pods use (live), asks
//! `rules::fencing::step` what to do, calls a backend when told to, and writes the transition.

use super::*;

/// What one step did to an incident.
enum Progress {
    /// Done, failed or aborted: its driver ends.
    Final,
    /// A transition was written: the next step may follow at once.
    Moved,
    /// Nothing to do until the world changes.
    Waiting,
}

/// Steps taken back to back before the driver pauses for `--fencing-interval` anyway.
const MOVES_WITHOUT_PAUSE: usize = 4;

impl Fencer {
    pub(super) fn ensure_driver(self: Arc<Self>, name: &str) {
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
                // A step that moved the incident is followed by the next at once (the fence
                // proven is released in the same breath, not a tick later), a few in a row at most.
                let mut moved_in_a_row = 0;
                loop {
                    let span = tracing::info_span!("incident", incident = %n);
                    match me.advance(&n).instrument(span).await {
                        Ok(Progress::Final) => return,
                        Ok(Progress::Moved) if moved_in_a_row < MOVES_WITHOUT_PAUSE => {
                            moved_in_a_row += 1;
                            continue;
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!(incident = %n, error = %e, "fencing: step failed; retrying"),
                    }
                    moved_in_a_row = 0;
                    tokio::time::sleep(me.cfg.interval).await;
                }
            }),
        );
    }

    /// One step of one incident. What to do is `rules::fencing::step`'s; this reads what it
    /// needs, asks a backend when told to, and writes the transition (`apply`).
    async fn advance(&self, name: &str) -> Result<Progress, Error> {
        let Some(mut f) = self.records.get(name).await? else {
            return Ok(Progress::Final);
        };
        if f.status.phase.is_final() || f.is_release_record() {
            return Ok(Progress::Final);
        }
        let backends = self.backends_of(&f);
        let seen = self.read(&f, true).await?;
        // rules.md §8: a person's confirmation for a Node already deleted (`fence confirm`) is an
        // input verified here, never a record anyone may write: the Node is gone (live read), its
        // Lease silent, the setter a person (the stamp, judged when written). Only then does the
        // controller write the release.
        if f.status.phase == Phase::Detected && seen.node.is_none() {
            let who = crate::rules::proof::fence_confirmed_by(&f).map(str::to_string);
            let silent = seen.lease.as_deref().is_none_or(|t| {
                t.parse::<jiff::Timestamp>().is_ok_and(|t| {
                    jiff::Timestamp::now().duration_since(t) > self.cfg.limits.partition_after
                })
            });
            if let (Some(who), true) = (who, silent) {
                f.status.confirmed_by = Some(who.clone());
                f.status.released_at = Some(now());
                let msg = format!(
                    "node {} is deleted and its Lease silent; {who} confirmed the machine down: its pods may be released",
                    f.spec.node
                );
                self.records
                    .step(&mut f, Phase::Released, "confirmed-gone", msg)
                    .await?;
                return Ok(Progress::Moved);
            }
        }
        if f.status.phase == Phase::Released
            && self.cfg.release_pods == crate::fencing::args::ReleasePods::Now
            && let Some(n) = seen.node.as_deref()
        {
            // PodGC deletes them at its next pass anyway: a failure here only costs time.
            if let Err(e) = self.release_pods(&f, n).await {
                tracing::warn!(incident = %f.metadata.name, error = %e, "fencing: could not delete the released node's terminating pods; PodGC will");
            }
        }
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
                        &self.records,
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
        let moved = matches!(next, Do::Write(_));
        if let Do::Write(t) = next {
            self.apply(&mut f, t, seen.node.as_deref()).await?;
        }
        Ok(if f.status.phase.is_final() {
            Progress::Final
        } else if moved {
            Progress::Moved
        } else {
            Progress::Waiting
        })
    }

    /// Delete the released node's pods that PodGC would delete at its next pass (the same
    /// predicate, `rules::upstream::podgc`, on a live read of the node and a consistent list of
    /// its pods): the proof is held, so the replacement need not wait for PodGC's period.
    async fn release_pods(&self, f: &NodeFence, node: &Node) -> Result<(), Error> {
        for p in observe::pods_podgc_deletes(self.view(), node).await? {
            self.records.delete_pod_now(&p).await?;
            self.metrics.pods_released.inc();
            tracing::info!(incident = %f.metadata.name, node = %f.spec.node, pod = %format!("{}/{}", p.metadata.namespace, p.metadata.name), "fencing: deleted a terminating pod of the released node, as PodGC would");
        }
        Ok(())
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
    async fn read(&self, f: &NodeFence, with_storage: bool) -> Result<Seen, Error> {
        let node = observe::node(self.view(), &f.spec.node).await?;
        let lease = observe::lease(self.view(), &f.spec.node).await?;
        let scope = self.cfg.backends.scope(self.current(f));
        let missing = if with_storage && f.status.phase == Phase::Fenced {
            let used = observe::storage_on(self.view(), &f.spec.node).await?;
            Some(rules::uncovered(&scope, &used))
        } else {
            None
        };
        Ok(Seen {
            ready: node.as_ref().and_then(|n| n.ready()),
            boot_id: node.as_ref().and_then(|n| n.boot_id()).map(str::to_string),
            volumes: node.as_ref().map(|n| n.volumes()).unwrap_or_default(),
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
                .fence(&self.records, kind, f, budget)
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
    ) -> Result<(), Error> {
        let e = &t.effects;
        if e.unfence_best_effort {
            // Whatever the backend did so far is undone (best effort: nothing was released).
            let kind = self.current(f);
            let _ = self
                .cfg
                .backends
                .unfence(&self.records, kind, f, Duration::from_secs(10))
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
                f.status.confirmed_by =
                    crate::rules::proof::fence_confirmed_by(f).map(str::to_string);
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
            observe::affected(self.view(), &f.spec.node)
                .await
                .unwrap_or_default()
        } else {
            observe::Affected::default()
        };
        if e.taint {
            // What the kubelet last reported mounted and attached: recovery waits until they are
            // gone, or the machine rebooted (rules.md §7 "Recover").
            if let Some(n) = node {
                f.status.released_volumes = n.volumes();
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
    pub(super) fn current(&self, f: &NodeFence) -> BackendKind {
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
    node: Option<Arc<Node>>,
    ready: Option<bool>,
    lease: Option<String>,
    boot_id: Option<String>,
    volumes: Vec<String>,
    scope: rules::Scope,
    missing: Option<Vec<rules::Storage>>,
}

impl Seen {
    pub(super) fn now(&self) -> Now<'_> {
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
