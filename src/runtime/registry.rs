//! One Prometheus registry per process, rendered in the text exposition format on `/metrics`.
//! Subsystems register their own families into it (admission, controller), so a process
//! exports only the series of the jobs it runs.

use prometheus_client::registry::{Metric, Registry};
use std::sync::Mutex;

type Hook = Box<dyn Fn() + Send + Sync>;

#[derive(Default)]
pub struct MetricsRegistry {
    registry: Mutex<Registry>,
    /// Run before each render: gauges read from their source at scrape time.
    on_scrape: Mutex<Vec<Hook>>,
}

impl MetricsRegistry {
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        self.registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .register(name, help, metric);
    }

    /// Register `metric` and hand it back: a metric is a shared handle, so the one registered
    /// and the one returned are the same series.
    pub fn add<M: Metric + Clone>(&self, name: &str, help: &str, metric: M) -> M {
        self.register(name, help, metric.clone());
        metric
    }

    /// Call `hook` before every scrape (e.g. to set a gauge from its source).
    pub fn on_scrape(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.on_scrape
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(hook));
    }

    pub fn render(&self) -> String {
        for hook in self
            .on_scrape
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            hook();
        }
        let mut out = String::new();
        let r = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        if prometheus_client::encoding::text::encode(&mut out, &r).is_err() {
            out.clear();
        }
        out
    }
}
