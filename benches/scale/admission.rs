//! Admission at the cluster's size: each volguard webhook's latency as the apiserver measures it
//! (its own histogram) over a StatefulSet churn, round by round against the no-op and the writing
//! no-op registered exactly like volguard; pod creation as a client times it, call by call
//! interleaved across the three (one namespace per mode, as `make bench`'s binds); and the
//! finalizer guard's consistent read of a namespace of 20,000 pods.

use crate::grow;
use crate::procs::proc_stat;
use crate::support::apiserver::*;
use crate::support::harness::{BENCH_MODE, ControlPlane};
use crate::support::objects::{labelled_namespace, metrics_text};
use crate::support::workload::*;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The churn per mode and round: 5 StatefulSets of 20 pods (each with its claim), scheduled
/// through the binds, up to Running and down to gone; and 20 pods created directly per mode,
/// timed by the client.
pub const CHURN_SETS: usize = 5;
pub const CHURN_REPLICAS: i32 = 20;
const ROUNDS: usize = 2;
const DIRECT: usize = 20;

/// A webhook's latency in each mode, as the apiserver measured it.
pub struct Compared {
    pub webhook: String,
    pub calls: f64,
    /// (p50, p99) in ms, per mode: no-op, writing no-op, volguard.
    pub modes: [(f64, f64); 3],
    /// (p50, p99) in ms of the decision alone, as `volguard serve` timed it over the same calls
    /// (its own histogram): the rest of the apiserver's figure is spent outside the rules
    /// (connection, TLS, decode, encode, waiting for a core).
    pub inside: (f64, f64),
}

const MODES: [Hooks; 3] = [Hooks::Noop, Hooks::WritingNoop, Hooks::Volguard];

/// The namespace of a mode's direct pods, labelled for its own registration
/// (`ControlPlane::register_webhooks_by_namespace`).
fn direct_ns(mode: Hooks) -> String {
    format!("direct-{}", mode.name())
}

/// Client-timed pod creates (p50, p99 ms) per mode (no-op, writing no-op, volguard), of the two
/// kinds a cluster makes: a pod its node is named in (a placement: volguard's lock writes, and so
/// does the writing no-op) and a pod the scheduler places later (its create writes nothing).
#[derive(Clone, Copy, Default)]
pub struct ClientTimed {
    pub placed: [(f64, f64); 3],
    pub unplaced: [(f64, f64); 3],
}

/// A mode's direct pods' claims: `0..PLACED_CLAIMS` for the placed creates, as many after them
/// for the unplaced ones.
const PLACED_CLAIMS: usize = DIRECT * ROUNDS;

/// Each mode's namespace, labelled with its mode, and the claims its direct pods use, one fresh
/// claim per create (as `make bench`'s binds): a claim's first placement, not a wait on its
/// predecessor's lock. Created once, bound.
pub async fn prepare(c: &kube::Client) {
    for mode in MODES {
        let ns = direct_ns(mode);
        labelled_namespace(c, &ns, json!({ BENCH_MODE: mode.name() })).await;
        for i in 0..2 * PLACED_CLAIMS {
            grow::create_one(c, &ns, i, None, grow::Parts::Claim, 0)
                .await
                .expect("direct claim");
        }
    }
}

/// Client-timed creates of direct pods `from..from + DIRECT` in each served mode's namespace,
/// each with its fresh RWO claim, interleaved call by call (the mode first in turn rotating, as
/// `make bench`'s binds): one on a named node in every mode, then one left to the scheduler in
/// every mode; then all gone. The times per mode of the placed creates, then of the unplaced ones.
async fn direct_creates(
    cp: &ControlPlane,
    c: &kube::Client,
    served: &[usize],
    from: usize,
) -> ([Vec<f64>; 3], [Vec<f64>; 3]) {
    let total = grow::pod_total(c).await;
    let (mut placed, mut unplaced): ([Vec<f64>; 3], [Vec<f64>; 3]) = Default::default();
    let timed = |m: usize, node: Option<String>, i: usize| async move {
        let ns = direct_ns(MODES[m]);
        let started = Instant::now();
        grow::create_one(c, &ns, i, node.as_deref(), grow::Parts::Pod, 0)
            .await
            .expect("direct pod");
        started.elapsed().as_secs_f64() * 1000.0
    };
    for i in from..from + DIRECT {
        for k in 0..served.len() {
            let m = served[(i + k) % served.len()];
            placed[m].push(timed(m, Some(format!("fleet-{:05}", i % DIRECT)), i).await);
        }
        for k in 0..served.len() {
            let m = served[(i + k) % served.len()];
            unplaced[m].push(timed(m, None, PLACED_CLAIMS + i).await);
        }
    }
    for &m in served {
        let pods = Api::<Pod>::namespaced(c.clone(), &direct_ns(MODES[m]));
        for i in (from..from + DIRECT).chain(PLACED_CLAIMS + from..PLACED_CLAIMS + from + DIRECT) {
            pods.delete(&grow::pod_name(i, 0), &DeleteParams::default())
                .await
                .expect("delete direct pod");
        }
    }
    let started = Instant::now();
    while grow::pod_total(c).await != total {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "direct pods not gone\n{}",
            cp.logs()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    (placed, unplaced)
}

/// The namespace of a mode's StatefulSet churn, labelled as its direct pods' one.
fn churn_ns(mode: Hooks) -> String {
    format!("churn-{}", mode.name())
}

/// Each mode's churn namespace with its StatefulSets, scaled up and down once so that their
/// claims exist (retained) before anything is measured.
pub async fn prepare_churn(cp: &ControlPlane, c: &kube::Client) {
    for mode in MODES {
        let ns = churn_ns(mode);
        labelled_namespace(c, &ns, json!({ BENCH_MODE: mode.name() })).await;
        let api = Api::<StatefulSet>::namespaced(c.clone(), &ns);
        create_statefulsets(&api, "churn", 0..CHURN_SETS, 0).await;
        let pods = Api::<Pod>::namespaced(c.clone(), &ns);
        let up = format!("churn warm-up ({ns})");
        scale_all(cp, &api, &pods, "churn", CHURN_SETS, CHURN_REPLICAS, &up).await;
        let down = format!("churn warm-up gone ({ns})");
        scale_all(cp, &api, &pods, "churn", CHURN_SETS, 0, &down).await;
    }
}

/// Every mode's StatefulSets scaled to `replicas` at once, each in its own namespace; returns
/// when all are there.
async fn scale_modes(
    cp: &ControlPlane,
    c: &kube::Client,
    served: &[usize],
    replicas: i32,
    what: &str,
) {
    let scaled = served.iter().map(|&m| {
        let ns = churn_ns(MODES[m]);
        let api = Api::<StatefulSet>::namespaced(c.clone(), &ns);
        let pods = Api::<Pod>::namespaced(c.clone(), &ns);
        let what = format!("{what} ({ns})");
        async move { scale_all(cp, &api, &pods, "churn", CHURN_SETS, replicas, &what).await }
    });
    futures::future::join_all(scaled).await;
}

/// A by-namespace registration's webhook (`x.bench-<mode>.volguard.io`, see
/// `ControlPlane::register_webhooks_by_namespace`) as the mode's index and volguard's name for it.
fn by_mode(name: &str) -> Option<(usize, String)> {
    MODES.iter().enumerate().find_map(|(m, mode)| {
        let (webhook, rest) = name.split_once(&format!(".bench-{}.", mode.name()))?;
        Some((m, format!("{webhook}.{rest}")))
    })
}

/// How long the comparison waited for kube-apiserver to settle, and its CPU (cores) in each
/// `SETTLE_INTERVAL` meanwhile and over the comparison itself.
#[derive(Clone, Default)]
pub struct Settled {
    pub seconds: f64,
    /// False when `SETTLE_MAX` ran out first.
    pub steady: bool,
    pub cores: Vec<f64>,
    pub cores_during: f64,
}

const SETTLE_INTERVAL: Duration = Duration::from_secs(30);
/// Intervals in a window: steady once a window's mean CPU is within 10 % of the window's before.
/// Means of windows, not intervals one by one: at 5,000 nodes the apiserver's CPU swings every
/// other interval once settled, and intervals within 10 % of each other never came
/// (docs/performance.md, "The twelfth run").
const SETTLE_WINDOW: usize = 4;
const SETTLE_MAX: Duration = Duration::from_secs(900);

fn apiserver_cpu(cp: &ControlPlane) -> f64 {
    let p = cp.apiserver.as_ref().expect("kube-apiserver runs");
    proc_stat(p.child.id()).cpu_seconds
}

/// Whether the last `SETTLE_WINDOW` intervals' mean is within 10 % of the window's before.
fn steady(cores: &[f64]) -> bool {
    let n = cores.len();
    if n < 2 * SETTLE_WINDOW {
        return false;
    }
    let mean = |w: &[f64]| w.iter().sum::<f64>() / w.len() as f64;
    let (before, last) = (
        mean(&cores[n - 2 * SETTLE_WINDOW..n - SETTLE_WINDOW]),
        mean(&cores[n - SETTLE_WINDOW..]),
    );
    (last - before).abs() <= 0.1 * before.max(0.05)
}

/// Wait until kube-apiserver's CPU is steady: after the growth, the cold starts and the peers'
/// LISTs it stays busy for minutes, and latencies measured then are that phase's, not the
/// webhooks' (the eleventh run: the no-op's own pod-create p50 three times the tenth run's).
/// Steady: `steady`, or `SETTLE_MAX`; each interval's rate over the time it really took.
async fn settle(cp: &ControlPlane) -> Settled {
    let started = Instant::now();
    let mut cores = Vec::new();
    let (mut last, mut at) = (apiserver_cpu(cp), Instant::now());
    while !steady(&cores) && started.elapsed() < SETTLE_MAX {
        tokio::time::sleep(SETTLE_INTERVAL).await;
        let now = apiserver_cpu(cp);
        cores.push((now - last) / at.elapsed().as_secs_f64());
        (last, at) = (now, Instant::now());
    }
    Settled {
        seconds: started.elapsed().as_secs_f64(),
        steady: steady(&cores),
        cores,
        cores_during: 0.0,
    }
}

/// `ROUNDS` rounds with every served mode registered at once, each limited to its own namespaces
/// (`ControlPlane::register_webhooks_by_namespace`, as `make bench`'s binds), so that every mode
/// sees the same moment of the cluster: the direct creates interleaved call by call, then the
/// StatefulSet churn of every mode at once, up to Running and down to gone (the apiserver's
/// histogram, per mode by webhook name). Starts once kube-apiserver has settled (`settle`).
/// Leaves volguard registered.
pub async fn compare(
    cp: &mut ControlPlane,
    ports: [u16; 3],
) -> (Vec<Compared>, ClientTimed, Settled) {
    let mut settled = settle(cp).await;
    println!(
        "  kube-apiserver {} in {:.0} s (cores per {} s: {:?})",
        if settled.steady {
            "steady"
        } else {
            "not steady"
        },
        settled.seconds,
        SETTLE_INTERVAL.as_secs(),
        settled.cores
    );
    let (cpu0, t0) = (apiserver_cpu(cp), Instant::now());
    let c = cp.admin().await;
    let want = CHURN_SETS * CHURN_REPLICAS as usize;
    let served: Vec<usize> = (0..MODES.len()).filter(|&m| ports[m] != 0).collect();
    let by_namespace: Vec<(&str, u16)> = served
        .iter()
        .map(|&m| (MODES[m].name(), ports[m]))
        .collect();
    let names: Vec<&str> = by_namespace.iter().map(|(n, _)| *n).collect();
    let mut buckets: [Buckets; 3] = Default::default();
    let mut inside = Buckets::new();
    let mut placed: [Vec<f64>; 3] = Default::default();
    let mut unplaced: [Vec<f64>; 3] = Default::default();
    for round in 0..ROUNDS {
        let locks_before = lock_results(cp).await;
        let inside_before = inside_volguard(cp).await;
        let floor_before = writing_floor(cp, ports[1]).await;
        cp.register_webhooks_by_namespace(&by_namespace).await;
        let (p, u) = direct_creates(cp, &c, &served, round * DIRECT).await;
        for m in &served {
            placed[*m].extend(p[*m].iter().copied());
            unplaced[*m].extend(u[*m].iter().copied());
        }
        let before = apiserver_metrics(&c).await;
        let serve_before = serve_series(&metrics_text(cp.serve_probe).await);
        let up = format!("churn round {round}: {want} pods a mode");
        scale_modes(cp, &c, &served, CHURN_REPLICAS, &up).await;
        let down = format!("churn round {round}: pods gone");
        scale_modes(cp, &c, &served, 0, &down).await;
        let after = apiserver_metrics(&c).await;
        let serve_after = serve_series(&metrics_text(cp.serve_probe).await);
        cp.unregister_webhooks_by_namespace(&names).await;
        let mut all = Buckets::new();
        add_delta(&mut all, &before, &after);
        for (name, series) in all {
            if let Some((m, webhook)) = by_mode(&name) {
                buckets[m].insert(webhook, series);
            }
        }
        add_bucket_delta(&mut inside, &serve_before, serve_after);
        if let Some(before) = floor_before {
            let after = writing_floor(cp, ports[1]).await.unwrap_or_default();
            let d = |k: &str| after.get(k).unwrap_or(&0.0) - before.get(k).unwrap_or(&0.0);
            let per = |k: &str| d(k) / 1e6 / d("written").max(1.0);
            println!(
                "  round {round}: the writing no-op wrote {:.0} times, found nothing to write {:.0} times ({DIRECT} placed creates, {want} binds); inside it, a placement's mean {:.1} ms, its write's {:.1} ms",
                d("written"),
                d("skipped"),
                per("handler_ns"),
                per("write_ns")
            );
        }
        let after = inside_volguard(cp).await;
        let d = |k: &str| after.get(k).unwrap_or(&0.0) - inside_before.get(k).unwrap_or(&0.0);
        let mean = |k: &str| 1000.0 * d(&format!("{k}_sum")) / d(&format!("{k}_count")).max(1.0);
        println!(
            "  round {round}: inside volguard, a placement's mean {:.1} ms ({:.0} calls), its lock write's {:.1} ms ({:.0} writes)",
            mean(PLACEMENT_SECONDS),
            d(&format!("{PLACEMENT_SECONDS}_count")),
            mean(LOCK_WRITE_SECONDS),
            d(&format!("{LOCK_WRITE_SECONDS}_count"))
        );
        let moved: Vec<String> = lock_results(cp)
            .await
            .iter()
            .map(|(k, v)| format!("{k} {:.0}", v - locks_before.get(k).unwrap_or(&0.0)))
            .collect();
        println!(
            "  round {round}: volguard_rwo_locks_total by result over the direct creates and the churn: {}",
            moved.join(", ")
        );
    }
    settled.cores_during = (apiserver_cpu(cp) - cpu0) / t0.elapsed().as_secs_f64();
    println!(
        "  kube-apiserver over the comparison: {:.2} cores",
        settled.cores_during
    );
    cp.route_webhooks_to(ports[2]).await;
    let per_mode: Vec<Vec<Latency>> = buckets
        .iter()
        .map(|b| latencies(b, BTreeMap::new()).0)
        .collect();
    let inside = latencies(&inside, BTreeMap::new()).0;
    let compared = per_mode[2]
        .iter()
        .filter(|v| v.count > 0.0)
        .filter_map(|v| {
            // A mode not run (port 0) reads as zeros.
            let find = |m: usize| -> Option<(f64, f64)> {
                if ports[m] == 0 {
                    return Some((0.0, 0.0));
                }
                let l = per_mode[m].iter().find(|l| l.webhook == v.webhook)?;
                Some((l.p50, l.p99))
            };
            let decided = inside.iter().find(|l| l.webhook == v.webhook);
            Some(Compared {
                webhook: v.webhook.clone(),
                calls: v.count,
                modes: [find(0)?, find(1)?, (v.p50, v.p99)],
                inside: decided.map_or((0.0, 0.0), |l| (l.p50, l.p99)),
            })
        })
        .collect();
    let p50_p99 = |mut v: Vec<f64>| (percentile(&mut v, 0.5), percentile(&mut v, 0.99));
    let timed = ClientTimed {
        placed: placed.map(p50_p99),
        unplaced: unplaced.map(p50_p99),
    };
    (compared, timed, settled)
}

/// serve's `volguard_rwo_locks_total` by result: where a placement's time went (taken, taken
/// over, waited, refused).
async fn lock_results(cp: &ControlPlane) -> BTreeMap<String, f64> {
    metrics_text(cp.serve_probe)
        .await
        .lines()
        .filter(|l| l.starts_with("volguard_rwo_locks_total{"))
        .filter_map(|l| {
            let (series, v) = l.rsplit_once(' ')?;
            Some((series.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// serve's time inside `/validate/rwo-single-node` and inside its lock writes (histograms).
const PLACEMENT_SECONDS: &str = "volguard_admission_request_duration_seconds";
const LOCK_WRITE_SECONDS: &str = "volguard_rwo_lock_write_duration_seconds";

/// serve's `_sum` and `_count` of the placement's and the lock write's durations: beside the
/// writing no-op's own, where a placement's time goes inside each.
async fn inside_volguard(cp: &ControlPlane) -> BTreeMap<String, f64> {
    let text = metrics_text(cp.serve_probe).await;
    let mut out = BTreeMap::new();
    for l in text.lines() {
        let Some((series, v)) = l.rsplit_once(' ') else {
            continue;
        };
        let Ok(v) = v.parse::<f64>() else { continue };
        for name in [PLACEMENT_SECONDS, LOCK_WRITE_SECONDS] {
            for part in ["_sum", "_count"] {
                let Some(rest) = series.strip_prefix(&format!("{name}{part}")) else {
                    continue;
                };
                let placement =
                    name != PLACEMENT_SECONDS || rest.contains("endpoint=\"rwo-single-node\"");
                if placement && (rest.is_empty() || rest.starts_with('{')) {
                    *out.entry(format!("{name}{part}")).or_insert(0.0) += v;
                }
            }
        }
    }
    out
}

/// The writing no-op's counters, when it runs (port 0: it did not fit).
async fn writing_floor(cp: &ControlPlane, port: u16) -> Option<BTreeMap<String, f64>> {
    match port {
        0 => None,
        _ => Some(floor_stats(cp, port).await),
    }
}

/// The finalizer guard in the namespace of 20,000 pods: a strip of claim `data-0` (pod `p-0`
/// uses it) refused ten times in a row, each timed by the client; and `volguard serve`'s peak RSS
/// before and after.
pub struct Guarded {
    pub pods: usize,
    pub p50_ms: f64,
    pub max_ms: f64,
    pub refused: bool,
    pub peak_before: u64,
    pub peak_after: u64,
}

pub async fn guard_big_namespace(cp: &ControlPlane, c: &kube::Client, pods: usize) -> Guarded {
    let ns = grow::namespace_of(0);
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), &ns);
    let pid = cp.serve.as_ref().map(|p| p.child.id()).unwrap_or(0);
    let peak_before = proc_stat(pid).peak_bytes;
    let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let mut ms = Vec::new();
    let mut refused = true;
    for _ in 0..10 {
        let started = Instant::now();
        let r = pvcs
            .patch(&grow::claim_of(0), &PatchParams::default(), &strip)
            .await;
        ms.push(started.elapsed().as_secs_f64() * 1000.0);
        let named = matches!(&r, Err(kube::Error::Api(s)) if s.message.contains("p-0"));
        if !named {
            println!("finalizer strip in {ns}: not refused naming p-0: {r:?}");
        }
        refused &= named;
    }
    let max_ms = ms.iter().cloned().fold(0.0, f64::max);
    Guarded {
        pods,
        p50_ms: percentile(&mut ms, 0.5),
        max_ms,
        refused,
        peak_before,
        peak_after: proc_stat(pid).peak_bytes,
    }
}
