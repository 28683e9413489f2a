//! Prometheus metrics (`volguard_*`), rendered in the text exposition format on the probe port.

use crate::rules::rule::TABLE;
use crate::runtime::MetricsRegistry;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::sync::{Arc, OnceLock};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: &'static str,
    pub kind: &'static str,
    pub operation: &'static str,
    pub decision: &'static str,
}

/// `mutate`, `validate` (every rule), each rule's own path (the rule table's names), `other`.
const ENDPOINTS: [&str; TABLE.len() + 3] = {
    let mut out = ["other"; TABLE.len() + 3];
    out[0] = "mutate";
    out[1] = "validate";
    let mut i = 0;
    while i < TABLE.len() {
        out[i + 2] = TABLE[i].name;
        i += 1;
    }
    out
};
const KINDS: [&str; 9] = [
    "Pod",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "Eviction",
    "Binding",
    "Node",
    "Namespace",
    "NodeFence",
    "other",
];
const OPERATIONS: [&str; 5] = ["CREATE", "UPDATE", "DELETE", "CONNECT", "other"];
const DECISIONS: [&str; 8] = [
    "patched", "allowed", "warned", "exempted", "invalid", "error", "denied", "other",
];
const REQUEST_SERIES: usize = ENDPOINTS.len() * KINDS.len() * OPERATIONS.len() * DECISIONS.len();

/// Index of `value` in `set`, the last entry ("other") when absent: label values stay bounded
/// whatever a request claims to be.
fn slot(set: &[&str], value: &str) -> usize {
    set.iter()
        .position(|v| *v == value)
        .unwrap_or(set.len() - 1)
}

/// `volguard_admission_unread_answers_total{endpoint,kind,operation}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub endpoint: &'static str,
    pub kind: &'static str,
    pub operation: &'static str,
}

/// `volguard_admission_request_duration_seconds{endpoint}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: &'static str,
}

/// The duration histogram's buckets: 50µs .. ~1.6s (the apiserver waits for every call, so the
/// low end matters).
fn duration_histogram() -> Histogram {
    Histogram::new([
        0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
        1.0, 2.5,
    ])
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    pub code: u16,
}

/// `volguard_rwo_locks_total{result}`: every result the lock counts (`RwoLocks::lock_count`),
/// created at 0 when serve starts.
pub const RWO_LOCK_RESULTS: [&str; 7] = [
    "taken",
    "taken_over",
    "conflict_retried",
    "waited",
    "refused",
    "unconfirmed",
    "write_failed",
];

/// `volguard_break_glass_total{rule}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct RuleLabels {
    pub rule: &'static str,
}

pub struct Metrics {
    registry: Arc<MetricsRegistry>,
    pub requests: Family<RequestLabels, Counter>,
    /// Each series of `requests` once looked up: counting a request is then one atomic add
    /// instead of hashing four labels under the family's lock. Series appear on first use.
    request_series: Box<[OnceLock<Counter>]>,
    /// By endpoint (each rule's path: its latency as the apiserver waits for it).
    pub duration: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    /// Each endpoint's series, created at start (every endpoint present from the first scrape).
    duration_series: Box<[Histogram]>,
    pub rejected_bodies: Family<CodeLabels, Counter>,
    pub unknown_kinds: Family<KindLabels, Counter>,
    /// The serving certificate's (shared with any TLS server: `tls::TlsMetrics`).
    pub tls: Arc<super::tls::TlsMetrics>,
    pub in_flight: Gauge,
    /// Overrides used (rules.md §8), by rule.
    pub break_glass: Family<RuleLabels, Counter>,
    /// Calls answered "allowed", with no patch and no warning, without reading the cluster: the
    /// request alone decided them, so a `matchCondition` could have kept them from being made.
    pub unread_answers: Family<CallLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Admission metrics in a registry of their own (tests, benches).
    pub fn new() -> Self {
        Self::register(Arc::new(MetricsRegistry::default()))
    }

    /// Register the admission metrics (`volguard_admission_*`, and the serving certificate's
    /// `volguard_tls_*`) in `registry`.
    pub fn register(registry: Arc<MetricsRegistry>) -> Self {
        let r = &registry;
        let mut m = Metrics {
            requests: r.add(
                "volguard_admission_requests",
                "Admission requests by endpoint, kind, operation and decision",
                Family::default(),
            ),
            request_series: (0..REQUEST_SERIES).map(|_| OnceLock::new()).collect(),
            duration: r.add(
                "volguard_admission_request_duration_seconds",
                "Time to decide one admission request, by endpoint",
                Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            ),
            duration_series: Box::new([]),
            rejected_bodies: r.add(
                "volguard_admission_rejected_bodies",
                "HTTP requests rejected before any rule ran, by HTTP status code",
                Family::default(),
            ),
            unknown_kinds: r.add(
                "volguard_admission_unknown_kind_requests",
                "Requests for kinds volguard has no rule for (a webhook configuration mistake)",
                Family::default(),
            ),
            tls: Arc::new(super::tls::TlsMetrics::register(r)),
            in_flight: r.add(
                "volguard_admission_in_flight_requests",
                "Admission requests holding a concurrency slot (body being read or decision being made)",
                Gauge::default(),
            ),
            break_glass: r.add(
                "volguard_break_glass",
                "Requests allowed by a person's volguard.io/* override (break glass), by rule",
                Family::default(),
            ),
            unread_answers: r.add(
                "volguard_admission_unread_answers",
                "Calls answered allowed (no patch, no warning) without reading the cluster, by endpoint, kind \
                 and operation: the request alone decided them, a matchCondition could have",
                Family::default(),
            ),
            registry,
        };
        m.duration_series = ENDPOINTS
            .iter()
            .map(|endpoint| {
                m.duration
                    .get_or_create(&EndpointLabels { endpoint })
                    .clone()
            })
            .collect();
        m.precreate();
        m
    }

    /// Every series whose label values are known up front, at zero (dashboards and alerts see a
    /// rule that never fired as 0, not as absent): each rule's requests by the kinds and
    /// operations its row judges and the decisions it can give, break glass per validating
    /// rule, certificate reloads by result.
    fn precreate(&self) {
        use crate::rules::rule::TABLE;
        for d in TABLE.iter() {
            let decisions: &[&str] = match (d.mutating, d.warnable) {
                (true, _) => &["patched", "allowed"],
                (false, true) => &["allowed", "denied", "warned", "exempted"],
                (false, false) => &["allowed", "denied"],
            };
            for on in d.on {
                let (kind, operation) = (on.doors().kind.1, on.doors().operation);
                for decision in decisions {
                    let (e, k, o, dd) = (
                        slot(&ENDPOINTS, d.name),
                        slot(&KINDS, kind),
                        slot(&OPERATIONS, operation),
                        slot(&DECISIONS, decision),
                    );
                    let i = ((e * KINDS.len() + k) * OPERATIONS.len() + o) * DECISIONS.len() + dd;
                    if let Some(series) = self.request_series.get(i) {
                        series.get_or_init(|| {
                            self.requests
                                .get_or_create(&RequestLabels {
                                    endpoint: ENDPOINTS[e],
                                    kind: KINDS[k],
                                    operation: OPERATIONS[o],
                                    decision: DECISIONS[dd],
                                })
                                .clone()
                        });
                    }
                }
            }
            if !d.mutating {
                let _ = self.break_glass.get_or_create(&RuleLabels { rule: d.name });
            }
        }
    }

    /// Record how long one request to `endpoint` took to decide.
    pub fn observe_duration(&self, endpoint: &str, seconds: f64) {
        if let Some(h) = self.duration_series.get(slot(&ENDPOINTS, endpoint)) {
            h.observe(seconds);
        }
    }

    /// Count one decided admission request.
    pub fn count_request(&self, endpoint: &str, kind: &str, operation: &str, decision: &str) {
        let (e, k, o, d) = (
            slot(&ENDPOINTS, endpoint),
            slot(&KINDS, kind),
            slot(&OPERATIONS, operation),
            slot(&DECISIONS, decision),
        );
        let i = ((e * KINDS.len() + k) * OPERATIONS.len() + o) * DECISIONS.len() + d;
        let Some(series) = self.request_series.get(i) else {
            return;
        };
        series
            .get_or_init(|| {
                self.requests
                    .get_or_create(&RequestLabels {
                        endpoint: ENDPOINTS[e],
                        kind: KINDS[k],
                        operation: OPERATIONS[o],
                        decision: DECISIONS[d],
                    })
                    .clone()
            })
            .inc();
    }

    /// Count one call the request alone decided (every call, a DELETE's second one too: each is
    /// a call the apiserver made).
    pub fn count_unread(&self, endpoint: &str, kind: &str, operation: &str) {
        self.unread_answers
            .get_or_create(&CallLabels {
                endpoint: ENDPOINTS[slot(&ENDPOINTS, endpoint)],
                kind: KINDS[slot(&KINDS, kind)],
                operation: OPERATIONS[slot(&OPERATIONS, operation)],
            })
            .inc();
    }

    /// Where `volguard_admission_in_flight_requests` is read from at scrape time.
    pub fn in_flight_from(&self, source: impl Fn() -> usize + Send + Sync + 'static) {
        let gauge = self.in_flight.clone();
        self.registry.on_scrape(move || {
            gauge.set(i64::try_from(source()).unwrap_or(i64::MAX));
        });
    }

    pub fn registry(&self) -> &Arc<MetricsRegistry> {
        &self.registry
    }

    pub fn render(&self) -> String {
        self.registry.render()
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
