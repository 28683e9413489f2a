//! Controller metrics, registered beside the shared registry on the probe port.

use crate::runtime::MetricsRegistry;
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClassLabels {
    pub namespace: String,
    pub storageclass: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PvcLabels {
    pub namespace: String,
    pub persistentvolumeclaim: String,
    pub storageclass: String,
}

pub struct ControllerMetrics {
    pub unused_pvcs: Family<ClassLabels, Gauge>,
    pub unused_bytes: Family<ClassLabels, Gauge>,
    /// Per-PVC idle seconds: one series per unused PVC, so only behind `--per-pvc-unused-metrics`.
    pub unused_seconds: Family<PvcLabels, Gauge>,
    pub queue_depth: Gauge,
    pub reconciles: Family<ResultLabel, Counter>,
    pub finalizers_removed: Family<ResourceLabel, Counter>,
    pub finalizers_added: Family<ResourceLabel, Counter>,
    pub consistent_lists: Counter,
    pub blocked_pvcs: Gauge,
    pub leader: Gauge,
    pub multi_node_rwo: Gauge,
    /// Stale RWO locks cleared (rules.md §2f "the controller cleans up").
    pub locks_cleared: Counter,
    /// Overrides lifted because they count for nothing until set again (rules.md §8).
    pub overrides_lifted: Family<ResourceLabel, Counter>,
    /// Lifts refused for another reason than the object having changed (RBAC, a policy).
    pub override_lift_failures: Family<ResourceLabel, Counter>,
}

impl ControllerMetrics {
    pub fn register(r: &MetricsRegistry) -> Self {
        let c = ControllerMetrics {
            queue_depth: r.add(
                "volguard_controller_queue_depth",
                "Keys waiting in the work queue",
                Gauge::default(),
            ),
            reconciles: r.add(
                "volguard_controller_reconciles",
                "Reconciles by result",
                Family::default(),
            ),
            finalizers_removed: r.add(
                "volguard_controller_finalizer_removals",
                "Protection finalizers removed",
                Family::default(),
            ),
            finalizers_added: r.add(
                "volguard_controller_finalizer_additions",
                "Protection finalizers added (backfill)",
                Family::default(),
            ),
            consistent_lists: r.add(
                "volguard_controller_consistent_lists",
                "Consistent pod LISTs issued before releasing PVCs",
                Counter::default(),
            ),
            blocked_pvcs: r.add(
                "volguard_controller_blocked_terminating_pvcs",
                "Terminating PVCs kept because pods use them",
                Gauge::default(),
            ),
            unused_pvcs: r.add(
                "volguard_unused_pvcs",
                "Bound PVCs no non-terminal pod uses (KEP-5541), by namespace and StorageClass",
                Family::default(),
            ),
            unused_bytes: r.add(
                "volguard_unused_pvc_requested_bytes",
                "Requested storage of unused PVCs, by namespace and StorageClass",
                Family::default(),
            ),
            leader: r.add(
                "volguard_controller_leader",
                "1 while this replica leads",
                Gauge::default(),
            ),
            multi_node_rwo: r.add(
                "volguard_pvcs_multi_node_rwo",
                "ReadWriteOnce PVCs that pods on more than one node use at once (rules.md §2f; each also gets a MultiNodeRWO event)",
                Gauge::default(),
            ),
            locks_cleared: r.add(
                "volguard_controller_rwo_locks_cleared",
                "ReadWriteOnce locks removed because their pod is gone, ended, replaced or never bound (read live)",
                Counter::default(),
            ),
            overrides_lifted: r.add(
                "volguard_controller_overrides_lifted",
                "A person's overrides on claims and volumes removed once expired, so that setting one again renews it",
                Family::default(),
            ),
            override_lift_failures: r.add(
                "volguard_controller_override_lift_failures",
                "Lifts of expired overrides refused (RBAC, a policy): retried after 5 minutes",
                Family::default(),
            ),
            // Registered only behind `--per-pvc-unused-metrics` (`register_per_pvc`).
            unused_seconds: Family::default(),
        };
        // Every known series exists from the start, at 0: `rate()` then reads 0, not "no data",
        // and an absent series means a scrape problem, not a quiet controller.
        for resource in ["pvc", "pv"] {
            let _ = c
                .overrides_lifted
                .get_or_create(&ResourceLabel { resource });
            let _ = c
                .override_lift_failures
                .get_or_create(&ResourceLabel { resource });
        }
        for resource in ["pvc", "pv"] {
            let _ = c
                .finalizers_added
                .get_or_create(&ResourceLabel { resource });
            let _ = c
                .finalizers_removed
                .get_or_create(&ResourceLabel { resource });
        }
        for result in ["success", "retry"] {
            let _ = c.reconciles.get_or_create(&ResultLabel { result });
        }
        c
    }

    pub fn register_per_pvc(&self, r: &MetricsRegistry) {
        r.register(
            "volguard_pvc_unused_seconds",
            "Seconds since each unused PVC was last used (known times only)",
            self.unused_seconds.clone(),
        )
    }

    /// Replace the unused-storage gauges with the content of `report`.
    pub fn set_unused(&self, report: &crate::report::Report, per_pvc: bool) {
        self.unused_pvcs.clear();
        self.unused_bytes.clear();
        self.unused_seconds.clear();
        for r in &report.items {
            let l = ClassLabels {
                namespace: r.namespace.clone(),
                storageclass: r.storage_class.clone(),
            };
            self.unused_pvcs.get_or_create(&l).inc();
            self.unused_bytes
                .get_or_create(&l)
                .inc_by(i64::try_from(r.requested_bytes.unwrap_or(0)).unwrap_or(i64::MAX));
            if per_pvc && let Some(idle) = r.idle_seconds {
                self.unused_seconds
                    .get_or_create(&PvcLabels {
                        namespace: r.namespace.clone(),
                        persistentvolumeclaim: r.name.clone(),
                        storageclass: r.storage_class.clone(),
                    })
                    .set(idle);
            }
        }
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
