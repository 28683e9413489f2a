//! `make bench`'s measures that resolve a p99: calls timed one by one by this client, in the same
//! interleaved run as the churn. The apiserver's webhook histogram has buckets at 5, 25, 100 and
//! 500 ms, so a p99 from a few hundred calls lands inside a bucket and two runs disagreed by up to
//! 2×; a client's clock resolves microseconds. Each mode's figure is also given for the first and
//! the second half of the rounds, so one run shows whether it would agree with another.
//!
//! - binds: `pods/binding` of fresh pods on fresh RWO claims (every bind takes a lock), with no
//!   webhook, the no-op floor, the *writing* floor (one resourceVersion-checked write onto the
//!   claim per bind: the least a lock can cost) and volguard;
//! - claim creates: none, volguard's webhook, and the MutatingAdmissionPolicy that replaces it;
//! - lock writes per 100 StatefulSet pod restarts that land on the node holding the lock.

use super::*;
use harness::BENCH_MODE;

/// Where each mode's webhooks are served.
#[derive(Clone, Copy)]
pub(super) struct Ports {
    pub floor: u16,
    pub writing: u16,
    pub volguard: u16,
}

/// One mode's samples (ms), by round.
#[derive(Default, Clone)]
pub(super) struct Samples(Vec<Vec<f64>>);

impl Samples {
    fn push_round(&mut self, v: Vec<f64>) {
        self.0.push(v);
    }
    fn all(&self) -> Vec<f64> {
        self.0.iter().flatten().copied().collect()
    }
    fn half(&self, second: bool) -> Vec<f64> {
        let mid = self.0.len() / 2;
        let rounds = if second {
            &self.0[mid..]
        } else {
            &self.0[..mid]
        };
        rounds.iter().flatten().copied().collect()
    }
    /// p50 and p99 of all rounds, and how far the two halves' p99s are apart (max/min − 1).
    pub fn figures(&self) -> (usize, f64, f64, f64, f64) {
        let mut all = self.all();
        let n = all.len();
        let (p50, p99) = (percentile(&mut all, 0.5), percentile(&mut all, 0.99));
        let spread = |q: f64| {
            let (mut a, mut b) = (self.half(false), self.half(true));
            let (x, y) = (percentile(&mut a, q), percentile(&mut b, q));
            x.max(y) / x.min(y).max(1e-9) - 1.0
        };
        (n, p50, p99, spread(0.5), spread(0.99))
    }
}

/// volguard's RWO lock writes so far (`volguard_rwo_locks_total`, taken and taken over).
fn lock_writes(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("volguard_rwo_locks_total{") && l.contains("result=\"taken"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Every `volguard_rwo_locks_total` series, by its result label.
fn lock_results(metrics: &str) -> BTreeMap<String, f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with("volguard_rwo_locks_total{"))
        .filter_map(|l| {
            let result = l.split("result=\"").nth(1)?.split('"').next()?.to_string();
            Some((result, l.rsplit(' ').next()?.parse::<f64>().ok()?))
        })
        .collect()
}

/// Each series of one of volguard's histograms, by its label value: (count, sum of seconds).
fn histogram_totals(metrics: &str, name: &str) -> BTreeMap<String, (f64, f64)> {
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for l in metrics.lines() {
        let (series, value) = match l.rsplit_once(' ') {
            Some((s, v)) => (s, v.parse::<f64>().unwrap_or(0.0)),
            None => continue,
        };
        let Some(rest) = series.strip_prefix(name) else {
            continue;
        };
        let (field, label) = match rest.split_once('{') {
            Some((f, l)) => (f, l.trim_end_matches('}').to_string()),
            None => (rest, String::new()),
        };
        let e = out.entry(label).or_default();
        match field {
            "_count" => e.0 += value,
            "_sum" => e.1 += value,
            _ => {}
        }
    }
    out
}

/// Where a bind's time goes inside each writing webhook (ms, means over the timed binds):
/// the bind's handler, its write, and the admission calls that write caused (PVC UPDATE).
#[derive(Default)]
struct Inside {
    binds: f64,
    handler_s: f64,
    write_s: f64,
    nested_calls: f64,
    nested_s: f64,
}

impl Inside {
    fn row(&self, mode: &str) -> String {
        let per = |x: f64| x / self.binds.max(1.0);
        format!(
            "{mode:<36} {:>5} {:>10.3} {:>10.3} {:>12.2} {:>12.3}",
            self.binds,
            per(self.handler_s) * 1e3,
            per(self.write_s) * 1e3,
            per(self.nested_calls),
            self.nested_s / self.nested_calls.max(1.0) * 1e3
        )
    }
}

const DURATION: &str = "volguard_admission_request_duration_seconds";
const LOCK_WRITE: &str = "volguard_rwo_lock_write_duration_seconds";

/// volguard's side of `Inside` between two scrapes.
fn volguard_inside(before: &str, after: &str) -> Inside {
    let delta = |name: &str| {
        let (b, a) = (
            histogram_totals(before, name),
            histogram_totals(after, name),
        );
        a.into_iter()
            .map(|(k, (c, s))| {
                let (bc, bs) = b.get(&k).copied().unwrap_or_default();
                (k, (c - bc, s - bs))
            })
            .collect::<BTreeMap<_, _>>()
    };
    let mut inside = Inside::default();
    for (label, (c, s)) in delta(DURATION) {
        if label.contains("rwo-single-node") {
            inside.binds += c;
            inside.handler_s += s;
        } else {
            inside.nested_calls += c;
            inside.nested_s += s;
        }
    }
    for (_, (_, s)) in delta(LOCK_WRITE) {
        inside.write_s += s;
    }
    inside
}

/// A fresh RWO claim and a pod naming it that no scheduler binds (`schedulerName` of nobody).
async fn unbound_pod(c: &kube::Client, ns: &str, name: &str) {
    pvc(c, ns, name, None).await.expect("claim");
    let mut p = pod_json(name, None, &[name], 1);
    if let Some(s) = p.spec.as_mut() {
        s.scheduler_name = Some("volguard-bench-nobody".into());
    }
    Api::<Pod>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &p)
        .await
        .expect("pod");
}

/// POST `pods/NAME/binding` to `node`, timed (ms).
async fn bind(pods: &Api<Pod>, name: &str, node: &str) -> f64 {
    let body = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                      "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    let t = Instant::now();
    pods.create_subresource::<_, serde_json::Value>("binding", name, &PostParams::default(), &body)
        .await
        .unwrap_or_else(|e| panic!("bind {name}: {e}"));
    t.elapsed().as_secs_f64() * 1e3
}

/// Delete what a round made (gracefully: the pods run on kwok, and a force delete of a running
/// pod is volguard's to refuse), and wait until it is gone.
async fn clean(cp: &ControlPlane, c: &kube::Client, ns: &str, names: &[String]) {
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let claims = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    for n in names {
        let _ = pods.delete(n, &DeleteParams::default()).await;
        let _ = claims.delete(n, &DeleteParams::default()).await;
    }
    cp.eventually(
        "a bench round's pods and claims gone",
        Duration::from_secs(300),
        || {
            let (pods, claims) = (pods.clone(), claims.clone());
            async move {
                let left = pods
                    .list(&ListParams::default().labels("!app"))
                    .await
                    .ok()?
                    .items
                    .len()
                    + claims
                        .list(&ListParams::default())
                        .await
                        .ok()?
                        .items
                        .iter()
                        .filter(|c| {
                            c.metadata
                                .name
                                .as_deref()
                                .is_some_and(|n| n.starts_with("d-"))
                        })
                        .count();
                (left == 0).then_some(())
            }
        },
    )
    .await;
}

/// Binds timed per mode, `rounds` rounds of `per_round` fresh pods per mode. Every mode is
/// registered at once, each on its own namespace (`BENCH_MODE`), and the calls alternate one by
/// one, the order rotating: a stall of the machine lands on neighbouring calls of every mode
/// alike, where round-by-round switching put a whole round of one mode in it (the p99 halves of
/// one mode then differed by 60–84 %). volguard must take a lock on every bind (checked against
/// its own counter).
pub(super) async fn binds(
    cp: &mut ControlPlane,
    ns: &str,
    ports: Ports,
    rounds: usize,
    per_round: usize,
) -> BTreeMap<&'static str, Samples> {
    let c = cp.admin().await;
    let modes = [
        (Hooks::None, 0),
        (Hooks::Noop, ports.floor),
        (Hooks::WritingNoop, ports.writing),
        (Hooks::Volguard, ports.volguard),
    ];
    let spaces: Vec<String> = modes
        .iter()
        .map(|(m, _)| format!("{ns}-{}", m.name()))
        .collect();
    for ((mode, _), space) in modes.iter().zip(&spaces) {
        labelled_namespace(&c, space, json!({ BENCH_MODE: mode.name() })).await;
    }
    let served: Vec<(&str, u16)> = modes
        .iter()
        .filter(|(m, _)| *m != Hooks::None)
        .map(|(m, p)| (m.name(), *p))
        .collect();
    cp.register_webhooks_by_namespace(&served).await;
    let apis: Vec<Api<Pod>> = spaces
        .iter()
        .map(|s| Api::<Pod>::namespaced(c.clone(), s))
        .collect();
    let mut out: BTreeMap<&'static str, Samples> = BTreeMap::new();
    let mut volguard_locks = 0.0;
    let mut outcomes: BTreeMap<String, f64> = BTreeMap::new();
    let (mut vg_inside, mut wr_inside) = (Inside::default(), Inside::default());
    for round in 0..rounds {
        let names: Vec<String> = (0..per_round).map(|i| format!("d-{round}-{i}")).collect();
        for space in &spaces {
            for n in &names {
                unbound_pod(&c, space, n).await;
            }
        }
        // The caches of volguard and the writing floor see the pods and claims first.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before = metrics_text(cp.serve_probe).await;
        let floor_before = floor_stats(cp, ports.writing).await;
        let mut v = vec![Vec::with_capacity(per_round); modes.len()];
        for (i, n) in names.iter().enumerate() {
            for k in 0..modes.len() {
                let m = (i + k) % modes.len();
                v[m].push(bind(&apis[m], n, "kwok-1").await);
            }
        }
        let after = floor_stats(cp, ports.writing).await;
        let d = |k: &str| after.get(k).unwrap_or(&0.0) - floor_before.get(k).unwrap_or(&0.0);
        wr_inside.binds += d("written") + d("skipped");
        wr_inside.handler_s += d("handler_ns") / 1e9;
        wr_inside.write_s += d("write_ns") / 1e9;
        let after = metrics_text(cp.serve_probe).await;
        let i = volguard_inside(&before, &after);
        vg_inside.binds += i.binds;
        vg_inside.handler_s += i.handler_s;
        vg_inside.write_s += i.write_s;
        vg_inside.nested_calls += i.nested_calls;
        vg_inside.nested_s += i.nested_s;
        volguard_locks += lock_writes(&after) - lock_writes(&before);
        let (b, a) = (lock_results(&before), lock_results(&after));
        for (k, v) in a {
            *outcomes.entry(k.clone()).or_default() += v - b.get(&k).copied().unwrap_or(0.0);
        }
        for ((mode, _), samples) in modes.iter().zip(v) {
            out.entry(mode.name()).or_default().push_round(samples);
        }
        for space in &spaces {
            clean(cp, &c, space, &names).await;
        }
    }
    let modes_served: Vec<&str> = served.iter().map(|(m, _)| *m).collect();
    cp.unregister_webhooks_by_namespace(&modes_served).await;
    cp.route_webhooks_to(ports.volguard).await;
    outcomes.retain(|_, v| *v > 0.0);
    println!("volguard's lock outcomes over its timed binds: {outcomes:?}");
    println!(
        "{:<36} {:>5} {:>10} {:>10} {:>12} {:>12}",
        "inside the webhook, per bind (ms)",
        "binds",
        "handler",
        "write",
        "nested/bind",
        "nested ms"
    );
    println!(
        "{}",
        wr_inside.row("writing-noop (no nested calls counted)")
    );
    println!("{}", vg_inside.row("volguard"));
    assert_eq!(
        volguard_locks as usize,
        rounds * per_round,
        "volguard took a lock on every bind of a fresh claim"
    );
    out
}

/// Claim creates timed per mode: none, volguard's mutating webhook, the MutatingAdmissionPolicy
/// that replaces it (the policies of `manifests/base`), each on its own namespace and alternating call by call
/// as the binds do.
pub(super) async fn claim_creates(
    cp: &mut ControlPlane,
    ns: &str,
    volguard: u16,
    rounds: usize,
    per_round: usize,
) -> BTreeMap<&'static str, Samples> {
    let c = cp.admin().await;
    let modes = ["none", "webhook", "policy"];
    let spaces: Vec<String> = modes.iter().map(|m| format!("{ns}-claims-{m}")).collect();
    for (mode, space) in modes.iter().zip(&spaces) {
        labelled_namespace(&c, space, json!({ BENCH_MODE: mode })).await;
    }
    cp.register_webhooks_by_namespace(&[("webhook", volguard)])
        .await;
    let applied =
        install_policies_where(cp, &c, &spaces[2], Some((BENCH_MODE, "policy")), None).await;
    let mut out: BTreeMap<&'static str, Samples> = BTreeMap::new();
    for round in 0..rounds {
        let names: Vec<String> = (0..per_round)
            .map(|i| format!("d-claim-{round}-{i}"))
            .collect();
        let mut v = vec![Vec::with_capacity(per_round); modes.len()];
        for (i, n) in names.iter().enumerate() {
            for k in 0..modes.len() {
                let m = (i + k) % modes.len();
                let t = Instant::now();
                pvc(&c, &spaces[m], n, None).await.expect("claim");
                v[m].push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        for ((mode, space), samples) in modes.iter().zip(&spaces).zip(v) {
            let last = Api::<PersistentVolumeClaim>::namespaced(c.clone(), space)
                .get(&names[per_round - 1])
                .await
                .expect("claim");
            assert!(
                finalizers(&last)
                    .iter()
                    .any(|f| f == "kubernetes.io/pvc-protection"),
                "{mode}: a created claim carries its protection finalizer"
            );
            out.entry(*mode).or_default().push_round(samples);
            clean(cp, &c, space, &names).await;
        }
    }
    remove_policies(&c, applied).await;
    cp.unregister_webhooks_by_namespace(&["webhook"]).await;
    cp.route_webhooks_to(volguard).await;
    out
}

/// volguard's lock writes while the pods of a StatefulSet pinned to one node restart `times`
/// times (each restart lands on the node that holds the lock: a placement there writes nothing).
/// Returns (restarts, lock writes: the webhook's and the controller's clears).
pub(super) async fn same_node_restarts(
    cp: &ControlPlane,
    ns: &str,
    replicas: i32,
    times: usize,
) -> (usize, f64) {
    let c = cp.admin().await;
    let sets = Api::<StatefulSet>::namespaced(c.clone(), ns);
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let mut s = statefulset(
        "pinned",
        replicas,
        json!({"whenScaled": "Retain", "whenDeleted": "Delete"}),
    );
    if let Some(t) = s.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        t.node_selector =
            Some([("kubernetes.io/hostname".to_string(), "kwok-1".to_string())].into());
    }
    sets.create(&PostParams::default(), &s)
        .await
        .expect("statefulset");
    let running = |pods: Api<Pod>| async move {
        let items = pods
            .list(&ListParams::default().labels("app=pinned"))
            .await
            .ok()?
            .items;
        let uids: Vec<String> = items
            .iter()
            .filter(|p| {
                p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    && p.metadata.deletion_timestamp.is_none()
            })
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        (uids.len() == replicas as usize).then_some(uids)
    };
    let mut uids = cp
        .eventually(
            "the pinned StatefulSet running",
            Duration::from_secs(300),
            || running(pods.clone()),
        )
        .await;
    // The controller's clears are lock writes too (a restart's pod is "replaced" at once).
    let cleared =
        |t: &str| series_value(t, "volguard_controller_rwo_locks_cleared_total").unwrap_or(0.0);
    let controller = cp.controller_probes.first().copied();
    let cleared_now = || async move {
        match controller {
            Some(p) => cleared(&metrics_text(p).await),
            None => 0.0,
        }
    };
    let cleared_before = cleared_now().await;
    let before = lock_writes(&metrics_text(cp.serve_probe).await);
    for _ in 0..times {
        pods.delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app=pinned"),
        )
        .await
        .expect("restart the pods");
        let old = uids.clone();
        uids = cp
            .eventually(
                "the pinned pods restarted and running",
                Duration::from_secs(300),
                || {
                    let (pods, old) = (pods.clone(), old.clone());
                    async move {
                        let now = running(pods).await?;
                        now.iter().all(|u| !old.contains(u)).then_some(now)
                    }
                },
            )
            .await;
    }
    let written = lock_writes(&metrics_text(cp.serve_probe).await) - before;
    let clears = cleared_now().await - cleared_before;
    println!(
        "same-node restarts: {} restarts, {written} lock writes by the webhook, {clears} lock clears by the controller",
        times * replicas as usize
    );
    sets.delete("pinned", &DeleteParams::default())
        .await
        .expect("delete statefulset");
    (times * replicas as usize, written + clears)
}
