//! rules.md §2f: placing a pod takes the RWO lock on each of its ReadWriteOnce claims. The lock's
//! protocol, as one type around the pure `rules::rwo_lock`: the holders the caches know, the lock
//! as read, the compare-and-swap with its retries, its late answers, and its metrics; what holds
//! a lock on another node it reads as the controller does (`lock_hold::LockHolds`, with this
//! process's clock of each lock). It reads through the view and writes through the writer, and
//! knows nothing else of admission: a bind or a placed pod CREATE (`facts.rs`) hands it the pod
//! and the node.

use super::objects::deref;
use crate::lock_hold::LockClock;
use crate::lock_hold::LockHolds;
use crate::model::{Node, Pod, Pvc};
use crate::rules::rwo::{self, ClaimFacts};
use crate::rules::rwo_lock::{self, LockPod, LockStep, Named, RwoLock, Via};
use crate::rules::{Decision, Fact};
use crate::state::Readable;
use crate::state::query;
use crate::state::writer::Swap;
use crate::state::{Fresh, LockSwap, View, Writer};
use prometheus_client::metrics::{counter::Counter, family::Family, histogram::Histogram};
use std::sync::Arc;

/// The RWO lock's protocol over one view: every placement of a ReadWriteOnce claim passes
/// `place`.
pub struct RwoLocks {
    view: View,
    /// The lock's compare-and-swap (in memory for a `--state` file).
    writer: Writer,
    /// What holds a lock on another node, read as the controller reads it, with this process's
    /// own clock of how long each lock was seen (rules.md §2f).
    holds: LockHolds,
    /// The lock's outcomes (`volguard_rwo_locks_total`), registered by whoever serves.
    pub results: Family<LockLabels, Counter>,
    /// How long each compare-and-swap took (`volguard_rwo_lock_write_duration_seconds`): the one
    /// etcd write a bind waits for, apart from the decision around it.
    pub writes: Histogram,
}

/// `volguard_rwo_lock_write_duration_seconds`: an etcd write through the apiserver, with the
/// admission calls of that write (0.5 ms .. the swap's 1.5 s timeout).
pub fn lock_write_histogram() -> Histogram {
    Histogram::new([
        0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5,
    ])
}

/// `volguard_rwo_locks_total{result}`: taken, taken_over, conflict_retried, waited, refused,
/// unconfirmed, write_failed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct LockLabels {
    pub result: &'static str,
}

impl RwoLocks {
    /// The protocol over `view`, writing with `writer`. Over a `--state` file the lock clock
    /// starts from the locks the file holds (seen since the process started).
    /// `request_timeout`: kube-apiserver's `--request-timeout` (the lock's grace: `LockAge`).
    pub fn new(view: View, writer: Writer, request_timeout: std::time::Duration) -> Self {
        RwoLocks {
            holds: LockHolds::new(view.clone(), Self::clock(&view, request_timeout)),
            view,
            writer,
            results: Default::default(),
            writes: lock_write_histogram(),
        }
    }

    /// Judge by kube-apiserver's `request_timeout` from now on (before any request is decided:
    /// the lock clock starts anew; the metric families stay).
    pub fn set_request_timeout(&mut self, request_timeout: std::time::Duration) {
        self.holds = LockHolds::new(self.view.clone(), Self::clock(&self.view, request_timeout));
    }

    /// The lock clock over `view`: over a `--state` file it starts from the locks the file holds.
    fn clock(view: &View, request_timeout: std::time::Duration) -> LockClock {
        match view.is_file() {
            true => {
                let pvcs = view.sweep::<Pvc>(None);
                let locks = pvcs.iter().filter_map(|p| {
                    let raw = p.metadata.annotation(rwo_lock::RWO_LOCK)?;
                    Some((p.metadata.namespace.as_str(), p.metadata.name.as_str(), raw))
                });
                LockClock::offline(locks, request_timeout)
            }
            false => LockClock::live(request_timeout),
        }
    }

    /// rules.md §2f: the holders in the caches first, then the lock on each RWO claim, taken by
    /// compare-and-swap. A lost swap means another placement won: read that claim again and
    /// decide again, at most `MAX_SWAPS` times, then refuse.
    ///
    /// Late: before it has seen a lock on another node or begun a write, the rule answers as if
    /// volguard were down (the dispatcher's allow). After, allowing could put a second node on the
    /// claim (the placement that won, or the one a held lock stands for): it refuses, a moment
    /// before the dispatcher's deadline (`LOCK_MARGIN`), and the scheduler retries.
    pub async fn place(
        &self,
        pod: &Pod,
        node: &str,
        via: Via,
        dry_run: bool,
        deadline: tokio::time::Instant,
    ) -> Decision {
        let until = deadline - LOCK_MARGIN;
        let p = Placing {
            pod,
            node,
            via,
            dry_run,
            until,
        };
        // One lock per claim, however many volumes name it (rules.md §2f liveness: a second
        // volume's swap would read the lock the first just wrote and refuse forever).
        let mut claims = super::facts::claim_facts(&self.view, pod).await;
        crate::rules::claims::dedup(&mut claims, |c| &mut c.0);
        let mut lost: Option<String> = None;
        // Waits for a placement in flight do not count as lost swaps.
        let mut waits = 0usize;
        let mut swaps = 0usize;
        while swaps < MAX_SWAPS + waits {
            swaps += 1;
            let round = self.round(&p, &claims);
            let outcome = match &lost {
                None => round.await,
                Some(claim) => match tokio::time::timeout_at(until, round).await {
                    Ok(o) => o,
                    Err(_) => return self.lost_unread(&p, claim, "not in time"),
                },
            };
            let i = match outcome {
                Locked::Decided(d) => return d,
                Locked::Lost(i) => i,
                Locked::Wait(i) => {
                    self.lock_count("waited");
                    tokio::time::sleep(BUSY_POLL).await;
                    let name = claims[i].0.name.clone();
                    match tokio::time::timeout_at(
                        until,
                        self.view
                            .read(Pvc::named(&pod.metadata.namespace, &name, Fresh::Live)),
                    )
                    .await
                    {
                        Ok(Fact::Unknown(_)) | Err(_) => {}
                        Ok(f) => claims[i].1 = f,
                    }
                    waits += 1;
                    continue;
                }
            };
            self.lock_count("conflict_retried");
            let name = claims[i].0.name.clone();
            // Another placement just won this claim: not being able to see which one is no
            // reason to allow (rules.md §2f). The scheduler retries.
            let fresh = tokio::time::timeout_at(
                until,
                self.view
                    .read(Pvc::named(&pod.metadata.namespace, &name, Fresh::Live)),
            )
            .await;
            match fresh {
                Err(_) => return self.lost_unread(&p, &name, "not in time"),
                Ok(Fact::Unknown(e)) => {
                    return self.lost_unread(&p, &name, &e.to_string());
                }
                Ok(f) => claims[i].1 = f,
            }
            lost = Some(name);
        }
        self.lock_count("refused");
        Decision::deny(
            "rwo-lock-contended",
            rwo_lock::lost_message(pod, node, &claims_names(&claims), None),
        )
    }

    /// One round: the holders the caches know, then each claim's lock (the holders' warnings
    /// kept ahead of the lock's).
    async fn round(
        &self,
        p: &Placing<'_>,
        claims: &[(crate::rules::claims::Claim, Fact<Arc<Pvc>>)],
    ) -> Locked {
        let d = self.rwo_holders(p.pod, p.node, claims).await;
        if !d.allowed || d.effect == Some(crate::rules::Effect::Unjudged) {
            if !d.allowed {
                self.lock_count("refused");
            }
            return Locked::Decided(d);
        }
        match self.rwo_locks(p, claims).await {
            Locked::Decided(mut l) => {
                l.warnings.splice(0..0, d.warnings);
                Locked::Decided(l)
            }
            lost => lost,
        }
    }

    /// The refusal when a swap on `claim` was lost and the claim could not be read again.
    fn lost_unread(&self, p: &Placing<'_>, claim: &str, why: &str) -> Decision {
        self.lock_count("refused");
        Decision::deny(
            "rwo-lock-lost-unread",
            rwo_lock::lost_message(p.pod, p.node, claim, Some(why)),
        )
    }

    /// The holders the caches know of (pods already bound elsewhere). A claim that does not exist
    /// yet has no known access mode: it is treated as ReadWriteOnce.
    async fn rwo_holders(
        &self,
        pod: &Pod,
        node: &str,
        claims: &[(crate::rules::claims::Claim, Fact<Arc<Pvc>>)],
    ) -> Decision {
        let ns = &pod.metadata.namespace;
        // Holders are only looked up for RWO claims; their nodes only when they sit elsewhere.
        let mut others: Vec<Vec<Holding>> = Vec::new();
        for (claim, pvc) in claims {
            let mut list = Vec::new();
            let rwo = match pvc {
                Fact::Found(p) => p.is_rwo(),
                Fact::Missing => true,
                Fact::Unknown(_) => false,
            };
            if rwo && !claim.read_only {
                let pods = match self
                    .view
                    .read(query::PodsNaming(ns, &claim.name, Fresh::CacheOrLive))
                    .await
                {
                    Fact::Found(pods) => pods,
                    Fact::Missing => Vec::new(),
                    Fact::Unknown(e) => {
                        return crate::rules::rwo::unknown(format!(
                            "volguard could not find the pods using ReadWriteOnce claim {:?} ({e})",
                            claim.name
                        ));
                    }
                };
                for other in pods {
                    let elsewhere = other.metadata.name != pod.metadata.name
                        && !other.is_terminal()
                        && other.node_name().is_some_and(|n| n != node);
                    if elsewhere {
                        let n = other.node_name().unwrap_or_default().to_string();
                        let mut fact = self
                            .view
                            .read(Node::named("", &n, Fresh::CacheOrLive))
                            .await;
                        // A node gone counts only with a record of its deletion on proof; without
                        // one its machine may still run the holder: unsure, so it holds.
                        if matches!(fact, Fact::Missing)
                            && Box::pin(crate::fencing::records::gone_record(
                                &self.view,
                                &n,
                                &fact,
                                other.metadata.creation_timestamp,
                            ))
                            .await
                            .is_none()
                        {
                            fact =
                                Fact::Unknown(crate::rules::decision::ReadError::GoneUnrecorded {
                                    node: n.clone(),
                                });
                        }
                        list.push((other, fact));
                    }
                }
            }
            others.push(list);
        }
        let facts: Vec<ClaimFacts<'_>> = claims
            .iter()
            .zip(&others)
            .map(|((claim, pvc), others)| ClaimFacts {
                claim: claim.clone(),
                pvc: deref(pvc),
                others: others.iter().map(|(p, n)| (p.as_ref(), deref(n))).collect(),
            })
            .collect();
        rwo::place(pod, node, &facts)
    }

    /// Each RWO claim's lock: kept, written, taken over, or held by another node (refused).
    /// `Lost(i)`: the swap on claim `i` lost.
    async fn rwo_locks(
        &self,
        p: &Placing<'_>,
        claims: &[(crate::rules::claims::Claim, Fact<Arc<Pvc>>)],
    ) -> Locked {
        let (pod, node, via, until) = (p.pod, p.node, p.via, p.until);
        let mut writes = Vec::new();
        // One instant for every claim's reads of this round: the writes keep their third
        // whatever the number of claims.
        let reads = reads_by(tokio::time::Instant::now(), until);
        for (i, (claim, pvc)) in claims.iter().enumerate() {
            let Fact::Found(pvc) = pvc else { continue };
            if !pvc.is_rwo() || claim.read_only {
                continue;
            }
            match self
                .lock_step(pod, node, via, &claim.name, pvc, reads)
                .await
            {
                // A pod CREATE that names its node is retried by nobody: waiting inside the
                // webhook's time and deciding again on fresh reads is the same rule applied a
                // moment later (as a retried bind is), so it is as safe as that.
                LockStep::Busy(_)
                    if via == Via::Create && tokio::time::Instant::now() + BUSY_POLL < until =>
                {
                    return Locked::Wait(i);
                }
                LockStep::Busy(l) => {
                    self.lock_count("refused");
                    return Locked::Decided(Decision::deny(
                        "rwo-lock-busy",
                        rwo_lock::busy_message(pod, node, &claim.name, &l),
                    ));
                }
                LockStep::Held(l, why) => {
                    self.lock_count("refused");
                    return Locked::Decided(Decision::deny(
                        "rwo-locked-on-other-node",
                        rwo_lock::held_message(pod, node, &claim.name, &l, why),
                    ));
                }
                LockStep::Write { lock, took_over } => writes.push((i, pvc, lock, took_over)),
            }
        }
        if writes.is_empty() {
            // Every placement of a ReadWriteOnce claim writes its lock: none here.
            return Locked::Decided(Decision::allow("rwo-free"));
        }
        if p.dry_run {
            // sideEffects: NoneOnDryRun: decide as if written, write nothing.
            return Locked::Decided(Decision::allow("rwo-lock-dry-run"));
        }
        self.write_locks(pod, node, writes, until).await
    }

    /// One claim's lock step, on the facts it needs, all read by `reads` (every read of the
    /// step, the node's record of deletion and its Lease included: the write's time is not
    /// theirs): what holds a lock on another node, or whether the placement this node's lock
    /// names is settled. Not read in time: the lock on the other node holds (unsure means in
    /// use), and the named placement is taken as in flight.
    async fn lock_step(
        &self,
        pod: &Pod,
        node: &str,
        via: Via,
        claim: &str,
        pvc: &Pvc,
        reads: tokio::time::Instant,
    ) -> LockStep {
        let ns = &pvc.metadata.namespace;
        let current = RwoLock::of(pvc);
        // Whether this process saw the pod the lock names stored: a created placement that
        // landed, whose pod a quorum read then misses, was deleted. Sampled before that read: a
        // create landing between the read and this sample would look deleted (adversary review).
        // A bind's pod was stored before its lock: there is nothing more to know.
        let writer_stored = current
            .as_ref()
            .is_some_and(|l| self.holds.writer_stored(ns, l));
        let by = Fresh::LiveUntil(reads);
        let hold = match &current {
            Some(l) if l.node != node => {
                tokio::time::timeout_at(reads, self.holds.read(pvc, l, by, None))
                    .await
                    .ok()
            }
            _ => None,
        };
        let hold_ref = hold.as_ref().map(|h| h.judged(claim, writer_stored));
        let named = match &current {
            Some(l)
                if l.node == node
                    && (l.pod != pod.metadata.name || *l.uid != *pod.metadata.uid) =>
            {
                tokio::time::timeout_at(reads, self.named_placement(ns, pvc, l, by))
                    .await
                    .ok()
            }
            _ => None,
        };
        let named_ref = named.as_ref().map(|(writer, observed)| Named {
            writer: writer.as_ref().map(|a| &**a),
            observed: *observed,
            writer_stored,
        });
        rwo_lock::step(
            pod,
            node,
            via,
            current.as_ref(),
            hold_ref.as_ref(),
            named_ref.as_ref(),
            jiff::Timestamp::now(),
        )
    }

    /// The locks decided, each written by compare-and-swap in claim order.
    async fn write_locks(
        &self,
        pod: &Pod,
        node: &str,
        writes: Vec<(usize, &Arc<Pvc>, RwoLock, Option<&'static str>)>,
        until: tokio::time::Instant,
    ) -> Locked {
        let mut row = "rwo-lock-taken";
        for (i, pvc, lock, took_over) in writes {
            // Every reader waits at least this process's grace on it (`RwoLock::grace`).
            let raw = lock.with_grace(self.holds.clock().grace()).encode();
            let t = std::time::Instant::now();
            let swap = self
                .writer
                .apply(LockSwap {
                    pvc,
                    lock: &raw,
                    until,
                })
                .await;
            self.writes.observe(t.elapsed().as_secs_f64());
            match swap {
                Swap::Written => {
                    self.holds
                        .clock()
                        .wrote(&pvc.metadata.namespace, &pvc.metadata.name, &raw);
                    if let Some(why) = took_over {
                        tracing::info!(claim = %pvc.metadata.name, node, took_over = why,
                            "ReadWriteOnce lock taken over");
                        self.lock_count("taken_over");
                        row = "rwo-lock-taken-over";
                    } else {
                        self.lock_count("taken");
                    }
                }
                Swap::Conflict => return Locked::Lost(i),
                Swap::Unconfirmed(e) => {
                    // The write may or may not land: allowing could put a second node on the
                    // claim, refusing costs the scheduler one retry (which then finds the lock
                    // naming this pod, or not).
                    self.lock_count("unconfirmed");
                    return Locked::Decided(Decision::deny(
                        "rwo-lock-unconfirmed",
                        rwo_lock::unconfirmed_message(pod, node, &pvc.metadata.name, &e),
                    ));
                }
                // Refused while a lock stands: allowed without writing, this placement would
                // leave the lock naming the one before, which a take-over or the controller's
                // cleanup could judge gone while this pod lands (adversary review). Refused as
                // an unconfirmed write is; the scheduler retries.
                Swap::Failed(e) if RwoLock::of(pvc).is_some() => {
                    self.lock_count("write_failed");
                    return Locked::Decided(Decision::deny(
                        "rwo-lock-unconfirmed",
                        rwo_lock::unconfirmed_message(pod, node, &pvc.metadata.name, &e),
                    ));
                }
                Swap::Failed(e) => {
                    self.lock_count("write_failed");
                    return Locked::Decided(crate::rules::rwo::unknown(format!(
                        "volguard could not record the ReadWriteOnce lock on claim {:?} ({e}); \
                         allowed as if volguard were unavailable",
                        pvc.metadata.name
                    )));
                }
            }
        }
        Locked::Decided(Decision::allow(row))
    }

    /// The placement a lock on this very node names, for a rename: its pod from the cache when
    /// the cache shows that UID bound (landed) or ended, else by a live read; and how long this
    /// process has seen the lock unchanged.
    async fn named_placement(
        &self,
        ns: &str,
        pvc: &Pvc,
        lock: &RwoLock,
        reads: Fresh,
    ) -> (LockPod<Arc<Pod>>, rwo_lock::LockAge) {
        let raw = pvc
            .metadata
            .annotation(rwo_lock::RWO_LOCK)
            .unwrap_or_default();
        let clock = self.holds.clock();
        let observed = clock.age(
            clock
                .quiet_for(ns, &pvc.metadata.name, raw, false)
                .max(crate::lock_hold::cache_held(pvc)),
            lock,
        );
        // Older than the grace, the placement is settled whatever its pod shows
        // (`placement_settled`); seen gone, it is too. Nothing is read.
        if observed.past_grace() {
            return (LockPod::PastGrace, observed);
        }
        if self.holds.seen_gone(ns, lock) {
            return (LockPod::SeenGone, observed);
        }
        // The cache alone first: a miss is read once, by `reads`, not also by a cache-or-live
        // lookup (two GETs of one missing pod per rename).
        let cached = match self
            .view
            .read(Pod::named(ns, &lock.pod, Fresh::Cache))
            .await
        {
            Fact::Found(p)
                if *p.metadata.uid == *lock.uid && (p.node_name().is_some() || p.is_terminal()) =>
            {
                Some(p)
            }
            _ => None,
        };
        let writer = match cached {
            Some(p) => Fact::Found(p),
            None => self.view.read(Pod::named(ns, &lock.pod, reads)).await,
        };
        (LockPod::Read(writer), observed)
    }

    fn lock_count(&self, result: &'static str) {
        self.results.get_or_create(&LockLabels { result }).inc();
    }
}

/// How often a placement re-reads and re-decides after losing the lock's swap.
pub const MAX_SWAPS: usize = 4;

/// How long before the dispatcher's deadline the lock answers a late placement itself (refused):
/// enough for the answer to be built and sent before the dispatcher's late allow would be.
const LOCK_MARGIN: std::time::Duration = std::time::Duration::from_millis(100);

/// When a lock step's reads must have their answers, sent at `now` in a placement answered by
/// `until`: two thirds of what is left, the last third kept for the lock's write (an unanswered
/// write may still land and hold its node: `LockSwap`). Reads cut sooner, at the 2 s of a short
/// webhook, were refused unsure by the thousand under throttling at 5,000 nodes, each refusal
/// retried by the scheduler with the same reads (`make bench-scale`).
fn reads_by(now: tokio::time::Instant, until: tokio::time::Instant) -> tokio::time::Instant {
    now + until.saturating_duration_since(now) * 2 / 3
}

/// One placement being judged: the pod, the node it goes to, how (a bind or a create naming its
/// node), whether it is a dry run, and when its answer is due.
struct Placing<'a> {
    pod: &'a Pod,
    node: &'a str,
    via: Via,
    dry_run: bool,
    until: tokio::time::Instant,
}

/// The lock step's outcome.
enum Locked {
    Decided(Decision),
    Lost(usize),
    /// Claim `i` is being placed on this node for another pod right now, and this placement is a
    /// pod CREATE nothing retries: wait, then decide again (rules.md §2f liveness).
    Wait(usize),
}

/// How long a pod CREATE waits for the placement in flight before it decides again.
const BUSY_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Another pod naming a claim, with its node as read.
type Holding = (Arc<Pod>, Fact<Arc<crate::model::Node>>);

/// The claim names of a placement, for a message.
fn claims_names(claims: &[(crate::rules::claims::Claim, Fact<Arc<Pvc>>)]) -> String {
    claims
        .iter()
        .map(|(c, _)| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[path = "rwo_lock_tests.rs"]
mod tests;
