//! The audit trail of the webhook: an Event (events.k8s.io/v1) for each refused or warned
//! request, on the object (or its namespace when the object does not exist yet), so
//! `kubectl describe` and `kubectl get events` show who was refused and why.
//!
//! Aggregated and rate-limited so that a loop (a controller retrying a force delete every
//! second) cannot flood etcd: the same object, reason and rule row make one Event whose
//! `series.count` is brought up to date at most every `FLUSH` (kube's `Recorder` writes once per
//! occurrence, which is exactly the flood to avoid); all writes share a token bucket; entries
//! are bounded. The request path only `try_send`s into a bounded channel and never waits.

use k8s_openapi::api::core::v1::ObjectReference;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

mod events;
mod reports;
use events::write_event;
pub use reports::Reports;
use reports::{Pending, REPORT_PENDING, fold_reports, line};

/// How often the counts of repeated refusals are written.
pub const FLUSH: Duration = Duration::from_secs(10);
/// An entry not seen for this long is forgotten; its next occurrence starts a new Event.
pub const IDLE: Duration = Duration::from_secs(600);
/// Distinct (object, reason, row) entries kept; beyond it new ones are dropped (and counted).
pub const CAPACITY: usize = 4096;
/// Entries one namespace may hold: a flood of refusals in one namespace cannot take the room of
/// every other namespace's Events (rules.md §8 "bounded side effects").
pub const PER_NAMESPACE: usize = CAPACITY / 16;
/// Writes to the apiserver: a sustained rate and a burst.
pub const WRITES_PER_SECOND: f64 = 5.0;
pub const BURST: f64 = 25.0;
const CHANNEL: usize = 1024;
pub const CONTROLLER: &str = "volguard.io/webhook";

/// One refused (`Denied`) or warned (`WouldDeny`) request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub regarding: Regarding,
    /// Who was refused: one Event per caller (an Event says "by" one user).
    pub user: String,
    pub reason: &'static str,
    /// What was attempted: Create, Update, Delete, Bind, Evict, ...
    pub action: String,
    pub row: &'static str,
    /// The rule that decided (the AuditReport's summary is by rule).
    pub rule: String,
    pub note: String,
}

/// The object an Event is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Regarding {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
    /// The object's UID when the request carried it (`kubectl describe` matches on it).
    pub uid: Option<String>,
}

impl Regarding {
    /// What an admission request is about: the pod for its subresources (binding, eviction,
    /// status) and the legacy `bindings`; the namespace for an object not created yet (or one
    /// with only a generateName); the object itself otherwise.
    pub fn of(
        kind: &str,
        operation: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Option<Self> {
        let ns = namespace.filter(|n| !n.is_empty()).map(str::to_string);
        // Binding and Eviction are CREATEs of a subresource of a pod that exists.
        let (api_version, object_kind) = match kind {
            "Pod" | "Binding" | "Eviction" => ("v1", "Pod"),
            "PersistentVolumeClaim" => ("v1", "PersistentVolumeClaim"),
            "PersistentVolume" => ("v1", "PersistentVolume"),
            "Node" => ("v1", "Node"),
            _ => return None,
        };
        let not_yet = operation == "CREATE" && !matches!(kind, "Binding" | "Eviction");
        match name.filter(|n| !n.is_empty()) {
            Some(n) if !not_yet => Some(Regarding {
                api_version,
                kind: object_kind,
                namespace: ns,
                name: n.to_string(),
                uid: None,
            }),
            // Recorded inside the namespace itself (its users read their namespace's Events);
            // the apiserver wants the reference's namespace to be the Event's.
            _ => ns.map(|ns| Regarding {
                api_version: "v1",
                kind: "Namespace",
                namespace: Some(ns.clone()),
                name: ns,
                uid: None,
            }),
        }
    }

    fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version.to_string()),
            kind: Some(self.kind.to_string()),
            namespace: self.namespace.clone(),
            name: Some(self.name.clone()),
            uid: self.uid.clone(),
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    regarding: Regarding,
    user: String,
    reason: &'static str,
    row: &'static str,
}

#[derive(Debug)]
struct Entry {
    refusal: Refusal,
    /// The Event's name once created.
    event: Option<String>,
    /// Occurrences seen, and how many the Event says.
    seen: i32,
    written: i32,
    last_seen: Instant,
    last_seen_wall: jiff::Timestamp,
    last_write: Option<Instant>,
}

/// What the writer should send now.
#[derive(Debug, PartialEq)]
enum Write {
    /// A new Event (`count` > 1 when repeats came before it could be written).
    Create {
        key: usize,
        refusal: Refusal,
        count: i32,
    },
    /// Bring an Event's series up to date.
    Series {
        key: usize,
        event: String,
        namespace: String,
        count: i32,
        last: jiff::Timestamp,
    },
}

/// The pure part: which Events to create or update, given what was seen and the time.
struct Aggregator {
    entries: Vec<Option<(Key, Entry)>>,
    index: HashMap<Key, usize>,
    per_namespace: HashMap<String, usize>,
    tokens: f64,
    refilled: Instant,
}

#[derive(Debug, PartialEq, Eq)]
enum Observed {
    New,
    Repeat,
    Dropped,
}

impl Aggregator {
    fn new(now: Instant) -> Self {
        Aggregator {
            entries: Vec::new(),
            index: HashMap::new(),
            per_namespace: HashMap::new(),
            tokens: BURST,
            refilled: now,
        }
    }

    fn observe(&mut self, r: Refusal, now: Instant, wall: jiff::Timestamp) -> Observed {
        let key = Key {
            regarding: r.regarding.clone(),
            user: r.user.clone(),
            reason: r.reason,
            row: r.row,
        };
        if let Some(&i) = self.index.get(&key)
            && let Some((_, e)) = self.entries[i].as_mut()
        {
            e.seen += 1;
            e.last_seen = now;
            e.last_seen_wall = wall;
            e.refusal.note = r.note;
            return Observed::Repeat;
        }
        let ns = event_namespace(&key.regarding);
        let held = self.per_namespace.get(&ns).copied().unwrap_or(0);
        if self.index.len() >= CAPACITY || held >= PER_NAMESPACE {
            return Observed::Dropped;
        }
        self.per_namespace.insert(ns, held + 1);
        let entry = Entry {
            refusal: r,
            event: None,
            seen: 1,
            written: 0,
            last_seen: now,
            last_seen_wall: wall,
            last_write: None,
        };
        let slot = self
            .entries
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.entries.len());
        if slot == self.entries.len() {
            self.entries.push(None);
        }
        self.entries[slot] = Some((key.clone(), entry));
        self.index.insert(key, slot);
        Observed::New
    }

    fn take_token(&mut self, now: Instant) -> bool {
        let refill = now.duration_since(self.refilled).as_secs_f64() * WRITES_PER_SECOND;
        self.tokens = (self.tokens + refill).min(BURST);
        self.refilled = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// The writes due now: new entries at once, repeats every `FLUSH`, within the token bucket.
    /// Forgets entries idle for `IDLE`.
    fn due(&mut self, now: Instant) -> Vec<Write> {
        let mut out = Vec::new();
        for i in 0..self.entries.len() {
            let Some((key, e)) = self.entries[i].as_ref() else {
                continue;
            };
            if now.duration_since(e.last_seen) >= IDLE && e.seen == e.written {
                let ns = event_namespace(&key.regarding);
                if let Some(n) = self.per_namespace.get_mut(&ns) {
                    *n -= 1;
                    if *n == 0 {
                        self.per_namespace.remove(&ns);
                    }
                }
                self.index.remove(key);
                self.entries[i] = None;
                continue;
            }
            let flushed = |t: Instant| now.duration_since(t) >= FLUSH;
            let write = match (&e.event, e.last_write) {
                // New, or its create failed and it happened again since.
                (None, None) => Write::Create {
                    key: i,
                    refusal: e.refusal.clone(),
                    count: e.seen,
                },
                (None, Some(t)) if e.seen > e.written && flushed(t) => Write::Create {
                    key: i,
                    refusal: e.refusal.clone(),
                    count: e.seen,
                },
                (Some(_), Some(t)) if e.seen > e.written && flushed(t) => Write::Series {
                    key: i,
                    event: e.event.clone().unwrap_or_default(),
                    namespace: event_namespace(&e.refusal.regarding),
                    count: e.seen,
                    last: e.last_seen_wall,
                },
                _ => continue,
            };
            if !self.take_token(now) {
                break;
            }
            if let Some((_, e)) = self.entries[i].as_mut() {
                // Marked written now: a failed write is not retried in a loop (the next
                // occurrence or flush tries again).
                e.last_write = Some(now);
                e.written = e.seen;
            }
            out.push(write);
        }
        out
    }

    /// The Event an entry created (so its repeats become series updates).
    fn created(&mut self, key: usize, event: String) {
        if let Some((_, e)) = self.entries.get_mut(key).and_then(Option::as_mut) {
            e.event = Some(event);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.index.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

/// Events of cluster-scoped objects go to `default`, as the kubelet's Node events do.
fn event_namespace(r: &Regarding) -> String {
    r.namespace.clone().unwrap_or_else(|| "default".to_string())
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    record: &'static str,
    result: &'static str,
}

/// The two records the trail writes (label `record`).
const EVENT: &str = "event";
const REPORT: &str = "report";
/// What becomes of each record: every pair exists from the start at 0, and a loss of either
/// record is `dropped` or `failed`, the two results the VolguardAuditRecordsDropped alert reads.
const EVENT_RESULTS: [&str; 5] = ["created", "updated", "aggregated", "dropped", "failed"];
const REPORT_RESULTS: [&str; 3] = ["written", "dropped", "failed"];

/// `volguard_audit_events_total{record, result}`, registered by `volguard serve` at start
/// whatever its source, so `increase()` sees the first failure.
#[derive(Clone, Default)]
pub struct AuditMetrics(Family<ResultLabels, Counter>);

impl AuditMetrics {
    pub fn register(registry: &crate::runtime::MetricsRegistry) -> Self {
        let m = AuditMetrics(registry.add(
            "volguard_audit_events",
            "Audit trail writes by record (event: the Event of a refused, warned or exempted request or a break \
             glass; report: the namespace's AuditReport) and result (event: created, updated, aggregated, dropped, \
             failed; report: written, dropped, failed)",
            Family::default(),
        ));
        for (record, results) in [(EVENT, &EVENT_RESULTS[..]), (REPORT, &REPORT_RESULTS[..])] {
            for &result in results {
                let _ = m.0.get_or_create(&ResultLabels { record, result });
            }
        }
        m
    }

    fn count(&self, record: &'static str, result: &'static str) {
        self.0.get_or_create(&ResultLabels { record, result }).inc();
    }

    /// The count of one series.
    #[cfg(test)]
    fn get(&self, record: &str, result: &str) -> u64 {
        let record = [EVENT, REPORT].into_iter().find(|r| *r == record);
        let result = EVENT_RESULTS
            .iter()
            .chain(&REPORT_RESULTS)
            .find(|r| **r == result);
        match (record, result) {
            (Some(record), Some(&result)) => {
                self.0.get_or_create(&ResultLabels { record, result }).get()
            }
            _ => 0,
        }
    }
}

/// The webhook's audit trail, kept by its writer (`Writer::with_audit`): the request path only
/// queues, never blocks, never fails the request.
#[derive(Clone)]
pub(in crate::state) struct Trail {
    tx: mpsc::Sender<Refusal>,
    metrics: AuditMetrics,
}

impl Trail {
    fn record(&self, r: Refusal) {
        // Full: the writer is behind (the apiserver is slow or refusing it), and its failures
        // are logged there; a line per request here would turn a refusal storm into a log storm.
        if self.tx.try_send(r).is_err() {
            self.metrics.count(EVENT, "dropped");
        }
    }
}

impl super::Writer {
    /// This writer, keeping the webhook's audit trail: a task aggregates refusals into Events
    /// and folds lines into each namespace's AuditReport; `identity` names this replica in
    /// `reportingInstance`.
    pub fn with_audit(mut self, identity: String, metrics: AuditMetrics, reports: Reports) -> Self {
        let (tx, rx) = mpsc::channel(CHANNEL);
        tokio::spawn(run(self.clone(), identity, rx, metrics.clone(), reports));
        self.trail = Some(Trail { tx, metrics });
        self
    }

    /// Queue one refused or warned request for the audit trail (nothing without one).
    pub fn audit(&self, r: Refusal) {
        if let Some(t) = &self.trail {
            t.record(r);
        }
    }
}

/// The sink's task: aggregate refusals into Events, fold lines into each namespace's AuditReport
/// every `FLUSH`.
async fn run(
    writer: super::Writer,
    identity: String,
    mut rx: mpsc::Receiver<Refusal>,
    metrics: AuditMetrics,
    reports: Reports,
) {
    let mut agg = Aggregator::new(Instant::now());
    let mut pending: Pending = HashMap::new();
    let mut next_report = Instant::now() + FLUSH;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // Drops since the last report write: one warn line per `FLUSH`, not one per request.
    let mut dropped = Dropped::default();
    loop {
        tokio::select! {
            got = rx.recv() => {
                let Some(r) = got else { return };
                if reports.max > 0 {
                    if pending.values().map(Vec::len).sum::<usize>() < REPORT_PENDING {
                        pending
                            .entry(event_namespace(&r.regarding))
                            .or_default()
                            .push(line(&r, jiff::Timestamp::now()));
                    } else {
                        metrics.count(REPORT, "dropped");
                        dropped.lines += 1;
                    }
                }
                match agg.observe(r, Instant::now(), jiff::Timestamp::now()) {
                    Observed::New => {}
                    Observed::Repeat => metrics.count(EVENT, "aggregated"),
                    Observed::Dropped => {
                        metrics.count(EVENT, "dropped");
                        dropped.events += 1;
                    }
                }
            }
            _ = tick.tick() => {}
        }
        if Instant::now() >= next_report {
            next_report = Instant::now() + FLUSH;
            std::mem::take(&mut dropped).log();
            fold_reports(&writer, &mut pending, &reports, &metrics).await;
        }
        for w in agg.due(Instant::now()) {
            if let Some(created) = write_event(&writer, &identity, w, &metrics).await {
                agg.created(created.0, created.1);
            }
        }
    }
}

/// Records dropped for want of room since the last report write.
#[derive(Debug, Default)]
struct Dropped {
    events: u64,
    lines: u64,
}

impl Dropped {
    fn log(self) {
        if self.events > 0 || self.lines > 0 {
            tracing::warn!(
                events = self.events,
                report_lines = self.lines,
                "audit records dropped: too many distinct refusals pending (Events), or AuditReport \
                 writes failing for long (report lines)"
            );
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
