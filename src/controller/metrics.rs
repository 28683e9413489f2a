//! Controller metrics, registered beside the shared registry on the probe port.

use crate::server::metrics::Metrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabel {
    pub resource: &'static str,
}

pub struct ControllerMetrics {
    pub queue_depth: Gauge,
    pub reconciles: Family<ResultLabel, Counter>,
    pub finalizers_removed: Family<ResourceLabel, Counter>,
    pub finalizers_added: Family<ResourceLabel, Counter>,
    pub consistent_lists: Counter,
    pub blocked_pvcs: Gauge,
    pub leader: Gauge,
}

impl ControllerMetrics {
    pub fn register(m: &Metrics) -> Self {
        let c = ControllerMetrics {
            queue_depth: Gauge::default(),
            reconciles: Family::default(),
            finalizers_removed: Family::default(),
            finalizers_added: Family::default(),
            consistent_lists: Counter::default(),
            blocked_pvcs: Gauge::default(),
            leader: Gauge::default(),
        };
        m.with_registry(|r| {
            r.register(
                "volguard_controller_queue_depth",
                "Keys waiting in the work queue",
                c.queue_depth.clone(),
            );
            r.register(
                "volguard_controller_reconciles",
                "Reconciles by result",
                c.reconciles.clone(),
            );
            r.register(
                "volguard_controller_finalizer_removals",
                "Protection finalizers removed",
                c.finalizers_removed.clone(),
            );
            r.register(
                "volguard_controller_finalizer_additions",
                "Protection finalizers added (backfill)",
                c.finalizers_added.clone(),
            );
            r.register(
                "volguard_controller_consistent_lists",
                "Consistent pod LISTs issued before releasing PVCs",
                c.consistent_lists.clone(),
            );
            r.register(
                "volguard_controller_blocked_terminating_pvcs",
                "Terminating PVCs kept because pods use them",
                c.blocked_pvcs.clone(),
            );
            r.register(
                "volguard_controller_leader",
                "1 while this replica leads",
                c.leader.clone(),
            );
        });
        c
    }
}
