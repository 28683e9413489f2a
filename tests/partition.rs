//! Partition healing (docs/fencing.md) among the real control loops: kube-controller-manager's
//! node-lifecycle, taint-eviction and PodGC controllers, kube-scheduler, StatefulSets, kwok
//! nodes (a partition is a node's kwok stopped, so its Lease stops), volguard's webhook and
//! controller, and volguard's reference fence agent running a script per node. Every scenario
//! prints `scenario NAME: ok`; `make e2e` runs this file on each Kubernetes version it builds.
//!
//! A checker samples the scenario's pods every 300 ms and fails the scenario if a ReadWriteOnce
//! claim is ever used by non-terminal pods on two nodes of which more than one is unfenced (the
//! agent's marker files are the ground truth of "fenced").

mod support;

use support::harness::{self, ControlPlane, Profile};
use support::objects::*;
use support::shared::Body;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use volguard::model::fence::{NodeFence, Phase};

const LONG: Duration = Duration::from_secs(150);
/// The shared nodes replacement pods move to.
const SHARED_NODES: [&str; 2] = ["kwok-1", "kwok-2"];
const OOS: &str = "node.kubernetes.io/out-of-service";

// ---------------------------------------------------------------- the cluster

struct Shared {
    cp: ControlPlane,
    /// The fence agent's directory: its scripts, its ledger, one behaviour file per node and the
    /// marker files of fenced nodes.
    agent_dir: PathBuf,
    /// Stopped with the cluster.
    _agent: harness::Proc,
}

static CLUSTER: std::sync::Mutex<Option<Shared>> = std::sync::Mutex::new(None);

async fn start_cluster() -> Shared {
    let mut cp = ControlPlane::start(Profile::Cluster).await;
    let version = cp.admin().await.apiserver_version().await.expect("version");
    println!(
        "\nkube-apiserver {} with kube-controller-manager (node-lifecycle, taint eviction, PodGC), kube-scheduler, kwok nodes",
        version.git_version
    );
    cp.install_manifests().await;
    // csi-addons' NetworkFence (the fields volguard uses), for the networkfence backend.
    harness::apply_file(
        &cp.admin().await,
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("e2e/csi-addons/networkfence-crd.yaml"),
        false,
    )
    .await;
    // The webhook judges "is this node alive" with the controller's partition window.
    cp.serve_extra = vec![
        "--partition-after=10s".into(),
        format!("--trusted-remediator={FAR}=taint"),
        format!("--trusted-remediator={CAPI}=delete-node"),
    ];
    cp.start_webhook().await;
    let d = cp.dir.path().to_path_buf();
    let agent_dir = d.join("agent");
    std::fs::create_dir_all(agent_dir.join("behaviour")).expect("agent dir");
    std::fs::create_dir_all(agent_dir.join("fenced")).expect("agent dir");
    // What an operator's fence script does, per node: the test writes each node's behaviour.
    std::fs::write(
        agent_dir.join("fence.sh"),
        "d=$(dirname \"$0\"); export FENCED=\"$d/fenced/$NODE\"\n\
         [ -f \"$d/behaviour/$NODE.fence\" ] || { echo \"no behaviour for $NODE\" >&2; exit 1; }\n\
         exec sh \"$d/behaviour/$NODE.fence\"\n",
    )
    .expect("fence.sh");
    std::fs::write(
        agent_dir.join("unfence.sh"),
        "d=$(dirname \"$0\"); export FENCED=\"$d/fenced/$NODE\"\n\
         [ -f \"$d/behaviour/$NODE.unfence\" ] && exec sh \"$d/behaviour/$NODE.unfence\"\n\
         rm -f \"$FENCED\"\n",
    )
    .expect("unfence.sh");
    let port = harness::free_port();
    let agent = cp.spawn_fence_agent(&agent_dir, port);
    // The cluster's node monitor is shortened (16 s grace), not volguard's logic.
    cp.controller_extra = vec![
        "--partition-after=10s".into(),
        "--max-unhealthy-nodes=1".into(),
        "--max-concurrent-fences=2".into(),
        "--fence-backends=webhook,manual".into(),
        format!("--fence-webhook-url=https://127.0.0.1:{port}/"),
        format!(
            "--fence-webhook-ca={}",
            d.join("webhook-certs/ca.crt").display()
        ),
        "--fence-webhook-timeout=8s".into(),
        "--manual-fence-timeout=10m".into(),
        "--fencing-interval=1s".into(),
        "--networkfence-driver=e2e.csi.volguard.io".into(),
        "--networkfence-timeout=30s".into(),
    ];
    cp.start_controller("replica-a").await;
    let c = cp.admin().await;
    classes(&c).await;
    for n in SHARED_NODES {
        cp.kwok_node(n).await;
    }
    for ns in [
        "p-fenced",
        "p-lying",
        "p-timeout",
        "p-heals",
        "p-zombie",
        "p-storm",
        "p-restart",
        "p-optout",
        "p-guards",
        "p-netfence",
        "p-partial",
        "p-maint",
        "p-reboot",
        "p-far",
        "p-capi",
    ] {
        namespace(&c, ns).await;
    }
    Shared {
        cp,
        agent_dir,
        _agent: agent,
    }
}

/// Before each scenario: webhook and controller run, the shared nodes take pods, and no node of
/// an earlier scenario is left (a partitioned leftover would count toward the storm limit).
async fn prepare(s: &mut Shared) {
    s.cp.ensure_running().await;
    for n in SHARED_NODES {
        let _ = s.cp.cordon(n, false).await;
    }
    let nodes = Api::<Node>::all(s.cp.admin().await);
    let all = nodes.list(&ListParams::default()).await.expect("nodes");
    for n in all.items {
        let name = n.metadata.name.unwrap_or_default();
        if !SHARED_NODES.contains(&name.as_str()) {
            remove_node(&mut s.cp, &name).await;
        }
    }
}

fn scenario(name: &str, f: impl for<'a> FnOnce(&'a mut Shared) -> Body<'a>) {
    support::shared::scenario(
        &CLUSTER,
        || Box::pin(start_cluster()),
        |s| Box::pin(prepare(s)),
        |s| s.cp.logs(),
        name,
        f,
    );
}

/// Storage classes that opted in (`auto`, `manual`); the default class has not.
async fn classes(c: &kube::Client) {
    use k8s_openapi::api::storage::v1::StorageClass;
    for (name, mode, default) in [
        ("e2e-hostpath", None, true),
        ("fence-auto", Some("auto"), false),
        ("fence-manual", Some("manual"), false),
        ("fence-network", Some("auto"), false),
    ] {
        let mut ann = serde_json::Map::new();
        if default {
            ann.insert(
                "storageclass.kubernetes.io/is-default-class".into(),
                json!("true"),
            );
        }
        if let Some(m) = mode {
            ann.insert("volguard.io/fencing".into(), json!(m));
        }
        if name == "fence-network" {
            ann.insert("volguard.io/fence-backends".into(), json!("networkfence"));
        }
        let sc: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": ann},
            "provisioner": "kubernetes.io/host-path", "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate"
        }))
        .expect("storage class");
        Api::<StorageClass>::all(c.clone())
            .create(&PostParams::default(), &sc)
            .await
            .expect("create storage class");
    }
}

/// The remediators the partition cluster trusts (`--trusted-remediator`), as their own
/// ServiceAccounts authenticate: medik8s fence-agents-remediation (taint) and cluster-api (delete-node).
const FAR: &str = "system:serviceaccount:medik8s:fence-agents-remediation-controller-manager";
const CAPI: &str = "system:serviceaccount:capi-system:capi-controller-manager";

// ---------------------------------------------------------------- helpers

/// A one-replica StatefulSet whose pod may run on `node` or kwok-1, tolerating unreachability
/// for `forgive` seconds (the pods' "forgiveness" volguard waits out).
fn statefulset(name: &str, class: &str, node: &str, forgive: i64) -> StatefulSet {
    let on = json!({"key": "kubernetes.io/hostname", "operator": "In", "values": [node, "kwok-1"]});
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": 1, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "example.invalid/app:1",
                                             "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                             "terminationGracePeriodSeconds": 5,
                             "tolerations": [
                                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": forgive},
                                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": forgive}],
                             "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                {"nodeSelectorTerms": [{"matchExpressions": [on]}]}}}}},
                 "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                             "resources": {"requests": {"storage": "1Gi"}}}}]}
    }))
    .expect("statefulset")
}

/// Start node `node` and a StatefulSet `name` whose pod runs on it (kwok-1 is cordoned while the
/// pod is placed). Returns the running pod.
async fn workload(cp: &mut ControlPlane, ns: &str, name: &str, class: &str, node: &str) -> Pod {
    workload_forgiving(cp, ns, name, class, node, 2).await
}

/// As `workload`, its pod tolerating unreachability for `forgive` seconds.
async fn workload_forgiving(
    cp: &mut ControlPlane,
    ns: &str,
    name: &str,
    class: &str,
    node: &str,
    forgive: i64,
) -> Pod {
    cp.kwok_node(node).await;
    let c = cp.admin().await;
    cp.cordon("kwok-1", true).await.expect("cordon");
    Api::<StatefulSet>::namespaced(c.clone(), ns)
        .create(
            &PostParams::default(),
            &statefulset(name, class, node, forgive),
        )
        .await
        .expect("statefulset");
    let pod = running_on(cp, ns, &format!("{name}-0"), Some(node)).await;
    cp.cordon("kwok-1", false).await.expect("uncordon");
    pod
}

/// The pod once Running (on `node` when given), not being deleted.
async fn running_on(cp: &ControlPlane, ns: &str, name: &str, node: Option<&str>) -> Pod {
    let pods = Api::<Pod>::namespaced(cp.admin().await, ns);
    cp.eventually(
        &format!("pod {ns}/{name} Running on {node:?}"),
        LONG,
        || {
            let pods = pods.clone();
            async move {
                let p = pods.get(name).await.ok()?;
                let phase = p.status.as_ref()?.phase.as_deref()?;
                let on = p.spec.as_ref()?.node_name.as_deref();
                (phase == "Running"
                    && p.metadata.deletion_timestamp.is_none()
                    && node.is_none_or(|n| on == Some(n)))
                .then_some(p)
            }
        },
    )
    .await
}

fn behave(s: &Shared, node: &str, fence: &str, unfence: Option<&str>) {
    let b = s.agent_dir.join("behaviour");
    std::fs::write(b.join(format!("{node}.fence")), fence).expect("behaviour");
    if let Some(u) = unfence {
        std::fs::write(b.join(format!("{node}.unfence")), u).expect("behaviour");
    }
}

/// The agent's ledger entry of an incident's action: (calls, runs).
fn ledger(s: &Shared, incident: &str, action: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(s.agent_dir.join("ledger.json")).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let o = &v[incident][action];
    (
        o["calls"].as_u64().unwrap_or(0),
        o["runs"].as_u64().unwrap_or(0),
    )
}

async fn incidents(c: &kube::Client, node: &str) -> Vec<NodeFence> {
    volguard::state::fences::api(c.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|o| volguard::state::fences::decode(o).ok())
        .filter(|f| f.spec.node == node)
        .collect()
}

/// The node's incident once it reaches `phase`.
async fn incident_in(cp: &ControlPlane, node: &str, phase: Phase, within: Duration) -> NodeFence {
    let c = cp.admin().await;
    cp.eventually(
        &format!("an incident for node {node} in phase {}", phase.as_str()),
        within,
        || {
            let c = c.clone();
            async move {
                incidents(&c, node)
                    .await
                    .into_iter()
                    .find(|f| f.status.phase == phase)
            }
        },
    )
    .await
}

fn steps(f: &NodeFence) -> Vec<&str> {
    f.status.evidence.iter().map(|e| e.step.as_str()).collect()
}

fn print_record(f: &NodeFence) {
    println!(
        "  nodefence/{} node={} phase={} backend={:?} leaseRenewTime={:?} confirmedBy={:?}",
        f.metadata.name,
        f.spec.node,
        f.status.phase.as_str(),
        f.status.backend.map(|b| b.as_str()),
        f.status.lease_renew_time,
        f.status.confirmed_by
    );
    for e in &f.status.evidence {
        println!("    {} {:<16} {}", e.time, e.step, e.message);
    }
}

async fn tainted(c: &kube::Client, node: &str) -> bool {
    Api::<Node>::all(c.clone())
        .get_opt(node)
        .await
        .ok()
        .flatten()
        .and_then(|n| n.spec?.taints)
        .is_some_and(|t| t.iter().any(|t| t.key == OOS))
}

async fn ready(c: &kube::Client, node: &str) -> Option<bool> {
    let n = Api::<Node>::all(c.clone()).get_opt(node).await.ok()??;
    n.status?
        .conditions?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status == "True")
}

async fn not_ready(cp: &ControlPlane, node: &str) {
    let c = cp.admin().await;
    cp.eventually(&format!("node {node} NotReady"), LONG, || {
        let c = c.clone();
        async move { (ready(&c, node).await == Some(false)).then_some(()) }
    })
    .await;
}

async fn event_reasons(c: &kube::Client, ns: &str, name: &str) -> BTreeSet<String> {
    Api::<Event>::namespaced(c.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| e.reason)
        .collect()
}

async fn controller_metric(cp: &ControlPlane, name: &str) -> f64 {
    let mut total = 0.0;
    for p in &cp.controller_probes {
        let text = metrics_text(*p).await;
        total += text
            .lines()
            .filter(|l| {
                l.starts_with(name) && (l.len() == name.len() || !l[name.len()..].starts_with('_'))
            })
            .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .sum::<f64>();
    }
    total
}

/// The invariant of rules.md §7, sampled every 300 ms while a scenario runs.
struct Checker {
    violations: Arc<Mutex<Vec<String>>>,
    samples: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Checker {
    fn start(c: &kube::Client, ns: &str, fenced_dir: PathBuf) -> Checker {
        let violations = Arc::new(Mutex::new(Vec::new()));
        let samples = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (v, n, pods) = (
            violations.clone(),
            samples.clone(),
            Api::<Pod>::namespaced(c.clone(), ns),
        );
        let task = tokio::spawn(async move {
            loop {
                if let Ok(list) = pods.list(&ListParams::default()).await {
                    let mut nodes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
                    for p in &list.items {
                        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                        if matches!(phase, Some("Succeeded" | "Failed")) {
                            continue;
                        }
                        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                            continue;
                        };
                        for vol in p.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
                            if let Some(c) = &vol.persistent_volume_claim {
                                nodes
                                    .entry(c.claim_name.clone())
                                    .or_default()
                                    .insert(node.clone());
                            }
                        }
                    }
                    for (claim, on) in nodes {
                        let unfenced: Vec<&String> =
                            on.iter().filter(|n| !fenced_dir.join(n).exists()).collect();
                        if on.len() > 1 && unfenced.len() > 1 {
                            v.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                                "claim {claim} used on nodes {on:?}, unfenced {unfenced:?}"
                            ));
                        }
                    }
                    n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        Checker {
            violations,
            samples,
            task,
        }
    }

    /// Stop sampling; fail on any violation.
    fn finish(self) -> usize {
        self.task.abort();
        let v = self
            .violations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        assert!(v.is_empty(), "rules.md §7 invariant broken: {v:#?}");
        self.samples.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Remove a scenario's node (its kwok first): the incident ends `Done`, PodGC cleans up.
async fn forget_node(cp: &mut ControlPlane, node: &str) {
    remove_node(cp, node).await;
}

/// Remove a node whatever is left on it. volguard refuses deleting a Node whose pods use claims
/// without proof (rules.md §7): so the node is cordoned and stopped, and when a plain delete is
/// refused, its pods are force-deleted by a person who accepts the risk (the force-delete rule's
/// row 8: test cleanup), which drains it.
async fn remove_node(cp: &mut ControlPlane, node: &str) {
    let c = cp.admin().await;
    let nodes = Api::<Node>::all(c.clone());
    let _ = cp.cordon(node, true).await;
    cp.stop_kwok(node);
    for _ in 0..30 {
        match nodes.delete(node, &DeleteParams::default()).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 404 => return,
            Err(_) => {}
        }
        let on = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let pods = Api::<Pod>::all(c.clone())
            .list(&on)
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let confirm = Patch::Merge(
            json!({"metadata": {"annotations": {"volguard.io/confirm-force-delete": "true"}}}),
        );
        for p in pods {
            let (ns, name) = (
                p.metadata.namespace.unwrap_or_default(),
                p.metadata.name.unwrap_or_default(),
            );
            let api = Api::<Pod>::namespaced(c.clone(), &ns);
            let _ = api.patch(&name, &PatchParams::default(), &confirm).await;
            let _ = api.delete(&name, &force()).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("node {node} could not be removed");
}

// ---------------------------------------------------------------- scenarios

async fn s_partition_fenced(s: &mut Shared) {
    let (ns, node) = ("p-fenced", "pf");
    let pod = workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    // The agent "powers the machine off": its kwok never comes back.
    behave(s, node, "touch \"$FENCED\"", None);
    let t0 = Instant::now();
    s.cp.stop_kwok(node);
    // Until a fence is proven, no taint.
    let c2 = c.clone();
    let early = tokio::spawn(async move {
        loop {
            let fenced = incidents(&c2, node)
                .await
                .iter()
                .any(|f| matches!(f.status.phase, Phase::Fenced | Phase::Released));
            if tainted(&c2, node).await && !fenced {
                return true;
            }
            if fenced {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let f = incident_in(&s.cp, node, Phase::Released, LONG).await;
    assert!(
        !early.await.expect("watch"),
        "the taint came before the fence was proven"
    );
    let fenced_in = t0.elapsed();
    assert_eq!(
        steps(&f),
        ["detected", "fence-requested", "fenced", "released"],
        "incident steps"
    );
    assert!(
        tainted(&c, node).await,
        "out-of-service taint after release"
    );
    let n = Api::<Node>::all(c.clone()).get(node).await.expect("node");
    assert_eq!(
        n.metadata
            .annotations
            .unwrap_or_default()
            .get("volguard.io/fence-incident"),
        Some(&f.metadata.name),
        "the taint names its incident"
    );
    // PodGC force-deletes the Terminating pod; the StatefulSet's replacement runs elsewhere.
    let replacement =
        s.cp.eventually("db-0 replaced on kwok-1", LONG, || {
            let pods = Api::<Pod>::namespaced(c.clone(), ns);
            let old = pod.metadata.uid.clone();
            async move {
                let p = pods.get("db-0").await.ok()?;
                let on = p.spec.as_ref()?.node_name.clone()?;
                let phase = p.status.as_ref()?.phase.clone()?;
                (p.metadata.uid != old && on == "kwok-1" && phase == "Running").then_some(p)
            }
        })
        .await;
    let (calls, runs) = ledger(s, &f.metadata.name, "fence");
    assert_eq!(runs, 1, "the agent fenced once");
    // What operators list: node, phase, backend, age.
    let kc =
        s.cp.kubeconfig_file("kubectl-ops", "ops", &["system:masters"]);
    let out = std::process::Command::new(harness::bin_dir().join("kubectl"))
        .arg(format!("--kubeconfig={}", kc.display()))
        .args(["get", "nodefences"])
        .output()
        .expect("kubectl get nodefences");
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let header: Vec<&str> = listed
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "NODE", "PHASE", "BACKEND", "AGE"],
        "{listed}"
    );
    assert!(
        listed.lines().any(|l| l.starts_with(&f.metadata.name)
            && l.contains(" pf ")
            && l.contains("Released")
            && l.contains("webhook")),
        "{listed}"
    );
    let node_events = event_reasons(&c, "default", node).await;
    for r in [
        "PartitionDetected",
        "FenceRequested",
        "NodeFenced",
        "NodeReleased",
    ] {
        assert!(
            node_events.contains(r),
            "Node event {r} missing: {node_events:?}"
        );
    }
    let claim_events = event_reasons(&c, ns, "data-db-0").await;
    assert!(
        claim_events.contains("VolumeReleased"),
        "claim events {claim_events:?}"
    );
    let fence_events = event_reasons(&c, "default", &f.metadata.name).await;
    assert!(
        fence_events.contains("NodeFenced"),
        "NodeFence events {fence_events:?}"
    );
    assert!(controller_metric(&s.cp, "volguard_fencing_time_to_fence_seconds_count").await >= 1.0);
    let samples = check.finish();
    println!(
        "partition-fenced: released {:.0}s after the partition; db-0 replaced on {} ({} invariant samples, agent calls {calls}, runs {runs}); the incident:",
        fenced_in.as_secs_f64(),
        replacement
            .spec
            .and_then(|s| s.node_name)
            .unwrap_or_default(),
        samples
    );
    print_record(&f);
    // explain-node-fenced (issue 44 point 2 on the live cluster): why this node is tainted and
    // what holds it, as an operator asks it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args(["explain", "node", node])
        .arg(format!("--kubeconfig={}", kc.display()))
        .output()
        .expect("volguard explain node");
    let explained = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{explained}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        format!("Node {node}"),
        "tainted:      yes, on volguard's incident".to_string(),
        format!("{} Released (webhook)", f.metadata.name),
        format!("next:         released by incident {}", f.metadata.name),
    ] {
        assert!(explained.contains(&want), "{want:?} not in:\n{explained}");
    }
    println!("explain-node-fenced: $ kubectl volguard explain node {node}\n{explained}");
    forget_node(&mut s.cp, node).await;
    let done = incident_in(&s.cp, node, Phase::Done, Duration::from_secs(30)).await;
    assert_eq!(steps(&done).last(), Some(&"node-deleted"));
}

async fn s_partition_lying_agent(s: &mut Shared) {
    let (ns, node) = ("p-lying", "lie");
    let pod = workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    // Answers "fenced" after 6 s and fences nothing: the node comes back while it is asked.
    behave(s, node, "touch \"$FENCED.asked\"; sleep 6", None);
    s.cp.stop_kwok(node);
    let asked = s.agent_dir.join("fenced").join(format!("{node}.asked"));
    s.cp.eventually("the agent asked to fence", LONG, || {
        let asked = asked.clone();
        async move { asked.exists().then_some(()) }
    })
    .await;
    s.cp.restart_kwok(node);
    let never_tainted = {
        let c = c.clone();
        tokio::spawn(async move {
            let until = Instant::now() + Duration::from_secs(40);
            while Instant::now() < until {
                if tainted(&c, node).await {
                    return false;
                }
                if incidents(&c, node)
                    .await
                    .iter()
                    .any(|f| f.status.phase == Phase::Failed)
                {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            true
        })
    };
    let f = incident_in(&s.cp, node, Phase::Failed, LONG).await;
    assert!(
        never_tainted.await.expect("watch"),
        "a node whose fence did not hold was tainted"
    );
    assert!(!tainted(&c, node).await);
    assert_eq!(steps(&f).last(), Some(&"proof-failed"), "{:?}", steps(&f));
    assert!(
        f.status
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("renewed since"),
        "{:?}",
        f.status.message
    );
    // The claim stays; the pod is the same one (kwok, the node's kubelet, may finish its graceful
    // deletion now that it is back, as a kubelet does).
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    if let Some(p) = pods.get_opt("db-0").await.expect("pod") {
        assert!(
            p.metadata.uid == pod.metadata.uid || p.spec.and_then(|s| s.node_name).is_some(),
            "no force delete happened"
        );
    }
    let pvcs = Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(c.clone(), ns);
    assert!(
        pvcs.get_opt("data-db-0").await.expect("claim").is_some(),
        "the claim stays"
    );
    assert!(controller_metric(&s.cp, "volguard_fencing_backend_failures_total").await >= 1.0);
    check.finish();
    println!(
        "partition-lying-agent: the agent answered fenced, the Lease was renewed: Failed, no taint"
    );
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

async fn s_partition_agent_timeout(s: &mut Shared) {
    let (ns, node) = ("p-timeout", "slow");
    workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    behave(s, node, "sleep 20; touch \"$FENCED\"", None);
    s.cp.stop_kwok(node);
    // The webhook backend hangs past its 8 s; the incident moves on to the manual backend.
    s.cp.eventually("the incident on its manual backend", LONG, || {
        let c = c.clone();
        async move {
            incidents(&c, node).await.into_iter().find(|f| {
                f.status.phase == Phase::Fencing
                    && f.status.backend == Some(volguard::model::fence::BackendKind::Manual)
            })
        }
    })
    .await;
    assert!(!tainted(&c, node).await);
    // Meanwhile `explain pvc` says which node the claim waits on and which incident handles it.
    let kc =
        s.cp.kubeconfig_file("explainer", "carol", &["system:masters"]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args(["explain", "pvc", "data-db-0", "-n", ns])
        .arg(format!("--kubeconfig={}", kc.display()))
        .output()
        .expect("run explain");
    let explained = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{explained}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        explained.contains("partition:    pod db-0 waits on node slow: incident slow-")
            && explained.contains("waits on partitioned node slow: fencing incident slow-"),
        "{explained}"
    );
    // A person confirms (kubectl volguard fence confirm), as the admin user.
    let kc =
        s.cp.kubeconfig_file("confirmer", "alice", &["system:masters"]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args(["fence", "confirm", node, "--partition-after=10s"])
        .arg(format!("--kubeconfig={}", kc.display()))
        .output()
        .expect("run fence confirm");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("confirmed") && text.contains("alice"),
        "{text}"
    );
    let f = incident_in(&s.cp, node, Phase::Released, LONG).await;
    assert!(
        f.status
            .confirmed_by
            .as_deref()
            .unwrap_or_default()
            .starts_with("alice"),
        "{:?}",
        f.status.confirmed_by
    );
    let st: Vec<&str> = steps(&f).into_iter().filter(|s| *s != "progress").collect();
    assert_eq!(
        st,
        [
            "detected",
            "fence-requested",
            "fence-requested",
            "fenced",
            "released"
        ],
        "webhook, then manual"
    );
    assert!(
        f.status
            .evidence
            .iter()
            .any(|e| e.message.contains("backend webhook failed")),
        "the webhook's timeout is recorded"
    );
    // The fenced marker only comes from the person here (the agent's script was cut short), so
    // the checker treats the node as unfenced: still no second node may use the claim.
    check.finish();
    println!("partition-agent-timeout: webhook timed out, fenced by alice's confirmation");
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

async fn s_partition_heals(s: &mut Shared) {
    let (ns, node) = ("p-heals", "heal");
    workload(&mut s.cp, ns, "db", "fence-manual", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    s.cp.stop_kwok(node);
    // A manual class: the incident waits for a person, and the node returns first.
    incident_in(&s.cp, node, Phase::Fencing, LONG).await;
    s.cp.restart_kwok(node);
    let tainted_seen = {
        let c = c.clone();
        tokio::spawn(async move {
            loop {
                if tainted(&c, node).await {
                    return true;
                }
                if incidents(&c, node)
                    .await
                    .iter()
                    .any(|f| f.status.phase == Phase::Aborted)
                {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let f = incident_in(&s.cp, node, Phase::Aborted, LONG).await;
    assert!(
        !tainted_seen.await.expect("watch"),
        "a Ready node was tainted"
    );
    assert_eq!(ready(&c, node).await, Some(true));
    assert_eq!(
        f.spec.backends,
        [volguard::model::fence::BackendKind::Manual]
    );
    check.finish();
    println!("partition-heals: the node came back before any proof: Aborted, never tainted");
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

async fn s_partition_zombie(s: &mut Shared) {
    let (ns, node) = ("p-zombie", "zombie");
    workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    behave(
        s,
        node,
        "touch \"$FENCED\"",
        Some("sleep 5; rm -f \"$FENCED\""),
    );
    s.cp.stop_kwok(node);
    incident_in(&s.cp, node, Phase::Released, LONG).await;
    running_on(&s.cp, ns, "db-0", Some("kwok-1")).await;
    // The fenced machine boots again.
    s.cp.restart_kwok(node);
    let rec = incident_in(&s.cp, node, Phase::Recovering, LONG).await;
    assert!(
        tainted(&c, node).await,
        "the taint stays while the fence is undone"
    );
    let f = incident_in(&s.cp, node, Phase::Done, LONG).await;
    assert!(!tainted(&c, node).await, "the taint goes once unfenced");
    let (_, runs) = ledger(s, &f.metadata.name, "unfence");
    assert_eq!(runs, 1, "unfenced once");
    assert_eq!(steps(&f).last(), Some(&"recovered"));
    assert!(
        controller_metric(&s.cp, "volguard_fencing_time_to_recover_seconds_count").await >= 1.0
    );
    check.finish();
    println!(
        "partition-zombie: the fenced node returned at {}: taint kept until unfenced, then removed",
        rec.status.unfence_requested_at.unwrap_or_default()
    );
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

/// Issue 40 point 8: a node that reports a planned-maintenance condition (KEP-5683) is not
/// partitioned, it is being worked on: never fenced, and the hold says why.
async fn s_partition_maintenance(s: &mut Shared) {
    let (ns, node) = ("p-maint", "maint");
    workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    behave(s, node, "touch \"$FENCED\"", None);
    s.cp.stop_kwok(node);
    let maint = json!({"status": {"conditions": [{"type": "MaintenanceInProgress", "status": "True",
        "reason": "PlannedMaintenance", "message": "e2e: planned maintenance"}]}});
    Api::<Node>::all(c.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(maint))
        .await
        .expect("maintenance condition");
    not_ready(&s.cp, node).await;
    // Well past detection (10 s) and forgiveness (2 s): still nothing.
    let held =
        s.cp.eventually("FencingHeld names the maintenance", LONG, || {
            let c = c.clone();
            async move {
                Api::<Event>::namespaced(c, "default")
                    .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .filter(|e| e.reason.as_deref() == Some("FencingHeld"))
                    .filter_map(|e| e.message)
                    .find(|m| m.contains("MaintenanceInProgress"))
            }
        })
        .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        incidents(&c, node).await.is_empty(),
        "a node in maintenance was fenced"
    );
    assert!(!tainted(&c, node).await);
    check.finish();
    println!(
        "partition-maintenance: NotReady with MaintenanceInProgress=True: no incident, no taint; Event: {held}"
    );
    forget_node(&mut s.cp, node).await;
}

/// Issue 40 point 2: a fenced node that returns without a reboot, its kubelet still reporting a
/// released volume, stays `Recovering` (tainted, fenced); a new bootID releases it.
async fn s_partition_needs_reboot(s: &mut Shared) {
    let (ns, node) = ("p-reboot", "reboot");
    workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let nodes = Api::<Node>::all(c.clone());
    // What its kubelet reports: this boot, and a volume mounted for the pod.
    let volume = "kubernetes.io/host-path/e2e-reboot-data";
    let reported =
        |boot: &str| json!({"status": {"nodeInfo": {"bootID": boot}, "volumesInUse": [volume]}});
    nodes
        .patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(reported("boot-1")),
        )
        .await
        .expect("node status");
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    behave(s, node, "touch \"$FENCED\"", Some("rm -f \"$FENCED\""));
    s.cp.stop_kwok(node);
    let released = incident_in(&s.cp, node, Phase::Released, LONG).await;
    assert_eq!(released.status.boot_id.as_deref(), Some("boot-1"));
    assert_eq!(released.status.released_volumes, vec![volume.to_string()]);
    running_on(&s.cp, ns, "db-0", Some("kwok-1")).await;
    // The machine comes back without a reboot, the volume still mounted.
    s.cp.restart_kwok(node);
    nodes
        .patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(reported("boot-1")),
        )
        .await
        .expect("node status");
    let held = incident_in(&s.cp, node, Phase::Recovering, LONG).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let still = incidents(&c, node)
        .await
        .into_iter()
        .find(|f| f.metadata.name == held.metadata.name)
        .expect("incident");
    assert_eq!(
        still.status.phase,
        Phase::Recovering,
        "unfenced without a reboot"
    );
    let why = still.status.message.clone().unwrap_or_default();
    assert!(
        why.contains("without a reboot") && why.contains(volume),
        "{why}"
    );
    assert!(tainted(&c, node).await, "the taint stays until the reboot");
    assert_eq!(
        ledger(s, &held.metadata.name, "unfence").1,
        0,
        "unfenced before the reboot"
    );
    // The machine reboots.
    nodes
        .patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(reported("boot-2")),
        )
        .await
        .expect("node status");
    let f = incident_in(&s.cp, node, Phase::Done, LONG).await;
    assert!(!tainted(&c, node).await, "the taint goes after the reboot");
    check.finish();
    println!(
        "partition-needs-reboot: back with bootID boot-1 and {volume} still in use: Recovering ({why}); bootID boot-2: Done"
    );
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

/// A workload on `node` (a class that did not opt in: the remediator, not volguard, handles it),
/// and clients as the admin and as the two trusted remediators (RBAC lets them act; volguard
/// decides).
async fn remediated_workload(
    s: &mut Shared,
    ns: &str,
    node: &str,
) -> (kube::Client, kube::Client, kube::Client) {
    workload(&mut s.cp, ns, "db", "e2e-hostpath", node).await;
    let groups = ["system:serviceaccounts", "system:masters"];
    (
        s.cp.admin().await,
        s.cp.client_as(FAR, &groups).await,
        s.cp.client_as(CAPI, &groups).await,
    )
}

/// Issue 40 point 7: medik8s fence-agents-remediation, trusted with `taint`, adds the out-of-service
/// taint after its own fencing (its exact call: a patch of the Node's taints): refused while the
/// node heartbeats, then allowed and recorded; cluster-api's identity, trusted only to delete
/// Nodes, may not taint.
async fn s_remediator_taint(s: &mut Shared) {
    let (ns, node) = ("p-far", "far");
    let (c, far, capi) = remediated_workload(s, ns, node).await;
    let taint = Patch::Merge(
        json!({"spec": {"taints": [{"key": OOS, "value": "nodeshutdown", "effect": "NoExecute"}]}}),
    );
    s.cp.stop_kwok(node);
    let e = Api::<Node>::all(far.clone())
        .patch(node, &PatchParams::default(), &taint)
        .await
        .expect_err("a remediator's taint on a node that still heartbeats");
    let (_, alive) = denial(e);
    assert!(alive.contains("the node is not down"), "{alive}");
    not_ready(&s.cp, node).await;
    let e =
        s.cp.eventually(
            "cluster-api's identity refused the taint once the node is down",
            LONG,
            || {
                let capi = capi.clone();
                let taint = taint.clone();
                async move {
                    let e = Api::<Node>::all(capi)
                        .patch(node, &PatchParams::default(), &taint)
                        .await
                        .err()?;
                    let (_, m) = denial(e);
                    m.contains("nothing proves the node is down").then_some(m)
                }
            },
        )
        .await;
    assert!(!tainted(&c, node).await, "{e}");
    Api::<Node>::all(far.clone())
        .patch(node, &PatchParams::default(), &taint)
        .await
        .expect("the trusted remediator's taint");
    let record = incidents(&c, node)
        .await
        .into_iter()
        .find(|f| f.spec.release.is_some())
        .expect("the remediator's taint is recorded");
    let release = record.spec.release.clone().expect("release");
    assert_eq!(release.action, volguard::model::fence::ReleaseAction::Taint);
    assert_eq!(release.by, FAR);
    // The taint releases the pod (taint eviction, PodGC); its replacement runs on kwok-1.
    running_on(&s.cp, ns, "db-0", Some("kwok-1")).await;
    println!(
        "remediator-taint: refused while the node heartbeated; cluster-api's identity refused; fence-agents-remediation's taint allowed, recorded as nodefence/{} ({:?} by {})",
        record.metadata.name, release.action, release.by
    );
    forget_node(&mut s.cp, node).await;
}

/// Issue 40 point 7: cluster-api, trusted with `delete-node`, deletes the Node of a Machine it
/// removed (its exact call: DELETE of the Node): refused while the node heartbeats, then allowed
/// and recorded; fence-agents-remediation's identity, trusted only to taint, may not delete it.
async fn s_remediator_node_delete(s: &mut Shared) {
    let (ns, node) = ("p-capi", "capi");
    let (c, far, capi) = remediated_workload(s, ns, node).await;
    s.cp.stop_kwok(node);
    let e = Api::<Node>::all(capi.clone())
        .delete(node, &DeleteParams::default())
        .await
        .expect_err("deleting a node that still heartbeats");
    let (_, alive) = denial(e);
    assert!(alive.contains("the node is not down"), "{alive}");
    not_ready(&s.cp, node).await;
    s.cp.eventually(
        "fence-agents-remediation's identity refused the delete once the node is down",
        LONG,
        || {
            let far = far.clone();
            async move {
                let e = Api::<Node>::all(far)
                    .delete(node, &DeleteParams::default())
                    .await
                    .err()?;
                let (_, m) = denial(e);
                m.contains("nothing proves the machine is off")
                    .then_some(())
            }
        },
    )
    .await;
    Api::<Node>::all(capi.clone())
        .delete(node, &DeleteParams::default())
        .await
        .expect("the trusted remediator's delete");
    let record = incidents(&c, node)
        .await
        .into_iter()
        .find(|f| f.spec.release.is_some())
        .expect("the deletion is recorded");
    let release = record.spec.release.clone().expect("release");
    assert_eq!(
        release.action,
        volguard::model::fence::ReleaseAction::NodeDelete
    );
    assert_eq!(release.by, CAPI);
    assert_eq!(release.pods, vec![format!("{ns}/db-0")]);
    println!(
        "remediator-node-delete: refused while the node heartbeated; fence-agents-remediation's identity refused; cluster-api's delete allowed, recorded as nodefence/{} (pods {:?})",
        record.metadata.name, release.pods
    );
    forget_node(&mut s.cp, node).await;
}

async fn s_partition_storm(s: &mut Shared) {
    let ns = "p-storm";
    // Two nodes never turn NotReady at the same instant (the node monitor looks every 5 s): the
    // pods forgive 20 s, so both count as unhealthy before either could be fenced.
    workload_forgiving(&mut s.cp, ns, "a", "fence-auto", "storm-a", 20).await;
    workload_forgiving(&mut s.cp, ns, "b", "fence-auto", "storm-b", 20).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    for n in ["storm-a", "storm-b"] {
        behave(s, n, "touch \"$FENCED\"", None);
    }
    s.cp.stop_kwok("storm-a");
    s.cp.stop_kwok("storm-b");
    not_ready(&s.cp, "storm-a").await;
    not_ready(&s.cp, "storm-b").await;
    s.cp.eventually("volguard_fencing_storm 1", LONG, || async {
        (controller_metric(&s.cp, "volguard_fencing_storm").await == 1.0).then_some(())
    })
    .await;
    // Well past detection and forgiveness (20 s): still nothing.
    tokio::time::sleep(Duration::from_secs(30)).await;
    for n in ["storm-a", "storm-b"] {
        assert!(
            incidents(&c, n).await.is_empty(),
            "node {n} was fenced in a storm"
        );
        assert!(!tainted(&c, n).await);
    }
    let held = Api::<Event>::namespaced(c.clone(), "default")
        .list(&ListParams::default().fields("involvedObject.name=storm-a"))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("FencingHeld"))
        .filter_map(|e| e.message)
        .collect::<Vec<_>>();
    assert!(held.iter().any(|m| m.contains("storm")), "{held:?}");
    check.finish();
    println!(
        "partition-storm: 2 of 4 nodes down at once: nothing fenced, volguard_fencing_storm=1, Event: {}",
        held[0]
    );
    forget_node(&mut s.cp, "storm-a").await;
    forget_node(&mut s.cp, "storm-b").await;
}

async fn s_partition_restart(s: &mut Shared) {
    let (ns, node) = ("p-restart", "restart");
    workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    behave(s, node, "sleep 3; touch \"$FENCED\"", None);
    s.cp.stop_kwok(node);
    let f = incident_in(&s.cp, node, Phase::Fencing, LONG).await;
    // Killed right after "fence requested" was recorded, while the agent works.
    for mut p in std::mem::take(&mut s.cp.controllers) {
        p.kill();
    }
    s.cp.controller_probes.clear();
    s.cp.start_controller("replica-b").await;
    let done = incident_in(&s.cp, node, Phase::Released, LONG).await;
    assert_eq!(
        done.metadata.name, f.metadata.name,
        "the same incident resumed"
    );
    assert_eq!(incidents(&c, node).await.len(), 1, "one incident");
    let (calls, runs) = ledger(s, &f.metadata.name, "fence");
    assert_eq!(runs, 1, "the agent fenced once (asked {calls} times)");
    assert_eq!(
        steps(&done)
            .iter()
            .filter(|s| **s == "fence-requested")
            .count(),
        1,
        "fence requested once"
    );
    check.finish();
    println!(
        "partition-restart: controller killed after fence requested; the next one resumed: agent asked {calls}x, fenced once"
    );
    print_record(&done);
    forget_node(&mut s.cp, node).await;
}

async fn s_partition_opt_out(s: &mut Shared) {
    let (ns, node) = ("p-optout", "optout");
    let pod = workload(&mut s.cp, ns, "db", "e2e-hostpath", node).await;
    let c = s.cp.admin().await;
    s.cp.stop_kwok(node);
    not_ready(&s.cp, node).await;
    // Detection (10 s) + forgiveness (2 s) + margin: nothing happens, as upstream.
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    s.cp.eventually("db-0 Terminating (taint eviction)", LONG, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("db-0").await.ok()?;
            p.metadata.deletion_timestamp.is_some().then_some(())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(
        incidents(&c, node).await.is_empty(),
        "no incident for an opted-out class"
    );
    assert!(!tainted(&c, node).await);
    let p = pods.get("db-0").await.expect("pod stays Terminating");
    assert_eq!(p.metadata.uid, pod.metadata.uid);
    println!(
        "partition-opt-out: no opt-in: no incident, no taint, db-0 stays Terminating (upstream's behaviour)"
    );
    forget_node(&mut s.cp, node).await;
}

async fn s_partition_guards(s: &mut Shared) {
    let (ns, node) = ("p-guards", "guard");
    let c = s.cp.admin().await;
    // A forged terminal phase on a running pod (on a healthy node) is refused.
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "busy"},
        "spec": {"nodeName": "kwok-2", "containers": [{"name": "app", "image": "example.invalid/app:1"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &p).await.expect("pod");
    running_on(&s.cp, ns, "busy", None).await;
    let forged = pods
        .patch_status(
            "busy",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await;
    match forged {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403, "{e:?}");
            assert!(e.message.contains("only its kubelet"), "{}", e.message);
        }
        other => panic!("a forged Failed phase was not refused: {other:?}"),
    }
    // A person's out-of-service taint on a down node: refused without confirmation.
    workload(&mut s.cp, ns, "db", "e2e-hostpath", node).await;
    s.cp.stop_kwok(node);
    not_ready(&s.cp, node).await;
    let kc =
        s.cp.kubeconfig_file("kubectl-bob", "bob", &["system:masters"]);
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new(harness::bin_dir().join("kubectl"))
            .arg(format!("--kubeconfig={}", kc.display()))
            .args(args)
            .output()
            .expect("kubectl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let taint = format!("{OOS}=nodeshutdown:NoExecute");
    let (ok, out) = kubectl(&["taint", "node", node, &taint]);
    assert!(!ok, "refused: {out}");
    assert!(out.contains("volguard.io/confirm-node-down=true"), "{out}");
    assert!(!tainted(&c, node).await);
    let allowed_before = decided(&s.cp, "pod-status", Some("allowed")).await;
    let denied_before = decided(&s.cp, "pod-status", Some("denied")).await;
    let (ok, out) = kubectl(&[
        "annotate",
        "node",
        node,
        "volguard.io/confirm-node-down=true",
    ]);
    assert!(ok, "{out}");
    let (ok, out2) = kubectl(&["taint", "node", node, &taint]);
    assert!(ok, "{out2}");
    assert!(
        out2.contains("manual fencing incident"),
        "the warning: {out2}"
    );
    // Recorded as a manual incident.
    let f = incident_in(&s.cp, node, Phase::Released, Duration::from_secs(30)).await;
    assert_eq!(
        f.spec.backends,
        [volguard::model::fence::BackendKind::Manual]
    );
    // PodGC marks the Terminating pod Failed and deletes it: its own marking passes.
    let pod_gone = s.cp.eventually("db-0 removed by PodGC", LONG, || {
        let pods = pods.clone();
        async move {
            match pods.get_opt("db-0").await.ok()? {
                None => Some(()),
                Some(p) => (p.spec?.node_name.as_deref() != Some(node)).then_some(()),
            }
        }
    });
    pod_gone.await;
    let allowed = decided(&s.cp, "pod-status", Some("allowed")).await - allowed_before;
    assert_eq!(
        decided(&s.cp, "pod-status", Some("denied")).await,
        denied_before
    );
    println!(
        "partition-guards: forged phase refused; taint refused without confirmation, then allowed with it ({}), recorded as {}; PodGC's marking passed ({allowed} pods/status reviews allowed)",
        out2.lines()
            .find(|l| l.contains("Warning"))
            .unwrap_or("")
            .trim(),
        f.metadata.name
    );
    forget_node(&mut s.cp, node).await;
}

/// What a storage system with csi-addons does, played by the test: a NetworkFence asking to fence
/// is carried out (the node's marker file) and reported `Succeeded`; a deleted one is unfenced.
fn storage_system(c: &kube::Client, fenced_dir: PathBuf) -> tokio::task::JoinHandle<()> {
    let api = Api::<kube::api::DynamicObject>::all_with(
        c.clone(),
        &volguard::state::network_fences::resource(),
    );
    tokio::spawn(async move {
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        loop {
            if let Ok(list) = api.list(&ListParams::default()).await {
                let mut now = BTreeMap::new();
                for o in list.items {
                    let name = o.metadata.name.clone().unwrap_or_default();
                    let node = o
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("volguard.io/node").cloned())
                        .unwrap_or_default();
                    now.insert(name.clone(), node.clone());
                    if o.data["spec"]["fenceState"] == "Fenced"
                        && o.data["status"]["result"].is_null()
                    {
                        let _ = std::fs::write(fenced_dir.join(&node), "");
                        let _ = api
                            .patch_status(
                                &name,
                                &PatchParams::default(),
                                &Patch::Merge(json!({"status": {"result": "Succeeded", "message": "fencing operation successful"}})),
                            )
                            .await;
                    }
                }
                for (gone, node) in seen.iter().filter(|(n, _)| !now.contains_key(*n)) {
                    let _ = std::fs::remove_file(fenced_dir.join(node));
                    println!(
                        "  (storage system: NetworkFence {gone} deleted, node {node} unfenced)"
                    );
                }
                seen = now;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}

/// A volume of the CSI driver the NetworkFence backend fences, pre-bound to the StatefulSet's
/// claim `data-<set>-0` (what the driver's provisioner would have made).
async fn csi_volume(c: &kube::Client, ns: &str, set: &str) {
    use k8s_openapi::api::core::v1::PersistentVolume;
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": format!("{ns}-{set}")},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "fence-network", "persistentVolumeReclaimPolicy": "Retain",
                 "claimRef": {"namespace": ns, "name": format!("data-{set}-0")},
                 "csi": {"driver": "e2e.csi.volguard.io", "volumeHandle": format!("{ns}-{set}")}}
    }))
    .expect("pv");
    Api::<PersistentVolume>::all(c.clone())
        .create(&PostParams::default(), &pv)
        .await
        .expect("csi volume");
}

/// Issue 40 point 1: a NetworkFence cuts one CSI driver's storage network, but the pod on the node
/// uses a hostPath volume the fence does not cover: the incident stays `Fenced`, never tainted,
/// saying what is not covered (status, `FenceScopeIncomplete` Event, `volguard_fencing_scope_held`).
async fn s_partition_partial_fence(s: &mut Shared) {
    let (ns, node) = ("p-partial", "partial");
    workload(&mut s.cp, ns, "db", "fence-network", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    let storage = storage_system(&c, s.agent_dir.join("fenced"));
    s.cp.stop_kwok(node);
    let f =
        s.cp.eventually("the incident held for its fence's scope", LONG, || {
            let c = c.clone();
            async move {
                incidents(&c, node)
                    .await
                    .into_iter()
                    .find(|f| f.status.phase == Phase::Fenced && !f.status.uncovered.is_empty())
            }
        })
        .await;
    let why = f.status.message.clone().unwrap_or_default();
    assert!(
        why.contains("covers CSI driver e2e.csi.volguard.io") && why.contains("hostPath"),
        "{why}"
    );
    s.cp.eventually("volguard_fencing_scope_held 1", LONG, || async {
        (controller_metric(&s.cp, "volguard_fencing_scope_held").await == 1.0).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !tainted(&c, node).await,
        "tainted with a fence that does not cover the node"
    );
    let reasons = Api::<Event>::namespaced(c.clone(), "default")
        .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect::<BTreeSet<_>>();
    assert!(reasons.contains("FenceScopeIncomplete"), "{reasons:?}");
    storage.abort();
    check.finish();
    println!("partition-partial-fence: held Fenced, no taint: {why}");
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

async fn s_partition_networkfence(s: &mut Shared) {
    let (ns, node) = ("p-netfence", "netfence");
    // The pod's volume is the fenced driver's: the NetworkFence covers it.
    csi_volume(&s.cp.admin().await, ns, "db").await;
    workload(&mut s.cp, ns, "db", "fence-network", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    let storage = storage_system(&c, s.agent_dir.join("fenced"));
    s.cp.stop_kwok(node);
    let f = incident_in(&s.cp, node, Phase::Released, LONG).await;
    assert_eq!(
        f.spec.backends,
        [volguard::model::fence::BackendKind::Networkfence],
        "the class's own backends"
    );
    let nf_name = volguard::fencing::backend::network_fence_name(&f);
    let nf = Api::<kube::api::DynamicObject>::all_with(
        c.clone(),
        &volguard::state::network_fences::resource(),
    )
    .get(&nf_name)
    .await
    .expect("the incident's NetworkFence");
    assert_eq!(nf.data["spec"]["driver"], "e2e.csi.volguard.io");
    assert!(
        nf.data["spec"]["cidrs"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "the node's addresses: {}",
        nf.data["spec"]
    );
    running_on(&s.cp, ns, "db-0", Some("kwok-1")).await;
    // The node returns: the NetworkFence is deleted (unfenced), then the taint goes.
    s.cp.restart_kwok(node);
    let done = incident_in(&s.cp, node, Phase::Done, LONG).await;
    assert!(!tainted(&c, node).await);
    assert!(
        Api::<kube::api::DynamicObject>::all_with(
            c.clone(),
            &volguard::state::network_fences::resource()
        )
        .get_opt(&nf_name)
        .await
        .expect("read")
        .is_none(),
        "unfencing deletes the NetworkFence"
    );
    storage.abort();
    check.finish();
    println!(
        "partition-networkfence: NetworkFence {nf_name} for {} Succeeded, released; the node returned: deleted, untainted",
        nf.data["spec"]["cidrs"]
    );
    print_record(&done);
    forget_node(&mut s.cp, node).await;
}

// ---------------------------------------------------------------- one test per scenario

crate::scenarios! { scenario:
    partition_fenced => |s| s_partition_fenced(s);
    partition_lying_agent => |s| s_partition_lying_agent(s);
    partition_agent_timeout => |s| s_partition_agent_timeout(s);
    partition_heals => |s| s_partition_heals(s);
    partition_zombie => |s| s_partition_zombie(s);
    partition_storm => |s| s_partition_storm(s);
    partition_restart => |s| s_partition_restart(s);
    partition_opt_out => |s| s_partition_opt_out(s);
    partition_guards => |s| s_partition_guards(s);
    partition_networkfence => |s| s_partition_networkfence(s);
    partition_maintenance => |s| s_partition_maintenance(s);
    partition_needs_reboot => |s| s_partition_needs_reboot(s);
    remediator_taint => |s| s_remediator_taint(s);
    remediator_node_delete => |s| s_remediator_node_delete(s);
    partition_partial_fence => |s| s_partition_partial_fence(s);
}
