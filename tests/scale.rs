//! `make bench-scale`: volguard on a cluster of real size. One cluster (kube-apiserver and etcd,
//! kube-controller-manager with every controller, kube-scheduler) grows to 100, 300 and 1,000
//! kwok nodes with ten pods each; every pod has its own ReadWriteOnce claim from a StatefulSet's
//! volumeClaimTemplate, provisioned by kcm's hostPath provisioner, scheduled by the real
//! scheduler (through volguard's RWO lock) and started by kwok. At each size it measures
//! `volguard serve` and `volguard controller`: RSS and CPU per 1,000 cached objects, time to
//! ready from a cold start, and the apiserver's own p50/p99 for each volguard webhook against a
//! no-op webhook registered exactly like it. At the largest size half the pods go and their
//! claims are deleted: half released by kube-controller-manager's pvc-protection controller
//! alone, half by volguard's controller alone.
//!
//! Prints a table; writes target/bench/scale.json and target/bench/scale.png. It measures and
//! prints; only a broken run (a workload that never converges) fails. Sizes:
//! `VOLGUARD_SCALE_NODES` (default `100,300,1000`), `VOLGUARD_SCALE_PODS_PER_NODE` (10).

mod support;

use support::apiserver::*;
use support::harness::{self, ControlPlane, Profile};
use support::objects::namespace;
use support::workload::*;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Pods per StatefulSet; a size's pods are a whole number of sets.
const PER_SET: usize = 100;
const NS: &str = "scale";
/// The churn measured per size: 5 StatefulSets of 20 pods, up and down, per mode and round.
const CHURN_SETS: usize = 5;
const CHURN_REPLICAS: i32 = 20;
const CHURN_ROUNDS: usize = 3;
/// One identity plays every node's kubelet (`ControlPlane::spawn_kwok_fleet`).
const FLEET_USER: &str = "--force-delete-allow-user=kwok-fleet";

fn env_list(var: &str, default: &str) -> Vec<usize> {
    let text = std::env::var(var).unwrap_or_else(|_| default.to_string());
    text.split(',')
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|e| panic!("{var}={text}: {s:?} is not a count: {e}"))
        })
        .collect()
}

/// What /proc says of one process.
#[derive(Clone, Copy, Default)]
struct ProcStat {
    rss_bytes: u64,
    /// The peak RSS since it started (VmHWM).
    peak_bytes: u64,
    cpu_seconds: f64,
}

fn proc_stat(pid: u32) -> ProcStat {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of /proc/PID/stat, the 12th and 13th after the
    // command name's closing parenthesis.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let ticks: f64 = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse::<f64>().ok())
                .sum()
        })
        .unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ProcStat {
        rss_bytes: kib("VmRSS:") * 1024,
        peak_bytes: kib("VmHWM:") * 1024,
        cpu_seconds: ticks / hz,
    }
}

/// The objects volguard's caches hold: pods, claims, volumes and nodes, cluster-wide.
#[derive(Clone, Copy, Default, Debug)]
struct Objects {
    pods: usize,
    pvcs: usize,
    pvs: usize,
    nodes: usize,
}

impl Objects {
    fn total(&self) -> usize {
        self.pods + self.pvcs + self.pvs + self.nodes
    }
}

async fn count_objects(c: &kube::Client) -> Objects {
    let lp = ListParams::default().match_any();
    Objects {
        pods: Api::<Pod>::all(c.clone())
            .list_metadata(&lp)
            .await
            .expect("pods")
            .items
            .len(),
        pvcs: Api::<PersistentVolumeClaim>::all(c.clone())
            .list_metadata(&lp)
            .await
            .expect("claims")
            .items
            .len(),
        pvs: Api::<PersistentVolume>::all(c.clone())
            .list_metadata(&lp)
            .await
            .expect("volumes")
            .items
            .len(),
        nodes: Api::<Node>::all(c.clone())
            .list_metadata(&lp)
            .await
            .expect("nodes")
            .items
            .len(),
    }
}

/// Poll `f` every 2 s (lists of thousands of objects are not free) until it returns Some,
/// printing `what` and the last progress figure every 30 s; fail after `within`.
async fn converge<F, Fut>(cp: &ControlPlane, what: &str, within: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    let mut said = Instant::now();
    loop {
        match f().await {
            Ok(()) => return,
            Err(progress) => {
                if started.elapsed() > within {
                    panic!(
                        "{what}: not reached in {within:?} ({progress})\n{}",
                        cp.logs()
                    );
                }
                if said.elapsed() > Duration::from_secs(30) {
                    println!(
                        "  … {what}: {progress} after {:.0}s",
                        started.elapsed().as_secs_f64()
                    );
                    said = Instant::now();
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Pods of `NS` that run (`Running`, not deleted) and pods of `NS` in all.
async fn pod_counts(pods: &Api<Pod>) -> Option<(usize, usize)> {
    let all = pods
        .list_metadata(&ListParams::default().match_any())
        .await
        .ok()?
        .items;
    let running = pods
        .list_metadata(
            &ListParams::default()
                .match_any()
                .fields("status.phase=Running"),
        )
        .await
        .ok()?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count();
    Some((running, all.len()))
}

/// Grow the cluster to `nodes` fleet nodes and `sets` StatefulSets of `PER_SET` pods each, and
/// wait until all of those pods run.
async fn grow(cp: &ControlPlane, have: (usize, usize), nodes: usize, sets: usize) {
    let names: Vec<String> = (have.0..nodes).map(|i| format!("fleet-{i:04}")).collect();
    cp.fleet_nodes(&names).await;
    let c = cp.admin().await;
    let api = Api::<StatefulSet>::namespaced(c.clone(), NS);
    create_statefulsets(&api, "scale", have.1..sets, PER_SET as i32).await;
    let pods = Api::<Pod>::namespaced(c, NS);
    let want = sets * PER_SET;
    converge(
        cp,
        &format!("{want} pods running"),
        Duration::from_secs(3600),
        || {
            let pods = pods.clone();
            async move {
                let (running, all) = pod_counts(&pods).await.ok_or("list failed")?;
                if running >= want {
                    Ok(())
                } else {
                    Err(format!("{running} running of {all}"))
                }
            }
        },
    )
    .await;
}

/// A webhook's latency beside the no-op's, as the apiserver measured them at one size.
struct Compared {
    webhook: String,
    calls: f64,
    noop: (f64, f64),
    volguard: (f64, f64),
}

/// The churn of `make bench`'s side-by-side, at this cluster's size: `CHURN_ROUNDS` rounds, each
/// with the no-op webhook and then volguard registered, of `CHURN_SETS` StatefulSets scaled up to
/// `CHURN_REPLICAS` and down again.
async fn compare_webhooks(cp: &mut ControlPlane, floor: u16, volguard: u16) -> Vec<Compared> {
    let c = cp.admin().await;
    let api = Api::<StatefulSet>::namespaced(c.clone(), "churn");
    let pods = Api::<Pod>::namespaced(c.clone(), "churn");
    let want = CHURN_SETS * CHURN_REPLICAS as usize;
    let mut buckets: BTreeMap<&str, Buckets> = BTreeMap::new();
    for round in 0..CHURN_ROUNDS {
        for mode in [Hooks::Noop, Hooks::Volguard] {
            mode.register(cp, floor, floor, volguard).await;
            let before = apiserver_metrics(&c).await;
            let up = format!("churn round {round} ({}): {want} pods", mode.name());
            scale_all(cp, &api, &pods, "churn", CHURN_SETS, CHURN_REPLICAS, &up).await;
            let after = apiserver_metrics(&c).await;
            add_delta(buckets.entry(mode.name()).or_default(), &before, &after);
            let down = format!("churn round {round} ({}): pods gone", mode.name());
            scale_all(cp, &api, &pods, "churn", CHURN_SETS, 0, &down).await;
        }
    }
    cp.route_webhooks_to(volguard).await;
    let (noop, _) = latencies(&buckets.remove("noop").unwrap_or_default(), BTreeMap::new());
    let (vg, _) = latencies(
        &buckets.remove("volguard").unwrap_or_default(),
        BTreeMap::new(),
    );
    vg.into_iter()
        .filter(|v| v.count > 0.0)
        .filter_map(|v| {
            let n = noop.iter().find(|n| n.webhook == v.webhook)?;
            Some(Compared {
                webhook: v.webhook.clone(),
                calls: v.count,
                noop: (n.p50, n.p99),
                volguard: (v.p50, v.p99),
            })
        })
        .collect()
}

/// What one process costs at one size.
struct Cost {
    rss: u64,
    /// A replica started cold against this cluster, 10 s after it turned ready, and its peak.
    cold_rss: u64,
    cold_peak: u64,
    cpu_per_1000: f64,
    ready_seconds: f64,
}

/// One size's figures.
struct Row {
    nodes: usize,
    objects: Objects,
    grow_seconds: f64,
    serve: Cost,
    controller: Cost,
    /// The peers' caches of the same objects, in `Peer::ALL`'s order.
    peers: Vec<Cost>,
    webhooks: Vec<Compared>,
}

/// How long a replica that turned ready is left to settle (watch events, the allocator's lazy
/// purge of what the initial LISTs freed) before its RSS is read.
const SETTLE: Duration = Duration::from_secs(10);

/// A second `volguard serve` started cold against the cluster: seconds until ready (its caches
/// synced) and what /proc says of it once settled.
async fn cold_serve(cp: &mut ControlPlane, nodes: usize) -> (f64, ProcStat) {
    let started = Instant::now();
    let (mut p, _) = cp
        .spawn_serve(
            &format!("volguard-serve-cold-{nodes}"),
            harness::free_port(),
            &[FLEET_USER],
        )
        .await;
    let ready = started.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let stat = proc_stat(p.child.id());
    p.kill();
    (ready, stat)
}

/// A standby `volguard controller` started cold: seconds until ready (its caches synced; ready
/// does not wait for the lease) and what /proc says of it once settled.
async fn cold_controller(cp: &mut ControlPlane, nodes: usize) -> (f64, ProcStat) {
    let started = Instant::now();
    let i = cp.start_controller(&format!("cold-{nodes}")).await;
    let ready = started.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let mut p = cp.controllers.remove(i);
    cp.controller_probes.remove(i);
    let stat = proc_stat(p.child.id());
    p.kill();
    (ready, stat)
}

/// The same objects cached the way peers cache them (issue: memory beside the peers' caches): a
/// kube-rs `reflector` per collection (`benches/kube_rs_cache.rs`) and controller-runtime's
/// informer cache (`benches/controller-runtime`, `--cache`). Each prints `synced N` once ready.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Peer {
    KubeRs,
    ControllerRuntime,
}

impl Peer {
    const ALL: [Peer; 2] = [Peer::KubeRs, Peer::ControllerRuntime];
    fn name(self) -> &'static str {
        match self {
            Peer::KubeRs => "kube_rs_reflector",
            Peer::ControllerRuntime => "controller_runtime_informer",
        }
    }
    fn spawn(self, cp: &ControlPlane, tag: &str) -> harness::Proc {
        let kc = cp.kubeconfig_file("peer-cache", "peer-cache", &["system:masters"]);
        let var = match self {
            Peer::KubeRs => "VOLGUARD_BENCH_KUBE_RS_CACHE",
            Peer::ControllerRuntime => "VOLGUARD_BENCH_CONTROLLER_RUNTIME",
        };
        let bin =
            std::env::var(var).unwrap_or_else(|_| panic!("{var} is set by `make bench-scale`"));
        let mut cmd = std::process::Command::new(bin);
        match self {
            Peer::KubeRs => cmd.arg("--kubeconfig").arg(&kc),
            Peer::ControllerRuntime => cmd.arg("--cache").arg(&kc),
        };
        harness::Proc::spawn(&format!("{}-{tag}", self.name()), &mut cmd, cp.dir.path())
    }
}

/// Wait until a peer printed `synced`.
async fn peer_synced(p: &harness::Proc) -> f64 {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&p.log).unwrap_or_default();
        if text.lines().any(|l| l.starts_with("synced ")) {
            return started.elapsed().as_secs_f64();
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "{} did not sync:\n{}",
            p.name,
            p.tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A peer started cold at this size: seconds until synced and what /proc says once settled.
async fn cold_peer(cp: &ControlPlane, peer: Peer, nodes: usize) -> (f64, ProcStat) {
    let mut p = peer.spawn(cp, &format!("cold-{nodes}"));
    let ready = peer_synced(&p).await;
    tokio::time::sleep(SETTLE).await;
    let stat = proc_stat(p.child.id());
    p.kill();
    (ready, stat)
}

/// Seconds from the first delete of a batch of claims until the apiserver had accepted every
/// delete, and until every claim was gone (its finalizer released).
#[derive(Clone, Copy, Default)]
struct Released {
    issued: f64,
    gone: f64,
}

/// Delete the claims `names` of `NS` (32 requests at a time) and time their release.
async fn release(cp: &ControlPlane, names: &[String]) -> Released {
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(cp.admin().await, NS);
    let started = Instant::now();
    let errors: Vec<_> = futures::stream::iter(names)
        .map(|n| {
            let pvcs = pvcs.clone();
            async move { pvcs.delete(n, &DeleteParams::default()).await.err() }
        })
        .buffer_unordered(32)
        .filter_map(|e| async move { e })
        .collect()
        .await;
    assert!(errors.is_empty(), "deleting claims: {errors:?}");
    let issued = started.elapsed().as_secs_f64();
    let want: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    converge(
        cp,
        &format!("{} claims released", names.len()),
        Duration::from_secs(1800),
        || {
            let pvcs = pvcs.clone();
            let want = want.clone();
            async move {
                let left = pvcs
                    .list_metadata(&ListParams::default().match_any())
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .into_iter()
                    .filter(|p| want.contains(p.metadata.name.as_deref().unwrap_or_default()))
                    .count();
                if left == 0 {
                    Ok(())
                } else {
                    Err(format!("{left} left"))
                }
            }
        },
    )
    .await;
    Released {
        issued,
        gone: started.elapsed().as_secs_f64(),
    }
}

/// volguard's controller (the single replica left) holds the lease.
async fn controller_leads(cp: &ControlPlane) {
    let probe = *cp.controller_probes.last().expect("a controller");
    converge(
        cp,
        "volguard controller leads",
        Duration::from_secs(60),
        || async move {
            let text = support::objects::metrics_text(probe).await;
            if text
                .lines()
                .any(|l| l.starts_with("volguard_controller_leader ") && l.ends_with(" 1"))
            {
                Ok(())
            } else {
                Err("not leader".into())
            }
        },
    )
    .await;
}

/// At the largest size: every StatefulSet down to half (its condemned claims retained, unused),
/// then those claims deleted, half with only kube-controller-manager's pvc-protection controller
/// releasing them (volguard's controller stopped), half with only volguard's (kcm without it).
async fn release_half(cp: &mut ControlPlane, sets: usize) -> (usize, Released, Released) {
    let c = cp.admin().await;
    let api = Api::<StatefulSet>::namespaced(c.clone(), NS);
    for s in 0..sets {
        api.patch(
            &format!("scale-{s}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": PER_SET / 2}})),
        )
        .await
        .expect("scale down");
    }
    let pods = Api::<Pod>::namespaced(c.clone(), NS);
    let want = sets * PER_SET / 2;
    converge(
        cp,
        &format!("half the pods gone ({want} left)"),
        Duration::from_secs(1800),
        || {
            let pods = pods.clone();
            async move {
                let (running, all) = pod_counts(&pods).await.ok_or("list failed")?;
                if all == want && running == want {
                    Ok(())
                } else {
                    Err(format!("{all} pods, {running} running"))
                }
            }
        },
    )
    .await;
    let claims = |range: std::ops::Range<usize>| -> Vec<String> {
        range
            .flat_map(|s| (PER_SET / 2..PER_SET).map(move |o| format!("data-scale-{s}-{o}")))
            .collect()
    };
    let (by_kcm, by_volguard) = (claims(0..sets / 2), claims(sets / 2..sets));
    // kube-controller-manager's pvc-protection controller alone (volguard's webhook still guards
    // the finalizer's removal, as it does in a cluster running both).
    for mut p in std::mem::take(&mut cp.controllers) {
        p.kill();
    }
    cp.controller_probes.clear();
    let kcm = release(cp, &by_kcm).await;
    // volguard's controller alone.
    let mut extra = harness::SCALE_CLIENT.to_vec();
    extra.push("--controllers=*,-persistentvolumeclaim-protection-controller");
    cp.start_kcm_all(&extra);
    cp.start_controller("replica-a").await;
    controller_leads(cp).await;
    let volguard = release(cp, &by_volguard).await;
    (by_kcm.len(), kcm, volguard)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// One process's costs per size, and the marginal RSS per object from the smallest size to the
/// largest.
fn print_costs(who: &str, rows: &[Row], cost: fn(&Row) -> &Cost) {
    println!(
        "\n{who:<10} {:>6} {:>8} | {:>7} {:>7} | {:>8} {:>7} {:>8} | {:>9} {:>7}",
        "nodes", "objects", "MiB", "B/obj", "cold MiB", "B/obj", "peak MiB", "CPU s/1k", "ready s"
    );
    for r in rows {
        let (c, n) = (cost(r), r.objects.total().max(1) as f64);
        println!(
            "{:<10} {:>6} {:>8} | {:>7.1} {:>7.0} | {:>8.1} {:>7.0} {:>8.1} | {:>9.3} {:>7.2}",
            "",
            r.nodes,
            r.objects.total(),
            mib(c.rss),
            c.rss as f64 / n,
            mib(c.cold_rss),
            c.cold_rss as f64 / n,
            mib(c.cold_peak),
            c.cpu_per_1000,
            c.ready_seconds
        );
    }
    if let [first, .., last] = rows {
        let d = (last.objects.total() - first.objects.total()).max(1) as f64;
        let (a, b) = (cost(first), cost(last));
        println!(
            "{who}: marginal RSS per object, {} → {} nodes: {:.0} B running since the start, {:.0} B started cold",
            first.nodes,
            last.nodes,
            (b.rss as f64 - a.rss as f64) / d,
            (b.cold_rss as f64 - a.cold_rss as f64) / d,
        );
    }
}

fn print_rows(rows: &[Row]) {
    print_costs("serve", rows, |r| &r.serve);
    print_costs("controller", rows, |r| &r.controller);
    print_costs("kube-rs", rows, |r| &r.peers[0]);
    print_costs("c-runtime", rows, |r| &r.peers[1]);
    if let Some(last) = rows.last() {
        let n = last.objects.total().max(1) as f64;
        println!(
            "\ncaches at {} nodes ({} objects), bytes per object, running since the start / started cold:",
            last.nodes,
            last.objects.total()
        );
        let mut all = vec![
            ("volguard serve", &last.serve),
            ("volguard controller", &last.controller),
        ];
        all.extend(Peer::ALL.iter().map(|p| p.name()).zip(last.peers.iter()));
        for (who, c) in all {
            println!(
                "  {who:<30} {:>7.0} {:>7.0}",
                c.rss as f64 / n,
                c.cold_rss as f64 / n
            );
        }
    }
    println!(
        "\n{:>6} {:<34} {:>6} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
        "nodes",
        "webhook (apiserver's histogram)",
        "calls",
        "noop p50",
        "noop p99",
        "vg p50",
        "vg p99",
        "p50 ×",
        "p99 ×"
    );
    for r in rows {
        for w in &r.webhooks {
            println!(
                "{:>6} {:<34} {:>6.0} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>7.2} {:>7.2}",
                r.nodes,
                w.webhook,
                w.calls,
                w.noop.0,
                w.noop.1,
                w.volguard.0,
                w.volguard.1,
                w.volguard.0 / w.noop.0.max(1e-9),
                w.volguard.1 / w.noop.1.max(1e-9)
            );
        }
    }
}

fn cost_json(c: &Cost, objects: usize) -> serde_json::Value {
    json!({
        "rss_bytes": c.rss, "bytes_per_object": c.rss as f64 / objects.max(1) as f64,
        "cold_rss_bytes": c.cold_rss, "cold_bytes_per_object": c.cold_rss as f64 / objects.max(1) as f64,
        "cold_peak_rss_bytes": c.cold_peak,
        "cpu_seconds_per_1000_objects": c.cpu_per_1000, "ready_seconds": c.ready_seconds,
    })
}

/// `memory.<name>.bytes_per_object` for volguard's two processes and the peers' caches.
fn memory_json(r: &Row) -> serde_json::Value {
    let n = r.objects.total().max(1) as f64;
    let mut m = serde_json::Map::new();
    let mut all = vec![
        ("volguard_serve", &r.serve),
        ("volguard_controller", &r.controller),
    ];
    all.extend(Peer::ALL.iter().map(|p| p.name()).zip(r.peers.iter()));
    for (who, c) in all {
        m.insert(
            who.to_string(),
            json!({"bytes_per_object": c.rss as f64 / n, "cold_bytes_per_object": c.cold_rss as f64 / n}),
        );
    }
    serde_json::Value::Object(m)
}

fn report(rows: &[Row], release: (usize, Released, Released)) -> serde_json::Value {
    let sizes: Vec<_> = rows
        .iter()
        .map(|r| {
            let webhooks: serde_json::Map<_, _> = r
                .webhooks
                .iter()
                .map(|w| {
                    (
                        w.webhook.clone(),
                        json!({"calls": w.calls, "noop_p50_ms": w.noop.0, "noop_p99_ms": w.noop.1,
                               "volguard_p50_ms": w.volguard.0, "volguard_p99_ms": w.volguard.1,
                               "p50_ratio": w.volguard.0 / w.noop.0.max(1e-9),
                               "p99_ratio": w.volguard.1 / w.noop.1.max(1e-9)}),
                    )
                })
                .collect();
            json!({
                "nodes": r.nodes, "pods": r.objects.pods, "pvcs": r.objects.pvcs, "pvs": r.objects.pvs,
                "objects": r.objects.total(), "grow_seconds": r.grow_seconds,
                "serve": cost_json(&r.serve, r.objects.total()),
                "controller": cost_json(&r.controller, r.objects.total()),
                "memory": memory_json(r),
                "webhooks": webhooks,
            })
        })
        .collect();
    let (claims, kcm, volguard) = release;
    json!({
        "memory": rows.last().map(memory_json),
        "sizes": sizes,
        "release": {"claims_each": claims, "kcm_seconds": kcm.gone, "volguard_seconds": volguard.gone,
                    "kcm_deletes_issued_seconds": kcm.issued, "volguard_deletes_issued_seconds": volguard.issued,
                    "ratio": volguard.gone / kcm.gone.max(1e-9)},
    })
}

async fn run() {
    let sizes = env_list("VOLGUARD_SCALE_NODES", "100,300,1000");
    let per_node = env_list("VOLGUARD_SCALE_PODS_PER_NODE", "10")[0];
    for n in &sizes {
        assert!(
            (n * per_node).is_multiple_of(PER_SET),
            "{n} nodes × {per_node} pods is not a whole number of StatefulSets of {PER_SET}"
        );
    }
    let mut cp = ControlPlane::start(Profile::Scale).await;
    // The production lease timings (the scenarios' quick ones lose the lease to a busy apiserver),
    // and the client budget kube-controller-manager and the scheduler get here (SCALE_CLIENT):
    // the release race compares controllers, not client-side rate limits.
    cp.controller_extra = [
        "--lease-duration=15s",
        "--lease-renew=2s",
        "--lease-renew-deadline=10s",
        "--qps=500",
        "--burst=1000",
    ]
    .map(String::from)
    .to_vec();
    let c = cp.admin().await;
    let version = c.apiserver_version().await.expect("version");
    println!(
        "\nkube-apiserver {} with kube-controller-manager (every controller), kube-scheduler, one kwok for every node",
        version.git_version
    );
    cp.install_manifests().await;
    let (serve, probe) = cp
        .spawn_serve("volguard-serve", cp.webhook_port, &[FLEET_USER])
        .await;
    let volguard_port = cp.webhook_port;
    cp.replace_serve(serve, volguard_port, probe);
    cp.route_webhooks_to(volguard_port).await;
    cp.start_controller("replica-a").await;
    let (_floor, floor_port) = cp.spawn_floor();
    support::workload::default_storage_class(&c).await;
    for ns in [NS, "churn"] {
        namespace(&c, ns).await;
    }
    cp.spawn_kwok_fleet();
    // The peers' caches, running from the start like volguard's replicas.
    let mut peers: Vec<harness::Proc> = Peer::ALL.iter().map(|p| p.spawn(&cp, "running")).collect();
    for p in &peers {
        peer_synced(p).await;
    }
    let churn = Api::<StatefulSet>::namespaced(c.clone(), "churn");
    create_statefulsets(&churn, "churn", 0..CHURN_SETS, 0).await;
    let mut rows = Vec::new();
    let mut have = (0, 0);
    let pid = |p: &Option<harness::Proc>| p.as_ref().map(|p| p.child.id()).unwrap_or(0);
    for &nodes in &sizes {
        let sets = nodes * per_node / PER_SET;
        let before = count_objects(&c).await;
        let (s0, c0) = (
            proc_stat(pid(&cp.serve)),
            proc_stat(cp.controllers[0].child.id()),
        );
        let p0: Vec<ProcStat> = peers.iter().map(|p| proc_stat(p.child.id())).collect();
        let started = Instant::now();
        grow(&cp, have, nodes, sets).await;
        let grow_seconds = started.elapsed().as_secs_f64();
        // A replica that exited while the cluster grew would measure as a few KiB.
        for p in cp
            .serve
            .iter_mut()
            .chain(cp.controllers.iter_mut())
            .chain(peers.iter_mut())
        {
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!(
                    "{} exited ({status}) while the cluster grew:\n{}",
                    p.name,
                    p.tail()
                );
            }
        }
        if rows.is_empty() {
            // The churn's claims are created (and retained) once, before anything is measured.
            cp.route_webhooks_to(volguard_port).await;
            let api = churn.clone();
            let pods = Api::<Pod>::namespaced(c.clone(), "churn");
            let r = CHURN_REPLICAS;
            scale_all(&cp, &api, &pods, "churn", CHURN_SETS, r, "churn warm-up").await;
            scale_all(
                &cp,
                &api,
                &pods,
                "churn",
                CHURN_SETS,
                0,
                "churn warm-up gone",
            )
            .await;
        }
        // Let the caches settle (watch events, the allocator's free lists) before reading RSS.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let objects = count_objects(&c).await;
        let added = objects.total().saturating_sub(before.total()).max(1) as f64 / 1000.0;
        let (s1, c1) = (
            proc_stat(pid(&cp.serve)),
            proc_stat(cp.controllers[0].child.id()),
        );
        let p1: Vec<ProcStat> = peers.iter().map(|p| proc_stat(p.child.id())).collect();
        let (serve_ready, serve_cold) = cold_serve(&mut cp, nodes).await;
        let (ctrl_ready, ctrl_cold) = cold_controller(&mut cp, nodes).await;
        let mut peer_costs = Vec::new();
        for (i, peer) in Peer::ALL.into_iter().enumerate() {
            let (ready, cold) = cold_peer(&cp, peer, nodes).await;
            peer_costs.push(Cost {
                rss: p1[i].rss_bytes,
                cold_rss: cold.rss_bytes,
                cold_peak: cold.peak_bytes,
                cpu_per_1000: (p1[i].cpu_seconds - p0[i].cpu_seconds) / added,
                ready_seconds: ready,
            });
        }
        let webhooks = compare_webhooks(&mut cp, floor_port, volguard_port).await;
        let row = Row {
            nodes,
            objects,
            grow_seconds,
            serve: Cost {
                rss: s1.rss_bytes,
                cold_rss: serve_cold.rss_bytes,
                cold_peak: serve_cold.peak_bytes,
                cpu_per_1000: (s1.cpu_seconds - s0.cpu_seconds) / added,
                ready_seconds: serve_ready,
            },
            controller: Cost {
                rss: c1.rss_bytes,
                cold_rss: ctrl_cold.rss_bytes,
                cold_peak: ctrl_cold.peak_bytes,
                cpu_per_1000: (c1.cpu_seconds - c0.cpu_seconds) / added,
                ready_seconds: ctrl_ready,
            },
            peers: peer_costs,
            webhooks,
        };
        println!(
            "size {nodes} nodes: {} pods, {} claims, {} volumes, grown in {grow_seconds:.0}s; serve {:.1} MiB, controller {:.1} MiB",
            objects.pods,
            objects.pvcs,
            objects.pvs,
            mib(row.serve.rss),
            mib(row.controller.rss)
        );
        rows.push(row);
        have = (nodes, sets);
    }
    let release = release_half(&mut cp, have.1).await;
    print_rows(&rows);
    let (claims, kcm, vg) = release;
    println!(
        "\nrelease of {claims} unused claims each (deletes accepted after / all gone after): kube-controller-manager's pvc-protection alone {:.1}s / {:.1}s, volguard's controller alone {:.1}s / {:.1}s (× {:.2})",
        kcm.issued,
        kcm.gone,
        vg.issued,
        vg.gone,
        vg.gone / kcm.gone.max(1e-9)
    );
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&out).expect("mkdir");
    let json = report(&rows, release);
    std::fs::write(
        out.join("scale.json"),
        serde_json::to_string_pretty(&json).expect("json"),
    )
    .expect("write scale.json");
    plot(&rows, &out.join("scale.png"));
    println!(
        "wrote {} and {}",
        out.join("scale.json").display(),
        out.join("scale.png").display()
    );
}

type Series = (&'static str, Vec<(f64, f64)>, plotters::style::RGBColor);

/// One panel: each series as a line with its points, against cluster size.
fn line_chart<DB: plotters::prelude::DrawingBackend>(
    area: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    series: Vec<Series>,
) {
    use plotters::prelude::*;
    let x_max = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(1.0, f64::max)
        * 1.05;
    let y_max = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.2;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .expect("chart");
    chart
        .configure_mesh()
        .x_desc("kwok nodes (10 pods with a claim each)")
        .draw()
        .expect("mesh");
    for (label, points, color) in series {
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .expect("line")
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .expect("points");
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .expect("legend");
}

/// p99 of the pod-create and rwo-single-node webhooks (volguard and no-op) and the RSS of serve
/// and controller, against cluster size, side by side in one PNG.
fn plot(rows: &[Row], path: &std::path::Path) {
    use plotters::prelude::*;
    let font = std::env::var("VOLGUARD_PLOT_FONT")
        .unwrap_or_else(|_| "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf".into());
    let bytes = std::fs::read(&font)
        .unwrap_or_else(|e| panic!("{font}: {e} (make bench-scale installs fonts-dejavu-core)"));
    plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(bytes.into()))
        .map_err(|_| "font")
        .expect("register font");
    let root = BitMapBackend::new(path, (1200, 480)).into_drawing_area();
    root.fill(&WHITE).expect("fill");
    let (left, right) = root.split_horizontally(600);
    let p99 = |name: &str, vg: bool| -> Vec<(f64, f64)> {
        rows.iter()
            .filter_map(|r| {
                let w = r.webhooks.iter().find(|w| w.webhook == name)?;
                Some((r.nodes as f64, if vg { w.volguard.1 } else { w.noop.1 }))
            })
            .collect()
    };
    let rss = |f: fn(&Row) -> u64| -> Vec<(f64, f64)> {
        rows.iter().map(|r| (r.nodes as f64, mib(f(r)))).collect()
    };
    line_chart(
        &left,
        "apiserver's p99 per webhook (ms)",
        vec![
            (
                "pod-create: volguard",
                p99("pod-create.volguard.io", true),
                RED,
            ),
            (
                "pod-create: no-op",
                p99("pod-create.volguard.io", false),
                MAGENTA,
            ),
            (
                "rwo-single-node: volguard",
                p99("rwo-single-node.volguard.io", true),
                BLUE,
            ),
            (
                "rwo-single-node: no-op",
                p99("rwo-single-node.volguard.io", false),
                CYAN,
            ),
        ],
    );
    line_chart(
        &right,
        "RSS (MiB)",
        vec![
            ("serve", rss(|r| r.serve.rss), RED),
            ("controller", rss(|r| r.controller.rss), BLUE),
        ],
    );
    root.present().expect("write png");
}

#[test]
#[ignore = "a cluster of 1,000 kwok nodes for many minutes: make bench-scale"]
fn bench_scale() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run());
}
