//! Robustness under combined faults (docs/testing.md "Robustness"): the real-node cluster with
//! volguard installed as an operator runs it (two webhook replicas behind one Service-like
//! forwarder, two controller replicas electing a leader, the CEL policies, fencing through the
//! reference fence agent and its power fence), writers on both drivers, and a nemesis drawn from a
//! seed injecting overlapping faults. Nothing is asserted while it runs: a recorder keeps the
//! history (the writers' records, every pod and Node change, the incidents) and the checker
//! (`robustness/checker.rs`) judges it afterwards. The same seed runs without volguard too.
//!
//! `VOLGUARD_ROBUSTNESS_SEED`, `VOLGUARD_ROBUSTNESS_MINUTES` (per mode) and
//! `VOLGUARD_ROBUSTNESS_MODES` (`with,without`); `make robustness SEED=… MINUTES=…`. Everything a
//! run saw is in `target/robustness/SEED/`; `target/robustness/summary.json` sums every seed there.

mod support;

#[path = "robustness/checker.rs"]
mod checker;
#[path = "robustness/nemesis.rs"]
mod nemesis;
#[path = "robustness/recorder.rs"]
mod recorder;

use checker::{FaultRun, History, Incident, Verdict, Workload};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use nemesis::{Fault, Kind};
use recorder::uptime;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::harness::{self, ControlPlane, Forwarder, Proc, Profile};
use support::nodes::{ATTACHED, IMAGE, RealNodes, SHARED_FS};
use support::records;

const NODES: [&str; 2] = ["node-a", "node-b"];
const NS: &str = "robust";
const FENCED_CLASS: &str = "e2e-csi-fenced";
/// After the last fault heals, every workload writes again within this.
const LIVENESS: f64 = 120.0;
/// The writers' toleration of an unreachable or not-ready node, in seconds.
const FORGIVE: i64 = 2;
/// The schedule leaves this much of a run fault-free at its end.
const TAIL: f64 = 60.0;

struct Rig {
    nodes: RealNodes,
    cp: ControlPlane,
    with: bool,
    /// The webhook replicas (process, port), `None` while killed.
    replicas: Vec<Option<(Proc, u16)>>,
    forwarder: Option<Forwarder>,
    _agent: Option<Proc>,
    /// The node-holding faults in force: node → kind.
    held: BTreeMap<String, Kind>,
    /// Targets resolved at injection (`@db` → a node).
    aliases: BTreeMap<String, String>,
    /// Controller replicas started again after a kill (each under a new identity).
    restarts: u32,
}

/// One writer workload: what it is called, its claim, and where its log lives.
struct Writer {
    name: &'static str,
    rwo: bool,
    log: PathBuf,
    start_seconds: f64,
    recovers: bool,
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
#[ignore = "needs the real nodes that `make nodes` builds (`make robustness`; `make e2e` runs one short seed)"]
fn robustness_seeded() {
    let seed: u64 = env_or("VOLGUARD_ROBUSTNESS_SEED", 20261129);
    let minutes: f64 = env_or("VOLGUARD_ROBUSTNESS_MINUTES", 3.0);
    let modes =
        std::env::var("VOLGUARD_ROBUSTNESS_MODES").unwrap_or_else(|_| "with,without".into());
    let seconds = minutes * 60.0;
    let plan = nemesis::schedule(seed, seconds, TAIL, &NODES);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/robustness")
        .join(seed.to_string());
    std::fs::create_dir_all(&dir).expect("report dir");
    write(&dir.join("schedule.json"), &plan);
    println!("\nrobustness seed {seed}, {minutes} min per mode, schedule:");
    for f in &plan {
        println!(
            "  t={:>6.1}s {:<22} {:<8} lasts {:.1}s",
            f.at,
            f.kind.name(),
            f.target,
            f.lasts
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut verdicts = Vec::new();
    for mode in modes.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let with = mode == "with";
        let (history, verdict) = rt.block_on(run(seed, seconds, &plan, with));
        write(&dir.join(format!("history-{mode}.json")), &history);
        write(&dir.join(format!("verdict-{mode}.json")), &verdict);
        println!(
            "\n{mode} volguard: lost {} corrupted {} overlaps {} releases without record {} not live {:?}\n  availability {:?}\n  recovery {:?}\n  violations:\n    {}",
            verdict.lost,
            verdict.corrupted,
            verdict.overlaps,
            verdict.releases_without_record,
            verdict.not_live,
            verdict.availability,
            verdict.recovery,
            verdict.violations.join("\n    ")
        );
        verdicts.push((with, verdict));
    }
    let summary = summarize(dir.parent().expect("target/robustness"));
    println!("summary: {summary}");
    for (with, v) in &verdicts {
        if *with {
            assert!(
                v.violations.is_empty(),
                "seed {seed} with volguard broke an invariant (replay: VOLGUARD_ROBUSTNESS_SEED={seed}); {}",
                dir.display()
            );
        } else {
            // The checker's own test on the real cluster: the impatient person's force delete
            // inside the first partition goes through without volguard, and must be seen.
            assert!(
                v.releases_without_record > 0,
                "seed {seed} without volguard: the checker saw no release without a record: {v:?}"
            );
        }
    }
}

fn write<T: serde::Serialize>(path: &std::path::Path, v: &T) {
    std::fs::write(path, serde_json::to_string_pretty(v).expect("json")).expect("write");
}

async fn run(seed: u64, seconds: f64, plan: &[Fault], with: bool) -> (History, Verdict) {
    let mut rig = start(with).await;
    let c = rig.cp.admin().await;
    let writers = workloads(&rig).await;
    if with {
        install_policies(&rig.cp, &c).await;
    }
    let rec = recorder::Recorder::start(
        c.clone(),
        NS,
        writers.iter().map(|w| w.log.clone()).collect(),
    );
    let stop_jobs = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let jobs = tokio::spawn(cycle_jobs(c.clone(), stop_jobs.clone()));
    let started_at = uptime();
    let t0 = Instant::now();
    // Every action in time order: a fault's start, and its heal `lasts` later.
    let mut steps: Vec<(f64, usize, bool)> = Vec::new();
    for (i, f) in plan.iter().enumerate() {
        steps.push((f.at, i, true));
        if f.lasts > 0.0 {
            steps.push((f.at + f.lasts, i, false));
        }
    }
    steps.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.2.cmp(&a.2)));
    let mut runs: Vec<FaultRun> = plan
        .iter()
        .map(|f| FaultRun {
            kind: f.kind.name().into(),
            target: f.target.clone(),
            start: 0.0,
            end: 0.0,
            outcome: String::new(),
        })
        .collect();
    for (at, i, begin) in steps {
        let wait = at - t0.elapsed().as_secs_f64();
        if wait > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
        let f = &plan[i];
        if begin {
            runs[i].start = uptime();
            runs[i].outcome = inject(&mut rig, f).await;
            if let Some(n) = rig.aliases.get(&f.target) {
                runs[i].target = n.clone();
            }
            if f.lasts == 0.0 {
                runs[i].end = runs[i].start;
            }
        } else {
            heal(&mut rig, f).await;
            runs[i].end = uptime();
        }
        println!(
            "  [{:>6.1}s] {} {} {} {}",
            t0.elapsed().as_secs_f64(),
            if begin { "inject" } else { "heal  " },
            f.kind.name(),
            f.target,
            if begin { runs[i].outcome.as_str() } else { "" }
        );
    }
    let last_heal_at = runs.iter().map(|r| r.end).fold(started_at, f64::max);
    // Every machine back, then the run lasts until its length, and until every workload wrote
    // again or its limit passed.
    for n in NODES {
        ensure_running(&mut rig, n).await;
    }
    let until =
        Instant::now() + Duration::from_secs_f64((seconds - t0.elapsed().as_secs_f64()).max(0.0));
    let limit = Instant::now() + Duration::from_secs_f64(LIVENESS);
    loop {
        let live = writers.iter().all(|w| {
            std::fs::read_to_string(&w.log)
                .unwrap_or_default()
                .lines()
                .filter_map(records::parse)
                .any(|r| r.at > last_heal_at)
        });
        if (live && Instant::now() >= until) || Instant::now() >= limit.max(until) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop_jobs.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = jobs.await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let recorded = rec.stop();
    let ended_at = uptime();
    let incidents = incidents(&c).await;
    let history = History {
        seed,
        with_volguard: with,
        started_at,
        ended_at,
        last_heal_at,
        faults: runs,
        workloads: writers
            .iter()
            .map(|w| Workload {
                name: w.name.into(),
                rwo: w.rwo,
                log: std::fs::read_to_string(&w.log).ok(),
                seen: recorded
                    .seen
                    .get(&w.log)
                    .map(|s| s.iter().cloned().collect())
                    .unwrap_or_default(),
                limit_seconds: LIVENESS,
                start_seconds: w.start_seconds,
                forgive_seconds: FORGIVE as f64,
                recovers: w.recovers,
            })
            .collect(),
        releases: recorded.releases,
        incidents,
        not_ready: recorded.not_ready,
    };
    let verdict = checker::check(&history);
    if !verdict.violations.is_empty() && with {
        keep_logs(&rig, seed);
    }
    drop(rig);
    (history, verdict)
}

/// Every component's whole log (the control plane's, each volguard replica's, the fence agent's)
/// and the nodes' tails into `target/robustness/SEED/logs-with/`: a violation is explained from them.
fn keep_logs(rig: &Rig, seed: u64) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/robustness")
        .join(seed.to_string())
        .join("logs-with");
    let _ = std::fs::create_dir_all(&dir);
    for e in std::fs::read_dir(rig.cp.dir.path())
        .into_iter()
        .flatten()
        .flatten()
    {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "log") {
            let _ = std::fs::copy(&p, dir.join(e.file_name()));
        }
    }
    let _ = std::fs::write(dir.join("nodes.txt"), rig.nodes.logs());
}

// ---------------------------------------------------------------- the cluster, as installed

async fn start(with: bool) -> Rig {
    // No watch cache and no compaction: the recorder's watches resume from their last
    // resourceVersion across apiserver restarts and miss nothing.
    let mut cp = ControlPlane::start_with(
        Profile::Cluster,
        &[
            "--kubelet-preferred-address-types=InternalIP",
            "--watch-cache=false",
            "--etcd-compaction-interval=0",
        ],
    )
    .await;
    cp.install_manifests().await;
    let mut nodes = RealNodes::start(&cp).await;
    let mut replicas = Vec::new();
    let mut forwarder = None;
    // The serving certificate (made with the first replica) is the fence agent's too.
    let agent = if with {
        cp.serve_extra = vec!["--partition-after=10s".into()];
        let extra: Vec<String> = cp.serve_extra.clone();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        for i in 0..2 {
            let port = harness::free_port();
            let (p, _) = cp
                .spawn_serve(&format!("volguard-serve-{i}"), port, &extra)
                .await;
            replicas.push(Some((p, port)));
        }
        let f = Forwarder::start_many(replicas.iter().flatten().map(|r| r.1).collect()).await;
        cp.route_webhooks_to(f.port).await;
        forwarder = Some(f);
        let (_, agent, port) = support::nodes::power_fence_agent(&cp, &nodes);
        cp.controller_extra = support::nodes::fencing_flags(&cp, port, "40s");
        cp.start_controller("replica-a").await;
        cp.start_controller("replica-b").await;
        Some(agent)
    } else {
        None
    };
    support::nodes::create_fenced_class(&cp, FENCED_CLASS).await;
    for n in NODES {
        nodes.add(&cp, n).await;
    }
    Rig {
        nodes,
        cp,
        with,
        replicas,
        forwarder,
        _agent: agent,
        held: BTreeMap::new(),
        aliases: BTreeMap::new(),
        restarts: 0,
    }
}

/// volguard's CEL policies and their parameters, as the base ships them; enforced once a dry-run
/// force delete of a running writer by a person is refused by the policy itself.
async fn install_policies(cp: &ControlPlane, c: &kube::Client) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base");
    harness::apply_file(c, &dir.join("policy-bindings.yaml"), false).await;
    harness::apply_file(c, &dir.join("policies.yaml"), false).await;
    let pods = Api::<Pod>::namespaced(c.clone(), NS);
    let dry = DeleteParams {
        grace_period_seconds: Some(0),
        dry_run: true,
        ..Default::default()
    };
    cp.eventually("the policies enforced", Duration::from_secs(60), || {
        let (pods, dry) = (pods.clone(), dry.clone());
        async move {
            match pods.delete("db-0", &dry).await {
                Err(kube::Error::Api(e)) => e
                    .message
                    .contains("ValidatingAdmissionPolicy")
                    .then_some(()),
                _ => None,
            }
        }
    })
    .await;
}

fn writer_pod(claim: Option<&str>) -> serde_json::Value {
    writer_pod_running(claim, records::WRITER)
}

/// A Job's writer: the same records, 200 of them (about 20 s), then done.
fn batch_writer() -> String {
    records::WRITER.replace("while true", "while [ $i -lt 200 ]")
}

fn writer_pod_running(claim: Option<&str>, script: &str) -> serde_json::Value {
    let volumes = match claim {
        Some(c) => json!([{"name": "data", "persistentVolumeClaim": {"claimName": c}}]),
        None => json!([]),
    };
    json!({
        "terminationGracePeriodSeconds": 2,
        "containers": [{"name": "writer", "image": IMAGE, "imagePullPolicy": "Never",
                        "command": ["sh", "-c", script], "env": records::writer_env(),
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": volumes,
        // The forgiveness volguard waits out before it fences (rules.md §7 "Detect").
        "tolerations": [
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": FORGIVE},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": FORGIVE}]
    })
}

/// Jobs that come and go: one after another on one fenced ReadWriteOnce claim, each writing
/// about 20 s and done (`Jobs::cycle` runs them through the faults).
const BATCH_CLAIM: &str = "batch-data";

fn batch_job(k: u32) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": format!("batch-{k}")},
        "spec": {"backoffLimit": 6,
                 "template": {"metadata": {"labels": {"app": "batch"}},
                              "spec": writer_pod_running(Some(BATCH_CLAIM), &batch_writer())
                                  .as_object().cloned().map(|mut o| {
                                      o.insert("restartPolicy".into(), json!("Never"));
                                      o
                                  })}}
    }))
    .expect("job")
}

/// Create the next Job once the last one is done (or has run 2 minutes: stuck behind a fault,
/// it is deleted, as an operator gives up on it), until told to stop.
async fn cycle_jobs(c: kube::Client, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let jobs = Api::<Job>::namespaced(c, NS);
    let (mut k, mut created, mut since) = (0, true, Instant::now());
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if !created {
            created = jobs
                .create(&PostParams::default(), &batch_job(k))
                .await
                .is_ok();
            since = Instant::now();
            continue;
        }
        let done = jobs
            .get(&format!("batch-{k}"))
            .await
            .ok()
            .and_then(|j| j.status)
            .is_some_and(|s| s.succeeded.unwrap_or(0) > 0 || s.failed.unwrap_or(0) > 6);
        if done || since.elapsed() > Duration::from_secs(120) {
            let _ = jobs
                .delete(&format!("batch-{k}"), &DeleteParams::background())
                .await;
            (k, created) = (k + 1, false);
        }
    }
}

/// The writers' claims are delete-protected, as an operator protects a database's: an
/// impatient person's DELETE of a stuck claim is refused (inert without volguard).
fn protected() -> serde_json::Value {
    json!({"volguard.io/delete-protection": "true"})
}

fn sts(name: &str, class: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": 1, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": writer_pod(None)},
                 "volumeClaimTemplates": [{"metadata": {"name": "data", "annotations": protected()},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                             "resources": {"requests": {"storage": "1Mi"}}}}]}
    }))
    .expect("statefulset")
}

/// StatefulSets on the attachable driver (fencing opted in) and on the shared filesystem (not
/// opted in), and a `Recreate` Deployment on a ReadWriteOnce claim of the attachable driver (not
/// opted in); each running and writing, with the time that took.
async fn workloads(rig: &Rig) -> Vec<Writer> {
    let c = rig.cp.admin().await;
    support::objects::namespace(&c, NS).await;
    let t = Instant::now();
    let set = Api::<StatefulSet>::namespaced(c.clone(), NS);
    set.create(&PostParams::default(), &sts("db", FENCED_CLASS))
        .await
        .expect("db");
    set.create(&PostParams::default(), &sts("fs", SHARED_FS.class))
        .await
        .expect("fs");
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "app-data", "annotations": protected()},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": ATTACHED.class,
                 "resources": {"requests": {"storage": "1Mi"}}}
    }))
    .expect("claim");
    Api::<PersistentVolumeClaim>::namespaced(c.clone(), NS)
        .create(&PostParams::default(), &pvc)
        .await
        .expect("app claim");
    let batch: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": BATCH_CLAIM, "annotations": protected()},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": FENCED_CLASS,
                 "resources": {"requests": {"storage": "1Mi"}}}
    }))
    .expect("claim");
    Api::<PersistentVolumeClaim>::namespaced(c.clone(), NS)
        .create(&PostParams::default(), &batch)
        .await
        .expect("batch claim");
    let jobs = Api::<Job>::namespaced(c.clone(), NS);
    jobs.create(&PostParams::default(), &batch_job(0))
        .await
        .expect("batch-0");
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "app"},
        "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
                 "selector": {"matchLabels": {"app": "app"}},
                 "template": {"metadata": {"labels": {"app": "app"}}, "spec": writer_pod(Some("app-data"))}}
    }))
    .expect("deployment");
    Api::<Deployment>::namespaced(c.clone(), NS)
        .create(&PostParams::default(), &deploy)
        .await
        .expect("app");
    let mut out = Vec::new();
    // (name, claim, its owner replaces a released pod at once: not the Job controller)
    for (name, claim, recovers) in [
        ("db", "data-db-0", true),
        ("fs", "data-fs-0", true),
        ("app", "app-data", true),
        ("batch", BATCH_CLAIM, false),
    ] {
        let log = rig.nodes.log_of(&rig.cp, NS, claim).await;
        rig.cp
            .eventually(&format!("{name} writes"), Duration::from_secs(120), || {
                let log = log.clone();
                async move {
                    (std::fs::read_to_string(&log)
                        .unwrap_or_default()
                        .lines()
                        .filter_map(records::parse)
                        .count()
                        > 5)
                    .then_some(())
                }
            })
            .await;
        let start_seconds = pod_start(&c, &log)
            .await
            .unwrap_or_else(|| t.elapsed().as_secs_f64());
        out.push(Writer {
            name,
            rwo: true,
            log,
            start_seconds,
            recovers,
        });
    }
    out
}

/// A pod start on healthy nodes, for a recovery's limit: from the creation of the pod that wrote
/// the log's first record to that record (its claim's attach and mount included).
async fn pod_start(c: &kube::Client, log: &std::path::Path) -> Option<f64> {
    let first = std::fs::read_to_string(log)
        .ok()?
        .lines()
        .find_map(records::parse)?;
    let pods = Api::<Pod>::namespaced(c.clone(), NS)
        .list(&ListParams::default())
        .await
        .ok()?;
    let created = pods
        .items
        .iter()
        .find(|p| p.metadata.uid.as_deref() == Some(&*first.writer))?
        .metadata
        .creation_timestamp
        .as_ref()?
        .0;
    let (now_up, now_wall) = (uptime(), jiff::Timestamp::now());
    let created_up = now_up - now_wall.duration_since(created).as_secs_f64();
    Some((first.at - created_up).max(0.0))
}

// ---------------------------------------------------------------- faults

/// The node a fault's target names (`@db`: the node db-0 ran on when the first such fault came).
async fn resolve(rig: &mut Rig, target: &str) -> String {
    if target != nemesis::FENCED_WRITER_NODE {
        return target.into();
    }
    if let Some(n) = rig.aliases.get(target) {
        return n.clone();
    }
    let pods = Api::<Pod>::namespaced(rig.cp.admin().await, NS);
    let node = pods
        .get("db-0")
        .await
        .ok()
        .and_then(|p| p.spec?.node_name)
        .unwrap_or_else(|| NODES[0].into());
    rig.aliases.insert(target.into(), node.clone());
    node
}

async fn inject(rig: &mut Rig, f: &Fault) -> String {
    let n = &resolve(rig, &f.target).await;
    let n = n.as_str();
    match f.kind {
        Kind::Partition => {
            rig.nodes.partition(n, true);
            rig.held.insert(n.into(), f.kind);
            "cut".into()
        }
        Kind::ApiserverPartition => {
            rig.nodes.cut_from_apiserver(n, true);
            rig.held.insert(n.into(), f.kind);
            "cut from the apiserver".into()
        }
        Kind::PowerCycle => {
            rig.nodes.power_off(n);
            rig.held.insert(n.into(), f.kind);
            "off".into()
        }
        Kind::Freeze => {
            rig.nodes.freeze(n, true);
            rig.held.insert(n.into(), f.kind);
            "frozen".into()
        }
        Kind::KubeletRestart | Kind::ContainerdRestart => {
            if rig.held.contains_key(n) || !rig.nodes.running(n) {
                return "skipped: the machine is held".into();
            }
            if f.kind == Kind::KubeletRestart {
                rig.nodes.restart_kubelet(n);
            } else {
                rig.nodes.restart_containerd(n);
            }
            "restarted".into()
        }
        Kind::WebhookKill => {
            if !rig.with {
                return "no volguard".into();
            }
            let i: usize = n.parse().unwrap_or(0);
            let Some((mut p, _)) = rig.replicas[i].take() else {
                return "already down".into();
            };
            p.kill();
            // The Service's endpoints follow a second later.
            tokio::time::sleep(Duration::from_secs(1)).await;
            route(rig);
            "killed".into()
        }
        Kind::LeaderKill => {
            if !rig.with {
                return "no volguard".into();
            }
            let c = rig.cp.admin().await;
            let during = if f.target == nemesis::MID_FENCE {
                match being_fenced(&c).await {
                    Some(i) => format!("mid-fence of {i}: "),
                    None => format!(
                        "no incident was being fenced within {:.0} s: ",
                        nemesis::MID_FENCE_WAIT
                    ),
                }
            } else {
                String::new()
            };
            let holder =
                Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(c, "volguard-system")
                    .get_opt("volguard-controller")
                    .await
                    .ok()
                    .flatten()
                    .and_then(|l| l.spec?.holder_identity)
                    .unwrap_or_default();
            let target = format!("volguard-controller-{holder}");
            let mut killed = 0;
            for p in rig.cp.controllers.iter_mut().filter(|p| p.name == target) {
                p.kill();
                killed += 1;
            }
            rig.cp
                .controllers
                .retain_mut(|p| p.child.try_wait().ok().flatten().is_none());
            if holder.is_empty() || killed == 0 {
                // The Lease still names a leader killed before: a follower is taking over.
                return format!("{during}no live leader ({holder:?} already gone)");
            }
            // Started again as a new process is: a new identity, so the follower waits out the
            // dead leader's Lease (a restart under the same one would resume it at once).
            rig.restarts += 1;
            let again = format!("replica-{}", rig.restarts);
            rig.cp.start_controller(&again).await;
            format!("{during}{holder} killed, restarted as {again}")
        }
        Kind::ApiserverRestart => {
            rig.cp.kill_apiserver();
            "killed".into()
        }
        Kind::EtcdRestart => {
            rig.cp.kill_etcd();
            "killed".into()
        }
        Kind::Drain => {
            let _ = rig.cp.cordon(n, true).await;
            rig.held.insert(n.into(), f.kind);
            let pods = Api::<Pod>::namespaced(rig.cp.admin().await, NS);
            let mut evicted = Vec::new();
            for p in on_node(&pods, n).await {
                let name = p.metadata.name.unwrap_or_default();
                let r = pods.evict(&name, &EvictParams::default()).await;
                evicted.push(format!("{name}: {}", outcome(r)));
            }
            format!("cordoned; {}", evicted.join(", "))
        }
        Kind::OperatorForceDelete => {
            let pods = Api::<Pod>::namespaced(rig.cp.admin().await, NS);
            let mut candidates = on_node(&pods, n).await;
            if candidates.is_empty() {
                candidates = pods
                    .list(&ListParams::default())
                    .await
                    .map(|l| l.items)
                    .unwrap_or_default();
            }
            let Some(p) = candidates.into_iter().next() else {
                return "no pod".into();
            };
            let name = p.metadata.name.unwrap_or_default();
            let r = pods
                .delete(
                    &name,
                    &DeleteParams {
                        grace_period_seconds: Some(0),
                        ..Default::default()
                    },
                )
                .await;
            format!("{name}: {}", outcome(r))
        }
        Kind::OperatorDeleteClaim => {
            let c = rig.cp.admin().await;
            let pods = Api::<Pod>::namespaced(c.clone(), NS);
            let claim = on_node(&pods, n)
                .await
                .into_iter()
                .flat_map(|p| p.spec.map(|s| s.volumes.unwrap_or_default()))
                .flatten()
                .find_map(|v| v.persistent_volume_claim.map(|c| c.claim_name))
                .unwrap_or_else(|| "data-db-0".into());
            let r = Api::<PersistentVolumeClaim>::namespaced(c, NS)
                .delete(&claim, &DeleteParams::default())
                .await;
            format!("{claim}: {}", outcome(r))
        }
        Kind::OperatorTaint => {
            let nodes = Api::<Node>::all(rig.cp.admin().await);
            let patch = json!([{"op": "add", "path": "/spec/taints/-", "value":
                {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}}]);
            let has = nodes
                .get(n)
                .await
                .ok()
                .and_then(|x| x.spec?.taints)
                .is_some();
            let patch = if has {
                patch
            } else {
                json!([{"op": "add", "path": "/spec/taints", "value":
                    [{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]}])
            };
            let r = nodes
                .patch(
                    n,
                    &PatchParams::default(),
                    &Patch::Json::<()>(serde_json::from_value(patch).expect("patch")),
                )
                .await;
            outcome(r)
        }
    }
}

async fn heal(rig: &mut Rig, f: &Fault) {
    let n = &resolve(rig, &f.target).await;
    let n = n.as_str();
    match f.kind {
        Kind::Partition => {
            rig.nodes.partition(n, false);
            rig.held.remove(n);
            ensure_running(rig, n).await;
        }
        Kind::ApiserverPartition => {
            rig.nodes.cut_from_apiserver(n, false);
            rig.held.remove(n);
            ensure_running(rig, n).await;
        }
        Kind::PowerCycle | Kind::Freeze => {
            rig.nodes.freeze(n, false);
            rig.held.remove(n);
            ensure_running(rig, n).await;
        }
        Kind::Drain => {
            let _ = rig.cp.cordon(n, false).await;
            rig.held.remove(n);
        }
        Kind::WebhookKill => {
            let i: usize = n.parse().unwrap_or(0);
            if rig.with && rig.replicas[i].is_none() {
                let extra: Vec<String> = rig.cp.serve_extra.clone();
                let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
                let port = harness::free_port();
                let (p, _) = rig
                    .cp
                    .spawn_serve(&format!("volguard-serve-{i}"), port, &extra)
                    .await;
                rig.replicas[i] = Some((p, port));
                route(rig);
            }
        }
        Kind::ApiserverRestart => rig.cp.start_apiserver().await,
        Kind::EtcdRestart => rig.cp.start_etcd(),
        Kind::OperatorTaint => {
            let nodes = Api::<Node>::all(rig.cp.admin().await);
            if let Ok(node) = nodes.get(n).await {
                let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
                if let Some(i) = taints.iter().position(|t| {
                    t.key == "node.kubernetes.io/out-of-service"
                        && !node
                            .metadata
                            .annotations
                            .as_ref()
                            .is_some_and(|a| a.contains_key("volguard.io/fence-incident"))
                }) {
                    let patch: json_patch::Patch = serde_json::from_value(json!([
                        {"op": "remove", "path": format!("/spec/taints/{i}")}]))
                    .expect("patch");
                    let _ = nodes
                        .patch(n, &PatchParams::default(), &Patch::Json::<()>(patch))
                        .await;
                }
            }
        }
        _ => {}
    }
}

/// A machine that is off (powered off, or fenced by the power fence) is powered on again, as an
/// operator does once the fault is over.
async fn ensure_running(rig: &mut Rig, n: &str) {
    if !rig.held.contains_key(n) && !rig.nodes.running(n) {
        rig.nodes.power_on(&rig.cp, n).await;
    }
}

fn route(rig: &Rig) {
    if let Some(f) = &rig.forwarder {
        f.route_to_many(rig.replicas.iter().flatten().map(|r| r.1).collect());
    }
}

async fn on_node(pods: &Api<Pod>, node: &str) -> Vec<Pod> {
    pods.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .collect()
}

fn outcome<T>(r: Result<T, kube::Error>) -> String {
    match r {
        Ok(_) => "allowed".into(),
        Err(kube::Error::Api(e)) => format!(
            "refused ({}): {}",
            e.code,
            e.message.chars().take(80).collect::<String>()
        ),
        Err(e) => format!("failed: {e}"),
    }
}

// ---------------------------------------------------------------- the incidents, the summary

/// The incident a backend is being asked to fence, once there is one (polled until
/// `MID_FENCE_WAIT`): the moment a leader's death hurts most.
async fn being_fenced(c: &kube::Client) -> Option<String> {
    let until = Instant::now() + Duration::from_secs_f64(nemesis::MID_FENCE_WAIT);
    while Instant::now() < until {
        let fencing = support::objects::node_fences(c)
            .await
            .into_iter()
            .find(|f| f.status.phase == volguard::model::fence::Phase::Fencing);
        if let Some(f) = fencing {
            return Some(f.metadata.name);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

async fn incidents(c: &kube::Client) -> Vec<Incident> {
    let list = support::objects::node_fences(c).await;
    let (now_up, now_wall) = (uptime(), jiff::Timestamp::now());
    let at = |s: Option<&str>| -> Option<f64> {
        let t: jiff::Timestamp = s?.parse().ok()?;
        Some(now_up - now_wall.duration_since(t).as_secs_f64())
    };
    list.into_iter()
        .map(|f| {
            let st = &f.status;
            Incident {
                name: f.metadata.name.clone(),
                node: f.spec.node.clone(),
                phase: st.phase.as_str().into(),
                heartbeat: at(st.lease_renew_time.as_deref()),
                detected: f
                    .metadata
                    .creation_timestamp
                    .and_then(|t| at(Some(&t.to_string()))),
                fence_requested: at(st.fence_requested_at.as_deref()),
                fenced: at(st.fenced_at.as_deref()),
                released: at(st.released_at.as_deref()),
            }
        })
        .collect()
}

/// `target/robustness/summary.json` over every seed's verdicts there.
fn summarize(root: &std::path::Path) -> serde_json::Value {
    let mut runs = 0;
    let mut minutes = 0.0;
    let mut faults: BTreeMap<String, usize> = BTreeMap::new();
    let mut sums: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    let mut avail: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut ratios = Vec::new();
    let mut cluster_ratios = Vec::new();
    let mut recoveries = Vec::new();
    // The real-node suite's partition-heals scenario measures one more incident the same way.
    let heals = root.parent().map(|t| t.join("e2e/recovery.json"));
    if let Some(r) = heals
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    {
        let (total, limit) = (r["total_seconds"].as_f64(), r["limit_seconds"].as_f64());
        if let (Some(t), Some(l)) = (total, limit) {
            ratios.push(t / l);
            if let Some(c) = r["cluster_limit_seconds"].as_f64() {
                cluster_ratios.push(t / c);
            }
            recoveries.push(json!({"incident": "partition-heals (tests/nodes.rs)", "workload": "db",
                "total_seconds": t, "limit_seconds": l, "cluster_limit_seconds": r["cluster_limit_seconds"]}));
        }
    }
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        for mode in ["with", "without"] {
            // Judged again by this checker (pure: a history is data), so that every seed's sums
            // are by the same rules; its verdict file is rewritten with it.
            let Some(h) = std::fs::read_to_string(e.path().join(format!("history-{mode}.json")))
                .ok()
                .and_then(|t| serde_json::from_str::<History>(&t).ok())
            else {
                continue;
            };
            let v = checker::check(&h);
            write(&e.path().join(format!("verdict-{mode}.json")), &v);
            runs += 1;
            minutes += (h.ended_at - h.started_at) / 60.0;
            if mode == "with" {
                for f in &h.faults {
                    *faults.entry(f.kind.clone()).or_default() += 1;
                }
                for r in &v.recovery {
                    ratios.push(r.total_seconds / r.limit_seconds);
                    if let Some(l) = r.cluster_limit_seconds {
                        cluster_ratios.push(r.total_seconds / l);
                    }
                    recoveries.push(json!(r));
                }
            }
            let s = sums.entry(mode).or_default();
            s[0] += v.lost;
            s[1] += v.corrupted;
            s[2] += v.overlaps;
            s[3] += v.releases_without_record;
            avail
                .entry(mode)
                .or_default()
                .extend(v.availability.values());
        }
    }
    let side = |m: &str| {
        let s = sums.get(m).copied().unwrap_or_default();
        json!({"lost": s[0], "corrupted": s[1], "overlaps": s[2], "releases_without_record": s[3]})
    };
    let mean = |m: &str| {
        avail
            .get(m)
            .filter(|v| !v.is_empty())
            .map(|v| v.iter().sum::<f64>() / v.len() as f64)
    };
    let summary = json!({
        "runs": runs,
        "minutes": (minutes * 10.0f64).round() / 10.0,
        "faults": faults,
        "with_volguard": side("with"),
        "without_volguard": side("without"),
        "availability": {"with": mean("with"), "without": mean("without")},
        "recovery": {
            "p50_ratio": checker::quantile(&ratios, 0.5),
            "max_ratio": checker::quantile(&ratios, 1.0),
            "cluster_p50_ratio": checker::quantile(&cluster_ratios, 0.5),
            "cluster_max_ratio": checker::quantile(&cluster_ratios, 1.0),
            "incidents": recoveries,
        },
    });
    write(&root.join("summary.json"), &summary);
    summary
}
