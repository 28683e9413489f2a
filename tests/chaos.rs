//! Chaos on the real control plane: random pod/PVC operations, force-delete and finalizer-strip
//! attempts and node deletions, while the controller leader, the webhook and kube-apiserver itself
//! are killed and restarted. Afterwards an oracle replays the complete etcd history of pods and
//! PVCs in resourceVersion order (kube-apiserver runs without watch cache and without compaction,
//! so a watch from the first revision returns every event) and checks:
//! 1. no PVC was deleted while a scheduled pod naming it existed;
//! 2. every PVC whose pods are gone is released;
//! 3. no force delete of a running pod by a controller identity succeeded, volguard up or down
//!    (the force-delete webhook is registered Fail).
//!
//! `VOLGUARD_CHAOS_SECONDS` (default 20) bounds the run, `VOLGUARD_CHAOS_SEED` reproduces one.

mod support;

use support::harness;

use futures::StreamExt;
use harness::{ControlPlane, Profile};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolumeClaim, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// splitmix64: a tiny deterministic generator, so a seed reproduces a run's choices.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const NS: &str = "chaos";
const NODES: [&str; 4] = ["n0", "n1", "n2", "n3"];

#[derive(Default)]
struct Stats {
    ops: BTreeMap<&'static str, usize>,
    faults: BTreeMap<&'static str, usize>,
    force_successes_with_webhook_up: Vec<String>,
}

async fn chaos_client(cp: &ControlPlane) -> kube::Client {
    cp.admin().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane that `make e2e` builds (it runs the ignored tests)"]
async fn chaos_invariants() {
    let seconds: u64 = std::env::var("VOLGUARD_CHAOS_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("VOLGUARD_CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(7)
        });
    println!("chaos seed {seed} ({seconds} s): reproduce with VOLGUARD_CHAOS_SEED={seed}");
    let mut rng = Rng(seed);
    let mut cp = ControlPlane::start_with(
        Profile::Standalone,
        &["--watch-cache=false", "--etcd-compaction-interval=0"],
    )
    .await;
    cp.install_manifests().await;
    cp.start_webhook().await;
    cp.start_controller("replica-a").await;
    cp.start_controller("replica-b").await;
    let c = chaos_client(&cp).await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("ns");
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("ns");
    for n in NODES {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": n}})).expect("node");
        Api::<Node>::all(c.clone())
            .create(&PostParams::default(), &node)
            .await
            .expect("node");
    }
    let start_rv = Api::<Pod>::namespaced(c.clone(), NS)
        .list_metadata(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");

    let mut stats = Stats::default();
    let mut webhook_up = true;
    let mut apiserver_up = true;
    let mut next_fault = Instant::now() + Duration::from_secs(3);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut k = 0usize;
    while Instant::now() < deadline {
        // Faults: one at a time, each undone before the next is injected.
        if Instant::now() >= next_fault && webhook_up && apiserver_up {
            match rng.below(3) {
                0 => {
                    // Kill the replica holding the Lease and start it again (as a follower now).
                    let lease = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
                        c.clone(),
                        "volguard-system",
                    )
                    .get_opt("volguard-controller")
                    .await
                    .ok()
                    .flatten();
                    let holder = lease
                        .and_then(|l| l.spec?.holder_identity)
                        .unwrap_or_default();
                    let target = format!("volguard-controller-{holder}");
                    for p in cp.controllers.iter_mut().filter(|p| p.name == target) {
                        p.kill();
                    }
                    cp.controllers
                        .retain_mut(|p| p.child.try_wait().ok().flatten().is_none());
                    if !holder.is_empty() {
                        cp.start_controller(&holder).await;
                    }
                    *stats.faults.entry("controller leader killed").or_default() += 1;
                }
                1 => {
                    cp.stop_webhook();
                    webhook_up = false;
                    *stats.faults.entry("webhook killed").or_default() += 1;
                }
                _ => {
                    cp.kill_apiserver();
                    apiserver_up = false;
                    *stats.faults.entry("kube-apiserver killed").or_default() += 1;
                }
            }
            next_fault = Instant::now() + Duration::from_millis(1500 + rng.below(2000) as u64);
        } else if (!webhook_up || !apiserver_up) && rng.below(4) == 0 {
            if !apiserver_up {
                cp.start_apiserver().await;
                apiserver_up = true;
            }
            if !webhook_up {
                cp.start_webhook().await;
                webhook_up = true;
            }
            if cp
                .controllers
                .iter_mut()
                .all(|p| p.child.try_wait().ok().flatten().is_some())
            {
                cp.start_controller("replica-a").await;
            }
        }
        k += 1;
        let op = random_op(&cp, &mut rng, k, &mut stats).await;
        *stats.ops.entry(op).or_default() += 1;
    }

    // Settle: everything up, then remove all pods and PVCs; every PVC must be released.
    if !apiserver_up {
        cp.start_apiserver().await;
    }
    if !webhook_up {
        cp.start_webhook().await;
    }
    if cp
        .controllers
        .iter_mut()
        .all(|p| p.child.try_wait().ok().flatten().is_some())
    {
        cp.start_controller("replica-a").await;
    }
    let c = chaos_client(&cp).await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), NS);
    for p in pvcs.list(&ListParams::default()).await.expect("list").items {
        let _ = pvcs
            .delete(
                &p.metadata.name.unwrap_or_default(),
                &DeleteParams::default(),
            )
            .await;
    }
    let pods = Api::<Pod>::namespaced(c.clone(), NS);
    for p in pods.list(&ListParams::default()).await.expect("list").items {
        remove_pod(&cp, &p).await;
    }
    let released = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let left = pvcs
                .list_metadata(&ListParams::default())
                .await
                .map(|l| l.items.len())
                .unwrap_or(usize::MAX);
            if left == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    let unreleased: Vec<String> = pvcs
        .list_metadata(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect()
        })
        .unwrap_or_default();

    // Oracle over the complete history.
    let violations = oracle(&c, NS, &start_rv).await;
    oracle_self_check(&cp, &start_rv).await;
    let total_ops: usize = stats.ops.values().sum();
    let total_faults: usize = stats.faults.values().sum();
    println!("operations: {total_ops} {:?}", stats.ops);
    println!("faults injected: {total_faults} {:?}", stats.faults);
    println!(
        "violations: {} (deleted-while-used {}, unreleased {}, controller force deletes {})",
        violations.len() + unreleased.len() + stats.force_successes_with_webhook_up.len(),
        violations.len(),
        unreleased.len(),
        stats.force_successes_with_webhook_up.len()
    );
    println!("seed {seed}");
    assert!(
        total_ops > 10 && total_faults > 0,
        "the run did too little to mean anything"
    );
    assert!(
        violations.is_empty(),
        "PVCs deleted while a scheduled pod used them: {violations:?}\n{}",
        cp.logs()
    );
    assert!(
        released.is_ok() && unreleased.is_empty(),
        "PVCs never released: {unreleased:?}\n{}",
        cp.logs()
    );
    assert!(
        stats.force_successes_with_webhook_up.is_empty(),
        "controllers force-deleted running pods: {:?}",
        stats.force_successes_with_webhook_up
    );
}

/// Remove a pod the way the cluster would: its kubelet deletes it (grace 0); for a pod whose node
/// is gone, PodGC's identity does.
async fn remove_pod(cp: &ControlPlane, p: &Pod) {
    let name = p.metadata.name.clone().unwrap_or_default();
    let node = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let kubelet = Api::<Pod>::namespaced(cp.kubelet(&node).await, NS);
    if kubelet.delete(&name, &force).await.is_ok() {
        return;
    }
    let gc = cp
        .client_as(
            "system:serviceaccount:kube-system:pod-garbage-collector",
            &["system:masters"],
        )
        .await;
    let _ = Api::<Pod>::namespaced(gc, NS).delete(&name, &force).await;
}

async fn random_op(cp: &ControlPlane, rng: &mut Rng, k: usize, stats: &mut Stats) -> &'static str {
    let c = cp.admin().await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), NS);
    let pods = Api::<Pod>::namespaced(c.clone(), NS);
    let claim = format!("c-{}", rng.below(12));
    match rng.below(8) {
        0 | 1 => {
            let p: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": claim},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": ""}})).expect("pvc");
            let _ = pvcs.create(&PostParams::default(), &p).await;
            "create pvc"
        }
        2 | 3 => {
            let node = NODES[rng.below(NODES.len())];
            let pod: Pod = serde_json::from_value(
                json!({"metadata": {"name": format!("p-{k}")}, "spec": {"nodeName": node,
                "containers": [{"name": "c", "image": "example.invalid/c"}],
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]}}),
            )
            .expect("pod");
            if pods.create(&PostParams::default(), &pod).await.is_ok() {
                let _ = pods
                    .patch_status(
                        &format!("p-{k}"),
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": {"phase": "Running"}})),
                    )
                    .await;
            }
            "create pod"
        }
        4 => {
            let _ = pvcs.delete(&claim, &DeleteParams::default()).await;
            "delete pvc"
        }
        5 => {
            if let Some(p) = pick(&pods, rng).await {
                remove_pod(cp, &p).await;
            }
            "delete pod (kubelet)"
        }
        6 => {
            // A controller tries to force-delete a running pod.
            if let Some(p) = pick(&pods, rng).await {
                let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                let name = p.metadata.name.clone().unwrap_or_default();
                let sts = cp
                    .client_as(
                        "system:serviceaccount:kube-system:statefulset-controller",
                        &["system:masters"],
                    )
                    .await;
                let force = DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                };
                let node_exists = Api::<Node>::all(c.clone())
                    .get_opt(
                        p.spec
                            .as_ref()
                            .and_then(|s| s.node_name.as_deref())
                            .unwrap_or_default(),
                    )
                    .await
                    .ok()
                    .flatten()
                    .is_some();
                if Api::<Pod>::namespaced(sts, NS)
                    .delete(&name, &force)
                    .await
                    .is_ok()
                    && running
                    && node_exists
                {
                    // Fail closed (rules.md §2d): volguard down or not, this must not succeed.
                    stats.force_successes_with_webhook_up.push(name);
                }
            }
            "force delete attempt (controller)"
        }
        _ => {
            if rng.below(3) == 0 {
                // Node deletion: a confirmed partition; PodGC may then force-delete its pods.
                let node = NODES[rng.below(NODES.len())];
                let _ = Api::<Node>::all(c.clone())
                    .delete(node, &DeleteParams::default())
                    .await;
                let n: Node =
                    serde_json::from_value(json!({"metadata": {"name": node}})).expect("node");
                tokio::time::sleep(Duration::from_millis(200)).await;
                let _ = Api::<Node>::all(c.clone())
                    .create(&PostParams::default(), &n)
                    .await;
                "node deleted and recreated"
            } else {
                let _ = pvcs
                    .patch(
                        &claim,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                    )
                    .await;
                "finalizer strip attempt"
            }
        }
    }
}

async fn pick(pods: &Api<Pod>, rng: &mut Rng) -> Option<Pod> {
    let list = pods.list(&ListParams::default()).await.ok()?;
    if list.items.is_empty() {
        return None;
    }
    let i = rng.below(list.items.len());
    list.items.into_iter().nth(i)
}

enum Ev {
    Pod {
        rv: u64,
        deleted: bool,
        pod: Box<Pod>,
    },
    Pvc {
        rv: u64,
        deleted: bool,
        name: String,
    },
}

fn rv_of(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    m.resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// Every pod and PVC event since `from` (etcd keeps it all), merged in resourceVersion order;
/// returns the PVC deletions that happened while a scheduled pod naming the claim existed.
async fn oracle(c: &kube::Client, ns: &str, from: &str) -> Vec<String> {
    let end: u64 = Api::<Pod>::namespaced(c.clone(), ns)
        .list_metadata(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .and_then(|r| r.parse().ok())
        .expect("rv");
    let mut events = Vec::new();
    let wp = WatchParams::default().timeout(10);
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let mut s = pods.watch(&wp, from).await.expect("pod history").boxed();
    while let Ok(Some(Ok(ev))) = tokio::time::timeout(Duration::from_secs(3), s.next()).await {
        match ev {
            WatchEvent::Added(p) | WatchEvent::Modified(p) => events.push(Ev::Pod {
                rv: rv_of(&p.metadata),
                deleted: false,
                pod: Box::new(p),
            }),
            WatchEvent::Deleted(p) => events.push(Ev::Pod {
                rv: rv_of(&p.metadata),
                deleted: true,
                pod: Box::new(p),
            }),
            WatchEvent::Bookmark(b)
                if b.metadata.resource_version.parse::<u64>().unwrap_or(0) >= end =>
            {
                break;
            }
            WatchEvent::Error(e) => {
                panic!("history watch failed: {e:?} (is etcd history compacted?)")
            }
            _ => {}
        }
        if events
            .last()
            .is_some_and(|e| matches!(e, Ev::Pod { rv, .. } if *rv >= end))
        {
            break;
        }
    }
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let mut s = pvcs.watch(&wp, from).await.expect("pvc history").boxed();
    while let Ok(Some(Ok(ev))) = tokio::time::timeout(Duration::from_secs(3), s.next()).await {
        match ev {
            WatchEvent::Added(p) | WatchEvent::Modified(p) => events.push(Ev::Pvc {
                rv: rv_of(&p.metadata),
                deleted: false,
                name: p.metadata.name.unwrap_or_default(),
            }),
            WatchEvent::Deleted(p) => events.push(Ev::Pvc {
                rv: rv_of(&p.metadata),
                deleted: true,
                name: p.metadata.name.unwrap_or_default(),
            }),
            WatchEvent::Error(e) => panic!("history watch failed: {e:?}"),
            _ => {}
        }
    }
    events.sort_by_key(|e| match e {
        Ev::Pod { rv, .. } | Ev::Pvc { rv, .. } => *rv,
    });
    let mut live: HashMap<String, Pod> = HashMap::new();
    let mut violations = Vec::new();
    let mut deleted = HashSet::new();
    for e in events {
        match e {
            Ev::Pod {
                deleted: true, pod, ..
            } => {
                live.remove(pod.metadata.name.as_deref().unwrap_or_default());
            }
            Ev::Pod { pod, .. } => {
                live.insert(pod.metadata.name.clone().unwrap_or_default(), *pod);
            }
            Ev::Pvc {
                deleted: true,
                name,
                rv,
            } => {
                deleted.insert(name.clone());
                let users: Vec<&String> = live
                    .iter()
                    .filter(|(_, p)| {
                        let spec = p.spec.as_ref();
                        spec.and_then(|s| s.node_name.as_deref())
                            .is_some_and(|n| !n.is_empty())
                            && spec.and_then(|s| s.volumes.as_ref()).is_some_and(|v| {
                                v.iter().any(|v| {
                                    v.persistent_volume_claim
                                        .as_ref()
                                        .is_some_and(|c| c.claim_name == name)
                                })
                            })
                    })
                    .map(|(n, _)| n)
                    .collect();
                if !users.is_empty() {
                    violations.push(format!(
                        "PVC {name} deleted at rv {rv} while pods {users:?} existed"
                    ));
                }
            }
            Ev::Pvc { .. } => {}
        }
    }
    println!(
        "oracle: replayed history, {} PVC deletions checked",
        deleted.len()
    );
    violations
}

/// The oracle must be able to fail: break glass on a used claim, delete it, and expect exactly
/// that deletion to be reported (in a namespace of its own, outside the chaos run).
async fn oracle_self_check(cp: &ControlPlane, from: &str) {
    let c = cp.admin().await;
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "oracle-check"}})).expect("ns");
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("ns");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "oracle-check");
    let p: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "victim"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": ""}})).expect("pvc");
    pvcs.create(&PostParams::default(), &p).await.expect("pvc");
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "user"}, "spec": {"nodeName": "n0",
        "containers": [{"name": "c", "image": "example.invalid/c"}],
        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "victim"}}]}}),
    )
    .expect("pod");
    Api::<Pod>::namespaced(c.clone(), "oracle-check")
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    // Delete first: a terminating claim is never re-protected by the controller's backfill, so
    // the break glass that follows removes it at once, under its running pod.
    pvcs.delete("victim", &DeleteParams::default())
        .await
        .expect("delete");
    // Break glass is a person's override set in one request (judged, stamped), used in the next.
    for step in [
        json!({"metadata": {"annotations": {"volguard.io/allow-finalizer-removal": "true"}}}),
        json!({"metadata": {"finalizers": null}}),
    ] {
        pvcs.patch("victim", &PatchParams::default(), &Patch::Merge(step))
            .await
            .expect("break glass");
    }
    assert!(
        pvcs.get_opt("victim").await.expect("get").is_none(),
        "the claim is gone"
    );
    let found = oracle(&c, "oracle-check", from).await;
    assert_eq!(
        found.len(),
        1,
        "the oracle must report exactly the deletion under a running pod: {found:?}"
    );
    println!("oracle self-check: violation detected as it must be ({found:?})");
}
