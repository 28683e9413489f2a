//! Growing the cluster directly: each pod with its own claim and volume, created by the bench at a
//! bounded concurrency (not through kube-controller-manager's StatefulSet controller and its
//! client limits), the way a cluster of that size is reached in minutes instead of hours.

use crate::support::harness::ControlPlane;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::{Duration, Instant};

/// Pods per namespace: the first namespace is the finalizer guard's large one (20,000 pods).
pub const PODS_PER_NS: usize = 20_000;
/// Requests in flight while growing (each pod's five writes run in order).
const IN_FLIGHT: usize = 64;
/// Below this much available memory the growth stops where it is: the machine is full (3 GiB
/// left for what follows: cold starts whose LISTs the apiserver buffers, the churn).
pub const MEMORY_FLOOR: u64 = 3 << 30;

/// What the growth leaves above `MEMORY_FLOOR`, once every pod it made runs, for what follows:
/// the churn windows' pods created again, and kube-controller-manager restarted between them,
/// which lists every object anew (docs/performance.md: a run that grew to where only the floor
/// was left ran out in its third window; the run of record that finished began its windows with
/// 7.3 GiB).
pub const WINDOWS_RESERVE: u64 = 4 << 30;

/// What a pod created and not yet running still takes once it starts (its status writes, the
/// scheduler's and kwok's caches): a run stopped with 24,000 pods starting had 7.1 GiB left, and
/// 3.0 once they ran (about 175 KiB each). The growth's memory stop counts it (`Floor::Settled`):
/// a stop on what is available now, with a fixed margin, either stopped at once at 5,000 nodes
/// (9 GiB kept: 45,563 pods) or ran out in the first window (4 GiB kept).
const STARTING_POD: u64 = 192 << 10;

/// When a creation stops for memory.
#[derive(Debug, Clone, Copy)]
pub enum Floor {
    /// `MemAvailable` under this (a churn's creates: their pods start as they go).
    Now(u64),
    /// `MemAvailable` less what the pods not yet running will take (`STARTING_POD` each) under
    /// this, or `MemAvailable` under `MEMORY_FLOOR` (the growth).
    Settled(u64),
}

pub fn namespace_of(i: usize) -> String {
    format!("scale-{}", i / PODS_PER_NS)
}

pub fn claim_of(i: usize) -> String {
    format!("data-{i}")
}

pub fn node_of(i: usize, per_node: usize) -> String {
    format!("fleet-{:05}", i / per_node)
}

/// `MemAvailable` of /proc/meminfo, in bytes.
pub fn mem_available() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Claim `data-i`, bound (its status written, as the PV binder would) to volume `pv-i`, which
/// names it; then pod `p-i` on its node using the claim. The binder finds both consistent and
/// writes nothing. A claim or volume that exists already (a pod recreated by the churn) is kept.
/// A pod made again (`pod_only`, the churn) is left to kube-scheduler, as a StatefulSet's is: a
/// create naming the node its predecessor's lock still names waits for volguard's controller to
/// clear that lock (rules.md §2f), which the bind path absorbs by the scheduler's retry.
async fn one(
    c: &kube::Client,
    i: usize,
    per_node: usize,
    pod_only: bool,
    generation: usize,
) -> Result<(), String> {
    let node = (!pod_only).then(|| node_of(i, per_node));
    let parts = if pod_only { Parts::Pod } else { Parts::All };
    create_one(c, &namespace_of(i), i, node.as_deref(), parts, generation).await
}

/// Pod `i`'s name in its `generation`: the growth makes generation 0 (`p-i`), each churn the next
/// (`p-i-g`). kwok, playing the kubelets, ends a deleted pod with a DELETE by name and no UID
/// precondition (a kubelet sends one), which lands on a pod made again under the same name: at
/// 80,000 pods it removed 5,591 of a churn's 8,056 new pods, minutes after their creates, and the
/// churn placed them all again. Under a new name the late DELETE finds nothing.
pub fn pod_name(i: usize, generation: usize) -> String {
    match generation {
        0 => format!("p-{i}"),
        g => format!("p-{i}-{g}"),
    }
}

/// Churns so far: every churn takes the same pods (the window's), so this is their generation.
static CHURNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// What `create_one` makes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Parts {
    /// The claim and its volume, bound; no pod.
    Claim,
    /// The pod alone (its claim exists).
    Pod,
    All,
}

/// As `one`, in namespace `ns`, on node `node` or through the scheduler.
pub async fn create_one(
    c: &kube::Client,
    ns: &str,
    i: usize,
    node: Option<&str>,
    parts: Parts,
    generation: usize,
) -> Result<(), String> {
    let (claim, volume) = (claim_of(i), format!("pv-{ns}-{i}"));
    let pp = PostParams::default();
    if parts != Parts::Pod {
        let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
        let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": claim, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": volume,
                     "resources": {"requests": {"storage": "1Gi"}}}
        }))
        .map_err(|e| e.to_string())?;
        let uid = match pvcs.create(&pp, &pvc).await {
            Ok(p) => p.metadata.uid.unwrap_or_default(),
            Err(e) if is_conflict(&e) => pvcs
                .get(&claim)
                .await
                .map_err(|e| format!("get claim {ns}/{claim}: {e}"))?
                .metadata
                .uid
                .unwrap_or_default(),
            Err(e) => return Err(format!("create claim {ns}/{claim}: {e}")),
        };
        let bound = json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                                      "capacity": {"storage": "1Gi"}}});
        pvcs.patch_status(&claim, &PatchParams::default(), &Patch::Merge(&bound))
            .await
            .map_err(|e| format!("claim status {ns}/{claim}: {e}"))?;
        let pvs = Api::<PersistentVolume>::all(c.clone());
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": volume, "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                     "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain",
                     "hostPath": {"path": format!("/tmp/volguard-scale/{ns}/{i}")},
                     "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                  "namespace": ns, "name": claim, "uid": uid}}
        }))
        .map_err(|e| e.to_string())?;
        match pvs.create(&pp, &pv).await {
            Ok(_) => {}
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(format!("create volume {volume}: {e}")),
        }
        pvs.patch_status(
            &volume,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": "Bound"}})),
        )
        .await
        .map_err(|e| format!("volume status {volume}: {e}"))?;
    }
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    if parts == Parts::Claim {
        return Ok(());
    }
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": pod_name(i, generation), "labels": {"app": "scale"}},
        // A 1 s grace period (kwok, as a kubelet, deletes a pod when its grace period ends): the
        // churn measures the apiserver and the controllers, not 30 s of waiting. Not evicted from
        // a node gone NotReady: kwok's heartbeats lag on the saturated apiserver, and at 5,000
        // nodes one node's lapsed past the default 300 s, kcm's taint-eviction deleted its 30
        // pods, and the churn's count of the cluster's pods waited on them.
        "spec": {"terminationGracePeriodSeconds": 1,
                 "tolerations": [
                     {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
                     {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}],
                 "containers": [{"name": "app", "image": "registry.invalid/app:1"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}
    }))
    .map_err(|e| e.to_string())?;
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = node.map(str::to_string);
    }
    // A pod made again under the same name on the same node may meet the lock its predecessor
    // left, which volguard's controller clears once that pod is gone; the refusal says to create
    // it again in a moment, and so the bench does (counted in `RETRIES`).
    let mut attempt = 0;
    loop {
        attempt += 1;
        match pods.create(&pp, &pod).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s))
                if s.code == 403 && s.message.contains("in a moment") && attempt < 60 =>
            {
                RETRIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(format!("create pod {ns}/{}: {e}", pod_name(i, generation))),
        }
    }
}

/// Pod creates refused with "create the pod again in a moment" and made again.
pub static RETRIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Why a growth stopped before its last pod.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Stop {
    /// `MemAvailable` fell under the floor it was given: the machine is full.
    Memory,
    /// The growth's time budget ran out: the cluster's creates had slowed to where the size
    /// would take longer than the run may (on 2 cores, kube-apiserver's CPU).
    Time,
}

/// How a growth ended: every pod created (`stopped` empty), or stopped early.
pub struct Grown {
    pub created: usize,
    pub seconds: f64,
    pub stopped: Option<Stop>,
}

/// Create pods `from..to` (with their claims and volumes unless `pod_only`), `IN_FLIGHT` at a
/// time, stopping early once memory falls under `floor` or at `deadline`.
#[allow(clippy::too_many_arguments)]
pub async fn create_pods(
    c: &kube::Client,
    from: usize,
    to: usize,
    per_node: usize,
    pod_only: bool,
    deadline: Option<Instant>,
    generation: usize,
    floor: Floor,
) -> Grown {
    let started = Instant::now();
    let mut said = Instant::now();
    let mut why = None;
    // Set once memory or time runs out: no new pod is started, and those in flight finish, so the pods
    // made are exactly `from..from + created`, none half done.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let mut created = 0;
    let mut results = futures::stream::iter(from..to)
        .take_while(move |_| {
            let go = !stopped.load(std::sync::atomic::Ordering::Relaxed);
            async move { go }
        })
        .map(|i| {
            let c = c.clone();
            async move { one(&c, i, per_node, pod_only, generation).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .boxed();
    while let Some(r) = results.next().await {
        if let Err(e) = r {
            panic!("growing the cluster: {e}");
        }
        created += 1;
        if why.is_none() && created % 500 == 0 {
            if short_of_memory(c, floor, created).await {
                why = Some(Stop::Memory);
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                why = Some(Stop::Time);
            }
            if why.is_some() {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        if said.elapsed() > Duration::from_secs(30) {
            let s = started.elapsed().as_secs_f64();
            println!(
                "  … {created} of {} pods created in {s:.0}s ({:.0}/s), {:.1} GiB available",
                to - from,
                created as f64 / s,
                mem_available() as f64 / (1u64 << 30) as f64
            );
            said = Instant::now();
        }
    }
    Grown {
        created,
        seconds: started.elapsed().as_secs_f64(),
        stopped: why,
    }
}

/// Whether memory is under `floor` (the pods not yet running counted every 2,000 creations: a
/// LIST of the apiserver's watch cache).
async fn short_of_memory(c: &kube::Client, floor: Floor, created: usize) -> bool {
    let available = mem_available();
    match floor {
        Floor::Now(f) => available < f,
        Floor::Settled(f) => {
            if available < MEMORY_FLOOR {
                return true;
            }
            if !created.is_multiple_of(2000) {
                return false;
            }
            // Unknown (the LIST failed): decided on the next count.
            match not_running(c).await {
                usize::MAX => false,
                starting => available.saturating_sub(starting as u64 * STARTING_POD) < f,
            }
        }
    }
}

/// Pods in the cluster, from one quorum page of one item (`remainingItemCount`): a count of
/// 150,000 pods without listing them.
pub async fn pod_total(c: &kube::Client) -> usize {
    let page = Api::<Pod>::all(c.clone())
        .list_metadata(&ListParams::default().limit(1))
        .await
        .expect("count pods");
    page.items.len() + page.metadata.remaining_item_count.unwrap_or(0).max(0) as usize
}

/// Pods not yet Running, from the watch cache.
async fn not_running(c: &kube::Client) -> usize {
    Api::<Pod>::all(c.clone())
        .list_metadata(
            &ListParams::default()
                .match_any()
                .fields("status.phase!=Running"),
        )
        .await
        .map(|l| l.items.len())
        .unwrap_or(usize::MAX)
}

/// Wait until `want` pods exist and all run.
pub async fn wait_running(cp: &ControlPlane, c: &kube::Client, want: usize, within: Duration) {
    let started = Instant::now();
    let mut said = Instant::now();
    loop {
        let (total, pending) = (pod_total(c).await, not_running(c).await);
        if total == want && pending == 0 {
            return;
        }
        assert!(
            started.elapsed() < within,
            "{want} pods running: not reached in {within:?} ({total} pods, {pending} not running)\n{}",
            cp.logs()
        );
        if said.elapsed() > Duration::from_secs(30) {
            println!("  … {total} pods, {pending} not running yet");
            said = Instant::now();
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// Delete pods `from..to` of `generation` (`IN_FLIGHT` at a time) and wait until `left` pods
/// remain.
pub async fn delete_pods(
    cp: &ControlPlane,
    c: &kube::Client,
    (from, to): (usize, usize),
    generation: usize,
    left: usize,
) {
    let errors: Vec<String> = futures::stream::iter(from..to)
        .map(|i| {
            let pods = Api::<Pod>::namespaced(c.clone(), &namespace_of(i));
            async move {
                match pods
                    .delete(&pod_name(i, generation), &DeleteParams::default())
                    .await
                {
                    Ok(_) => None,
                    Err(kube::Error::Api(s)) if s.code == 404 => None,
                    Err(e) => Some(format!("{}: {e}", pod_name(i, generation))),
                }
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .filter_map(|e| async move { e })
        .collect()
        .await;
    assert!(errors.is_empty(), "deleting pods: {errors:?}");
    let started = Instant::now();
    while pod_total(c).await != left {
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "pods {from}..{to} not gone in 30 min\n{}",
            cp.logs()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The churn of one window: pods `from..to` deleted and created again (their claims kept), as a
/// rollout of that many pods would. Returns its seconds and the generation it created.
pub async fn churn(
    cp: &ControlPlane,
    c: &kube::Client,
    from: usize,
    to: usize,
    per_node: usize,
) -> (f64, usize) {
    let started = Instant::now();
    let mut total = pod_total(c).await;
    let generation = CHURNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    delete_pods(cp, c, (from, to), generation, total - (to - from)).await;
    let deleted = started.elapsed().as_secs_f64();
    let generation = generation + 1;
    let floor = Floor::Now(MEMORY_FLOOR);
    let g = create_pods(c, from, to, per_node, true, None, generation, floor).await;
    assert!(
        g.stopped.is_none(),
        "the machine ran out of memory during the churn"
    );
    // The pods are made again under their next generation's name (`pod_name`), so kwok's late
    // DELETE of the last generation finds nothing. Should a pod still go missing, it is made
    // again, and counted, until every pod of the window runs.
    // Only a count is read while nothing is missing: listing the window's namespaces every
    // 10 s would add its bytes to the very window whose apiserver load is measured.
    let waited = Instant::now();
    loop {
        let now = pod_total(c).await;
        if now < total {
            let missing = missing_pods(c, from, to, generation).await;
            if missing.is_empty() {
                // Gone from outside the window (an eviction): not the churn's to make again, and
                // waiting on them would wait forever.
                println!(
                    "  … {} pods outside the churned window are gone: counted from {now}",
                    total - now
                );
                total = now;
                continue;
            }
            KWOK_DELETED.fetch_add(missing.len(), std::sync::atomic::Ordering::Relaxed);
            println!(
                "  … {} churned pods removed by kwok's late DELETE: made again",
                missing.len()
            );
            for i in missing {
                one(c, i, per_node, true, generation)
                    .await
                    .unwrap_or_else(|e| panic!("making a churned pod again: {e}"));
            }
        } else if not_running(c).await == 0 {
            break;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(1800),
            "the churned pods {from}..{to} not all running in 30 min\n{}",
            cp.logs()
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    // Where a slow window's time went: the deletes (kwok's final DELETE, the force-delete rule),
    // the creates (the pod webhooks), or the wait until they run (the scheduler's binds).
    let all = started.elapsed().as_secs_f64();
    println!(
        "  churn of {} pods: gone in {deleted:.0} s, created in {:.0} s, all running {:.0} s later",
        to - from,
        g.seconds,
        all - deleted - g.seconds
    );
    (all, generation)
}

/// Churned pods made again after kwok's late final DELETE removed them.
pub static KWOK_DELETED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The pods of `from..to` in `generation` that do not exist.
async fn missing_pods(c: &kube::Client, from: usize, to: usize, generation: usize) -> Vec<usize> {
    let mut have = std::collections::HashSet::new();
    let namespaces: std::collections::BTreeSet<String> = (from..to).map(namespace_of).collect();
    for ns in namespaces {
        let list = Api::<Pod>::namespaced(c.clone(), &ns)
            .list_metadata(&ListParams::default())
            .await
            .expect("list pods");
        have.extend(list.items.into_iter().filter_map(|p| p.metadata.name));
    }
    (from..to)
        .filter(|i| !have.contains(&pod_name(*i, generation)))
        .collect()
}
