//! Prometheus metrics (`volguard_*`), rendered in the text exposition format on the probe port.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::{Mutex, OnceLock};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: &'static str,
    pub kind: &'static str,
    pub operation: &'static str,
    pub decision: &'static str,
}

const ENDPOINTS: [&str; 2] = ["mutate", "validate"];
const KINDS: [&str; 5] = [
    "Pod",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "Node",
    "other",
];
const OPERATIONS: [&str; 5] = ["CREATE", "UPDATE", "DELETE", "CONNECT", "other"];
const DECISIONS: [&str; 6] = ["patched", "allowed", "invalid", "error", "denied", "other"];
const REQUEST_SERIES: usize = ENDPOINTS.len() * KINDS.len() * OPERATIONS.len() * DECISIONS.len();

/// Index of `value` in `set`, the last entry ("other") when absent: label values stay bounded
/// whatever a request claims to be.
fn slot(set: &[&str], value: &str) -> usize {
    set.iter()
        .position(|v| *v == value)
        .unwrap_or(set.len() - 1)
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

pub struct Metrics {
    registry: Mutex<Registry>,
    pub requests: Family<RequestLabels, Counter>,
    /// Each series of `requests` once looked up: counting a request is then one atomic add
    /// instead of hashing four labels under the family's lock. Series appear on first use.
    request_series: Box<[OnceLock<Counter>]>,
    pub duration: Histogram,
    pub rejected_bodies: Family<CodeLabels, Counter>,
    pub unknown_kinds: Family<KindLabels, Counter>,
    pub tls_reloads: Family<ResultLabels, Counter>,
    pub tls_cert_not_after: Gauge,
    pub in_flight: Gauge,
    in_flight_source: OnceLock<Box<dyn Fn() -> usize + Send + Sync>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        // 50µs .. ~1.6s: the apiserver waits for every call, so the low end matters.
        let duration = Histogram::new([
            0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
            0.5, 1.0, 2.5,
        ]);
        let rejected_bodies = Family::<CodeLabels, Counter>::default();
        let unknown_kinds = Family::<KindLabels, Counter>::default();
        let tls_reloads = Family::<ResultLabels, Counter>::default();
        let tls_cert_not_after = Gauge::default();
        let in_flight = Gauge::default();
        registry.register(
            "volguard_admission_requests",
            "Admission requests by endpoint, kind, operation and decision",
            requests.clone(),
        );
        registry.register(
            "volguard_admission_request_duration_seconds",
            "Time to decide one admission request",
            duration.clone(),
        );
        registry.register(
            "volguard_admission_rejected_bodies",
            "HTTP requests rejected before any rule ran, by HTTP status code",
            rejected_bodies.clone(),
        );
        registry.register(
            "volguard_admission_unknown_kind_requests",
            "Requests for kinds volguard has no rule for (a webhook configuration mistake)",
            unknown_kinds.clone(),
        );
        registry.register(
            "volguard_tls_reloads",
            "Serving certificate reloads by result",
            tls_reloads.clone(),
        );
        registry.register(
            "volguard_tls_certificate_not_after_seconds",
            "Expiry (unix time) of the serving certificate in use",
            tls_cert_not_after.clone(),
        );
        registry.register(
            "volguard_admission_in_flight_requests",
            "Admission requests holding a concurrency slot (body being read or decision being made)",
            in_flight.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            requests,
            request_series: (0..REQUEST_SERIES).map(|_| OnceLock::new()).collect(),
            duration,
            rejected_bodies,
            unknown_kinds,
            tls_reloads,
            tls_cert_not_after,
            in_flight,
            in_flight_source: OnceLock::new(),
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

    /// Add metrics owned by another subsystem (controller, report gauges).
    pub fn with_registry<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> R {
        let mut r = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut r)
    }

    /// Where `volguard_admission_in_flight_requests` is read from at scrape time.
    pub fn in_flight_from(&self, source: impl Fn() -> usize + Send + Sync + 'static) {
        let _ = self.in_flight_source.set(Box::new(source));
    }

    pub fn render(&self) -> String {
        if let Some(source) = self.in_flight_source.get() {
            self.in_flight
                .set(i64::try_from(source()).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        let r = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        if prometheus_client::encoding::text::encode(&mut out, &r).is_err() {
            out.clear();
        }
        out
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
