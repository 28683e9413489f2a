//! Fencing metrics (rules.md §7 "Audit"), on the controller's probe port.

use crate::model::fence::Phase;
use crate::runtime::MetricsRegistry;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    pub phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BackendLabel {
    pub backend: &'static str,
}

pub struct FencingMetrics {
    /// Incidents by phase (every NodeFence in the cluster).
    pub incidents: Family<PhaseLabel, Gauge>,
    /// Partition seen to fence confirmed.
    pub time_to_fence: Histogram,
    /// Node back to fence undone and taint removed.
    pub time_to_recover: Histogram,
    pub backend_failures: Family<BackendLabel, Counter>,
    /// Nodes partitioned now (lease silent and not Ready).
    pub unhealthy_nodes: Gauge,
    /// 1 while more nodes are unhealthy than `--max-unhealthy-nodes`: nothing new is fenced.
    pub storm: Gauge,
    /// Fenced incidents held because the fence does not cover every volume on the node.
    pub scope_held: Gauge,
    /// Incidents waiting for a person's `fence confirm` (the `manual` backend asked).
    pub awaiting_person: Gauge,
    /// Terminating pods of released nodes deleted by volguard (`--release-pods=now`).
    pub pods_released: Counter,
}

fn buckets() -> impl Iterator<Item = f64> {
    [
        5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
    ]
    .into_iter()
}

impl FencingMetrics {
    pub fn register(r: &MetricsRegistry) -> Self {
        let m = FencingMetrics {
            incidents: r.add(
                "volguard_fencing_incidents",
                "NodeFence incidents by phase",
                Family::default(),
            ),
            time_to_fence: r.add(
                "volguard_fencing_time_to_fence_seconds",
                "From a partition's detection to a proven fence",
                Histogram::new(buckets()),
            ),
            time_to_recover: r.add(
                "volguard_fencing_time_to_recover_seconds",
                "From a fenced node's return to its fence undone and its taint removed",
                Histogram::new(buckets()),
            ),
            backend_failures: r.add(
                "volguard_fencing_backend_failures",
                "Fence backend calls that failed or timed out, by backend",
                Family::default(),
            ),
            unhealthy_nodes: r.add(
                "volguard_fencing_unhealthy_nodes",
                "Nodes whose Lease is silent and which are not Ready",
                Gauge::default(),
            ),
            pods_released: r.add(
                "volguard_fencing_pods_released",
                "Terminating pods of released nodes that volguard deleted (the pods PodGC would delete at its next pass)",
                Counter::default(),
            ),
            storm: r.add(
                "volguard_fencing_storm",
                "1 while more nodes are unhealthy than --max-unhealthy-nodes allows (no new fence)",
                Gauge::default(),
            ),
            scope_held: r.add(
                "volguard_fencing_scope_held",
                "Fenced incidents not released because the fence does not cover every volume the node's pods use",
                Gauge::default(),
            ),
            awaiting_person: r.add(
                "volguard_fencing_awaiting_confirmation",
                "Incidents whose manual backend waits for a person to confirm the node down (kubectl volguard fence confirm)",
                Gauge::default(),
            ),
        };
        for p in Phase::ALL {
            let _ = m.incidents.get_or_create(&PhaseLabel { phase: p.as_str() });
        }
        for backend in ["webhook", "networkfence", "manual"] {
            let _ = m.backend_failures.get_or_create(&BackendLabel { backend });
        }
        m
    }
}
