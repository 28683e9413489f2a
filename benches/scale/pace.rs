//! Where a churn window's time went, seen from the cluster's side: the CPU each process and the
//! machine spent, what the apiserver served by kind and answer, the watchers it closed, how long
//! API Priority and Fairness queued requests, and each churned pod's own timestamps (created,
//! scheduled, ready). Windows of one setup have differed by ×2.3 whoever ran (docs/performance.md):
//! these figures say which part of the cluster took the extra time.

use crate::load::{Sample, label};
use crate::procs::proc_stat;
use crate::support::harness::ControlPlane;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;

/// CPU seconds so far of each of the cluster's processes, and of the whole machine.
pub struct Cpu {
    by_process: Vec<(String, f64)>,
    machine: MachineCpu,
}

#[derive(Clone, Copy, Default)]
struct MachineCpu {
    busy: f64,
    idle: f64,
}

/// The machine's busy and idle CPU seconds (all cores) from /proc/stat's first line.
fn machine_cpu() -> MachineCpu {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("cpu "))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // user nice system idle iowait irq softirq steal (guest time is counted in user already).
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0.0) / hz;
    let idle = at(3) + at(4);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    MachineCpu { busy, idle }
}

/// Every process of the cluster (`procs::components`), kcm-protection's when it runs.
pub fn cpu(cp: &ControlPlane, beside: Option<(&str, u32)>) -> Cpu {
    let mut by_process: Vec<(String, f64)> = crate::procs::components(cp)
        .into_iter()
        .map(|(name, s)| (name, s.cpu_seconds))
        .collect();
    if let Some((name, pid)) = beside {
        by_process.push((name.into(), proc_stat(pid).cpu_seconds));
    }
    Cpu {
        by_process,
        machine: machine_cpu(),
    }
}

/// One churn seen from the cluster's side.
#[derive(Clone, Debug, Default)]
pub struct Pace {
    /// CPU seconds each process spent during the churn, most first.
    pub cpu: Vec<(String, f64)>,
    /// The machine's busy and idle CPU seconds during the churn (all cores).
    pub machine_busy: f64,
    pub machine_idle: f64,
    /// The apiserver's requests by `VERB resource[/subresource] code`, most first (ten).
    pub requests: Vec<(String, f64)>,
    /// Watchers the apiserver closed for not keeping up, by resource
    /// (`apiserver_terminated_watchers_total`): each one's client lists again.
    pub terminated_watchers: Vec<(String, f64)>,
    /// Each APF priority level's requests and their mean wait in its queues, in ms.
    pub apf_wait_ms: Vec<(String, f64, f64)>,
    pub pods: Timings,
}

impl Pace {
    /// What the cluster did between two moments (`cpu` and `sample` taken together at each).
    pub fn between(c0: &Cpu, c1: &Cpu, s0: &Sample, s1: &Sample) -> Pace {
        let mut cpu: Vec<(String, f64)> = c1
            .by_process
            .iter()
            .map(|(name, v)| {
                let before = c0
                    .by_process
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(0.0, |(_, v)| *v);
                (name.clone(), v - before)
            })
            .collect();
        cpu.sort_by(|a, b| b.1.total_cmp(&a.1));
        let requests = top(
            deltas(s0, s1, "apiserver_request_total", |l| {
                let sub = label(l, "subresource").unwrap_or("");
                let resource = label(l, "resource").unwrap_or("");
                let resource = if sub.is_empty() {
                    resource.to_string()
                } else {
                    format!("{resource}/{sub}")
                };
                Some(format!(
                    "{} {resource} {}",
                    label(l, "verb")?,
                    label(l, "code").unwrap_or("")
                ))
            }),
            10,
        );
        let terminated_watchers = top(
            deltas(s0, s1, "apiserver_terminated_watchers_total", |l| {
                Some(label(l, "resource").unwrap_or("").to_string())
            }),
            10,
        );
        let by_level = |name: &str| {
            deltas(s0, s1, name, |l| {
                (label(l, "execute") != Some("false"))
                    .then(|| label(l, "priority_level").map(str::to_string))?
            })
        };
        let sums = by_level("apiserver_flowcontrol_request_wait_duration_seconds_sum");
        let counts = by_level("apiserver_flowcontrol_request_wait_duration_seconds_count");
        let mut apf_wait_ms: Vec<(String, f64, f64)> = counts
            .iter()
            .filter(|(_, n)| **n > 0.0)
            .map(|(level, n)| {
                let s = sums.get(level).copied().unwrap_or(0.0);
                (level.clone(), *n, 1000.0 * s / n)
            })
            .collect();
        apf_wait_ms.sort_by(|a, b| b.1.total_cmp(&a.1));
        Pace {
            cpu,
            machine_busy: c1.machine.busy - c0.machine.busy,
            machine_idle: c1.machine.idle - c0.machine.idle,
            requests,
            terminated_watchers,
            apf_wait_ms,
            pods: Timings::default(),
        }
    }

    /// The pod status patches the apiserver stored in the window (kwok's, for every node): two per
    /// churned pod when the fleet plays each pod once, more when it read every pod again.
    pub fn status_patches(&self) -> f64 {
        self.requests
            .iter()
            .filter(|(k, _)| k.starts_with("PATCH pods/status 2"))
            .map(|(_, n)| n)
            .sum()
    }

    /// The window as lines of the report.
    pub fn lines(&self) -> Vec<String> {
        let pairs = |v: &[(String, f64)]| {
            v.iter()
                .map(|(k, n)| format!("{k} {n:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let apf: Vec<String> = self
            .apf_wait_ms
            .iter()
            .map(|(level, n, ms)| format!("{level} {n:.0} × {ms:.1} ms"))
            .collect();
        let p = &self.pods;
        let series = |v: &[usize]| {
            v.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        vec![
            format!(
                "CPU s: {}; machine busy {:.0}, idle {:.0}",
                pairs(&self.cpu),
                self.machine_busy,
                self.machine_idle
            ),
            format!("apiserver requests: {}", pairs(&self.requests)),
            format!(
                "watchers closed for lagging: {}; APF queue wait: {}",
                if self.terminated_watchers.is_empty() {
                    "none".to_string()
                } else {
                    pairs(&self.terminated_watchers)
                },
                apf.join(", ")
            ),
            format!(
                "pods ({} of {}): scheduled after created p50/p99/max {:.0}/{:.0}/{:.0} s, ready after scheduled {:.0}/{:.0}/{:.0} s, last ready {:.0} s after the first create",
                p.seen,
                p.expected,
                p.scheduled_after_created[0],
                p.scheduled_after_created[1],
                p.scheduled_after_created[2],
                p.ready_after_scheduled[0],
                p.ready_after_scheduled[1],
                p.ready_after_scheduled[2],
                p.last_ready
            ),
            format!(
                "per {BUCKET} s from the first create: created [{}] scheduled [{}] ready [{}]",
                series(&p.created),
                series(&p.scheduled),
                series(&p.ready)
            ),
        ]
    }

    pub fn json(&self) -> serde_json::Value {
        let map = |v: &[(String, f64)]| v.iter().cloned().collect::<BTreeMap<_, _>>();
        let p = &self.pods;
        serde_json::json!({
            "cpu_seconds": map(&self.cpu),
            "machine_busy_seconds": self.machine_busy,
            "machine_idle_seconds": self.machine_idle,
            "apiserver_requests": map(&self.requests),
            "terminated_watchers": map(&self.terminated_watchers),
            "apf_wait_ms": self.apf_wait_ms.iter().map(|(l, n, ms)| (l.clone(), serde_json::json!({"requests": n, "mean_ms": ms}))).collect::<BTreeMap<_, _>>(),
            "pods": {
                "seen": p.seen, "expected": p.expected,
                "scheduled_after_created_seconds": p.scheduled_after_created,
                "ready_after_scheduled_seconds": p.ready_after_scheduled,
                "last_ready_after_first_create_seconds": p.last_ready,
                "bucket_seconds": BUCKET,
                "created": p.created, "scheduled": p.scheduled, "ready": p.ready,
            },
        })
    }
}

/// Metric `name`'s change between two samples, summed by the key `key` makes of its labels.
fn deltas(
    a: &Sample,
    b: &Sample,
    name: &str,
    key: impl Fn(&str) -> Option<String>,
) -> BTreeMap<String, f64> {
    let series = |text: &str| {
        let mut m: BTreeMap<String, f64> = BTreeMap::new();
        for l in text.lines() {
            let Some(rest) = l.strip_prefix(name).and_then(|r| r.strip_prefix('{')) else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            if let (Some(k), Ok(v)) = (key(labels), value.trim().parse::<f64>()) {
                *m.entry(k).or_default() += v;
            }
        }
        m
    };
    let (before, after) = (series(&a.text), series(&b.text));
    after
        .into_iter()
        .map(|(k, v)| {
            let d = v - before.get(&k).copied().unwrap_or(0.0);
            (k, d)
        })
        .filter(|(_, d)| *d > 0.0)
        .collect()
}

fn top(m: BTreeMap<String, f64>, n: usize) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v.truncate(n);
    v
}

/// The width of the timings' buckets, in seconds.
const BUCKET: i64 = 10;

/// The churned pods' own timestamps, each to the second: the apiserver's (created, and the
/// `PodScheduled` condition its binding writes) and kwok's (`Ready`).
#[derive(Clone, Debug, Default)]
pub struct Timings {
    pub expected: usize,
    /// Pods found with all three timestamps.
    pub seen: usize,
    /// p50, p99 and max, in seconds.
    pub scheduled_after_created: [f64; 3],
    pub ready_after_scheduled: [f64; 3],
    /// The last pod's `Ready` since the first pod's creation.
    pub last_ready: f64,
    /// The last pod's `Ready`, in Unix seconds.
    pub last_ready_at: Option<i64>,
    /// Pods created, scheduled and ready in each `BUCKET` seconds from the first creation.
    pub created: Vec<usize>,
    pub scheduled: Vec<usize>,
    pub ready: Vec<usize>,
}

fn condition_time(p: &Pod, kind: &str) -> Option<i64> {
    crate::support::objects::condition_time(p, kind).map(|t| t.as_second())
}

/// The timings of pods `from..to` of `generation` (read after the window's measures: the
/// listing's own cost is not the window's).
pub async fn timings(c: &kube::Client, from: usize, to: usize, generation: usize) -> Timings {
    let names: std::collections::HashSet<String> = (from..to)
        .map(|i| crate::grow::pod_name(i, generation))
        .collect();
    let namespaces: std::collections::BTreeSet<String> =
        (from..to).map(crate::grow::namespace_of).collect();
    let mut stamps: Vec<(i64, i64, i64)> = Vec::new();
    for ns in namespaces {
        let Ok(list) = Api::<Pod>::namespaced(c.clone(), &ns)
            .list(&ListParams::default())
            .await
        else {
            continue;
        };
        for p in list.items {
            if !p.metadata.name.as_ref().is_some_and(|n| names.contains(n)) {
                continue;
            }
            let created = p
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second());
            if let (Some(c), Some(s), Some(r)) = (
                created,
                condition_time(&p, "PodScheduled"),
                condition_time(&p, "Ready"),
            ) {
                stamps.push((c, s, r));
            }
        }
    }
    summarize(&stamps, to - from)
}

/// Percentiles and buckets of (created, scheduled, ready) seconds.
fn summarize(stamps: &[(i64, i64, i64)], expected: usize) -> Timings {
    let Some(first) = stamps.iter().map(|s| s.0).min() else {
        return Timings {
            expected,
            ..Timings::default()
        };
    };
    let pct = |mut v: Vec<i64>| -> [f64; 3] {
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] as f64;
        [at(0.5), at(0.99), at(1.0)]
    };
    let buckets = |f: &dyn Fn(&(i64, i64, i64)) -> i64| {
        let mut b: Vec<usize> = Vec::new();
        for s in stamps {
            let i = ((f(s) - first).max(0) / BUCKET) as usize;
            if b.len() <= i {
                b.resize(i + 1, 0);
            }
            b[i] += 1;
        }
        b
    };
    Timings {
        expected,
        seen: stamps.len(),
        scheduled_after_created: pct(stamps.iter().map(|s| s.1 - s.0).collect()),
        ready_after_scheduled: pct(stamps.iter().map(|s| s.2 - s.1).collect()),
        last_ready: stamps
            .iter()
            .map(|s| s.2)
            .max()
            .map_or(0.0, |r| (r - first) as f64),
        last_ready_at: stamps.iter().map(|s| s.2).max(),
        created: buckets(&|s| s.0),
        scheduled: buckets(&|s| s.1),
        ready: buckets(&|s| s.2),
    }
}
