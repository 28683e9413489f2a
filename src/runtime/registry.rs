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

    /// The Prometheus text format (0.0.4), for scrapers that do not ask for OpenMetrics.
    pub fn render_prometheus(&self) -> String {
        to_prometheus_text(&self.render())
    }

    /// OpenMetrics text.
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

/// OpenMetrics text as the Prometheus text format 0.0.4. prometheus-client encodes only
/// OpenMetrics; the differences are few and mechanical, so this rewrites its output rather than
/// encoding twice: a counter's family is named with its `_total` suffix, an info family is a
/// gauge named `_info`, `# UNIT` and `# EOF` go, and exemplars are dropped.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            help = Some((name, text));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (family, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "gauge" | "histogram" | "summary" => (name.to_string(), kind),
                _ => (name.to_string(), "untyped"),
            };
            if let Some((h, text)) = help.take()
                && h == name
            {
                out.push_str(&format!("# HELP {family} {text}\n"));
            }
            out.push_str(&format!("# TYPE {family} {kind}\n"));
            continue;
        }
        // A sample; an exemplar follows ` # ` (OpenMetrics only).
        let sample = line.split(" # ").next().unwrap_or(line);
        out.push_str(sample);
        out.push('\n');
    }
    out
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
