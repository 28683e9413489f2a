//! What the apiserver measured of volguard's webhooks: its own admission histogram and rejection
//! counters read from `/metrics`, as Prometheus' `histogram_quantile` would read them.

use std::collections::BTreeMap;

pub async fn apiserver_metrics(c: &kube::Client) -> String {
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("req");
    c.request_text(req).await.expect("apiserver metrics")
}

/// Percentiles of one webhook's admission latency from the apiserver's own histogram.
pub struct Latency {
    pub webhook: String,
    pub count: f64,
    pub p50: f64,
    pub p99: f64,
}

/// `apiserver_admission_webhook_admission_duration_seconds` per volguard webhook (p50/p99 by
/// linear interpolation in the buckets, as Prometheus' histogram_quantile does) and
/// `apiserver_admission_webhook_rejection_count` by error type, as the apiserver measured them.
/// Only what happened between the two scrapes `before` and `after` counts.
pub fn webhook_figures(before: &str, after: &str) -> (Vec<Latency>, BTreeMap<String, f64>) {
    let (b0, r0) = webhook_series(before);
    let (mut buckets, mut rejections) = webhook_series(after);
    for (name, series) in buckets.iter_mut() {
        for (le, n) in series.iter_mut() {
            *n -= b0.get(name).and_then(|s| s.get(le)).copied().unwrap_or(0.0);
        }
    }
    for (k, v) in rejections.iter_mut() {
        *v -= r0.get(k).copied().unwrap_or(0.0);
    }
    rejections.retain(|_, v| *v > 0.0);
    buckets.retain(|_, s| s.values().last().copied().unwrap_or(0.0) > 0.0);
    latencies(&buckets, rejections)
}

pub type Buckets = BTreeMap<String, BTreeMap<u64, f64>>;

/// volguard's webhooks' histogram buckets (by upper bound in µs) and rejection counters.
pub fn webhook_series(metrics: &str) -> (Buckets, BTreeMap<String, f64>) {
    let label = |line: &str, key: &str| -> Option<String> {
        let start = line.find(&format!("{key}=\""))? + key.len() + 2;
        let end = line[start..].find('"')? + start;
        Some(line[start..end].to_string())
    };
    let value = |line: &str| line.rsplit(' ').next()?.parse::<f64>().ok();
    let mut buckets = Buckets::new();
    let mut rejections = BTreeMap::new();
    for line in metrics.lines() {
        if line.starts_with("apiserver_admission_webhook_admission_duration_seconds_bucket{") {
            let (Some(name), Some(le), Some(v)) =
                (label(line, "name"), label(line, "le"), value(line))
            else {
                continue;
            };
            if !name.ends_with("volguard.io") {
                continue;
            }
            let le_us = if le == "+Inf" {
                u64::MAX
            } else {
                (le.parse::<f64>().unwrap_or(0.0) * 1e6) as u64
            };
            *buckets.entry(name).or_default().entry(le_us).or_default() += v;
        } else if line.starts_with("apiserver_admission_webhook_rejection_count{") {
            let (Some(name), Some(kind), Some(v)) =
                (label(line, "name"), label(line, "error_type"), value(line))
            else {
                continue;
            };
            if name.ends_with("volguard.io") {
                *rejections.entry(format!("{name} {kind}")).or_default() += v;
            }
        }
    }
    (buckets, rejections)
}

pub fn latencies(
    buckets: &Buckets,
    rejections: BTreeMap<String, f64>,
) -> (Vec<Latency>, BTreeMap<String, f64>) {
    let quantile = |b: &BTreeMap<u64, f64>, q: f64| -> f64 {
        let total = b.values().last().copied().unwrap_or(0.0);
        let rank = q * total;
        let (mut prev_le, mut prev_n) = (0u64, 0.0);
        for (&le, &n) in b {
            if n >= rank {
                if le == u64::MAX {
                    return prev_le as f64 / 1e3;
                }
                let frac = if n > prev_n {
                    (rank - prev_n) / (n - prev_n)
                } else {
                    0.0
                };
                return (prev_le as f64 + frac * (le - prev_le) as f64) / 1e3;
            }
            (prev_le, prev_n) = (le, n);
        }
        0.0
    };
    let lat = buckets
        .iter()
        .map(|(w, b)| Latency {
            webhook: w.clone(),
            count: b.values().last().copied().unwrap_or(0.0),
            p50: quantile(b, 0.5),
            p99: quantile(b, 0.99),
        })
        .collect();
    (lat, rejections)
}

pub fn percentile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
}

/// `volguard serve`'s own `volguard_admission_request_duration_seconds` (the decision alone:
/// from the decoded review to the verdict) as buckets keyed like the apiserver's, by webhook
/// name (`<endpoint>.volguard.io`): beside the apiserver's, what a call spends outside the rules.
pub fn serve_series(metrics: &str) -> Buckets {
    let mut buckets = Buckets::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("volguard_admission_request_duration_seconds_bucket{")
        else {
            continue;
        };
        let label = |key: &str| -> Option<&str> {
            let start = rest.find(&format!("{key}=\""))? + key.len() + 2;
            let end = rest[start..].find('"')? + start;
            Some(&rest[start..end])
        };
        let (Some(endpoint), Some(le), Some(v)) = (
            label("endpoint"),
            label("le"),
            line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()),
        ) else {
            continue;
        };
        let le_us = match le {
            "+Inf" => u64::MAX,
            _ => (le.parse::<f64>().unwrap_or(0.0) * 1e6) as u64,
        };
        *buckets
            .entry(format!("{endpoint}.volguard.io"))
            .or_default()
            .entry(le_us)
            .or_default() += v;
    }
    buckets
}

/// Add what each of volguard's webhook buckets counted between the scrapes `before` and `after`
/// to `acc`.
pub fn add_delta(acc: &mut Buckets, before: &str, after: &str) {
    add_bucket_delta(acc, &webhook_series(before).0, webhook_series(after).0);
}

/// Add `b1 - b0`, bucket by bucket, to `acc`.
pub fn add_bucket_delta(acc: &mut Buckets, b0: &Buckets, b1: Buckets) {
    for (name, series) in b1 {
        for (le, n) in series {
            let was = b0
                .get(&name)
                .and_then(|s| s.get(&le))
                .copied()
                .unwrap_or(0.0);
            *acc.entry(name.clone()).or_default().entry(le).or_default() += n - was;
        }
    }
}
