//! Real nodes and real bytes (docs/testing.md, "Real nodes"): kubelets with containerd, the
//! test CSI driver with the real external-provisioner and external-attacher, kube-controller-
//! manager's attach/detach and PV controllers, and a writer appending checksummed records to
//! its volume. Each scenario runs the same steps twice, without volguard (its registrations
//! removed and its controller stopped) and with it, and the checker reads the volume's bytes
//! afterwards. The table is printed and written to target/e2e/data-loss.json.

mod support;

use support::harness::{self, ControlPlane, Profile};
use support::nodes::{ATTACHED, Driver, IMAGE, RealNodes, SHARED_FS};
use support::objects::namespace;
use support::records::{self, Row};
use support::shared::Body;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use volguard::model::fence::NodeFence;

const NODES: [&str; 2] = ["node-a", "node-b"];

struct Shared {
    /// Dropped first: the nodes' processes, mounts and links go before the control plane.
    nodes: RealNodes,
    cp: ControlPlane,
    rows: Vec<Row>,
    /// The fence agent's directory (its scripts, ledger, and one behaviour file per node).
    agent_dir: PathBuf,
    _agent: harness::Proc,
}

/// The StorageClass whose volumes volguard may fence for (`volguard.io/fencing: auto`), on the
/// attachable driver.
const FENCED_CLASS: &str = "e2e-csi-fenced";

static CLUSTER: std::sync::Mutex<Option<Shared>> = std::sync::Mutex::new(None);

async fn start_cluster() -> Shared {
    let mut cp = ControlPlane::start_with(
        Profile::Cluster,
        &["--kubelet-preferred-address-types=InternalIP"],
    )
    .await;
    let version = cp.admin().await.apiserver_version().await.expect("version");
    cp.install_manifests().await;
    cp.serve_extra = vec!["--partition-after=10s".into()];
    cp.start_webhook().await;
    let mut nodes = RealNodes::start(&cp).await;
    let (agent_dir, agent, port) = fence_agent(&cp, &nodes);
    let d = cp.dir.path().to_path_buf();
    cp.controller_extra = vec![
        "--partition-after=10s".into(),
        "--max-unhealthy-nodes=1".into(),
        "--fence-backends=webhook".into(),
        format!("--fence-webhook-url=https://127.0.0.1:{port}/"),
        format!(
            "--fence-webhook-ca={}",
            d.join("webhook-certs/ca.crt").display()
        ),
        "--fence-webhook-timeout=20s".into(),
        "--fencing-interval=1s".into(),
    ];
    cp.start_controller("replica-a").await;
    let sc: k8s_openapi::api::storage::v1::StorageClass = serde_json::from_value(json!({
        "metadata": {"name": FENCED_CLASS, "annotations": {"volguard.io/fencing": "auto"}},
        "provisioner": ATTACHED.name, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"
    }))
    .expect("storage class");
    Api::<k8s_openapi::api::storage::v1::StorageClass>::all(cp.admin().await)
        .create(&PostParams::default(), &sc)
        .await
        .expect("create storage class");
    let t = Instant::now();
    for n in NODES {
        nodes.add(&cp, n).await;
    }
    println!(
        "\nkube-apiserver {} with kcm (attach/detach, PV, node lifecycle), kube-scheduler, {} real nodes (kubelet + containerd + test CSI driver) Ready in {:.1}s",
        version.git_version,
        NODES.len(),
        t.elapsed().as_secs_f64()
    );
    Shared {
        nodes,
        cp,
        rows: Vec::new(),
        agent_dir,
        _agent: agent,
    }
}

/// volguard's reference fence agent (`volguard fence agent`, the HTTPS fence-agent contract)
/// running a power fence: every process of the node's machine killed through its cgroups. A
/// node's behaviour file `lie` makes it answer "fenced" and do nothing (a lying backend).
fn fence_agent(cp: &ControlPlane, nodes: &RealNodes) -> (PathBuf, harness::Proc, u16) {
    let d = cp.dir.path().to_path_buf();
    let agent_dir = d.join("agent");
    std::fs::create_dir_all(agent_dir.join("behaviour")).expect("agent dir");
    std::fs::write(
        agent_dir.join("fence.sh"),
        format!(
            r#"d=$(dirname "$0"); cg="{prefix}-$NODE"
if [ "$(cat "$d/behaviour/$NODE" 2>/dev/null)" = lie ]; then echo "fenced (not really)"; exit 0; fi
for f in /sys/fs/cgroup/freezer/"$cg"/freezer.state; do [ -f "$f" ] && echo THAWED > "$f"; done
for i in $(seq 1 100); do
  pids=$(find /sys/fs/cgroup/*/"$cg" -name cgroup.procs -exec cat {{}} + 2>/dev/null | sort -u)
  [ -z "$pids" ] && {{ echo "powered off $NODE"; exit 0; }}
  kill -KILL $pids 2>/dev/null; sleep 0.1
done
echo "processes of $NODE survived" >&2; exit 1
"#,
            prefix = nodes.cgroup_prefix()
        ),
    )
    .expect("fence.sh");
    // A power fence has nothing to undo: the machine is back because it rebooted.
    std::fs::write(agent_dir.join("unfence.sh"), "exit 0\n").expect("unfence.sh");
    let port = harness::free_port();
    let agent = harness::Proc::spawn(
        "fence-agent",
        std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
            .args(["--log-format", "json", "fence", "agent"])
            .arg(format!("--listen=127.0.0.1:{port}"))
            .arg(format!(
                "--tls-cert={}",
                d.join("webhook-certs/tls.crt").display()
            ))
            .arg(format!(
                "--tls-key={}",
                d.join("webhook-certs/tls.key").display()
            ))
            .arg(format!(
                "--fence-command=sh {}",
                agent_dir.join("fence.sh").display()
            ))
            .arg(format!(
                "--unfence-command=sh {}",
                agent_dir.join("unfence.sh").display()
            ))
            .arg(format!(
                "--state={}",
                agent_dir.join("ledger.json").display()
            )),
        &d,
    );
    (agent_dir, agent, port)
}

async fn prepare(s: &mut Shared) {
    for n in NODES {
        s.nodes.partition(n, false);
        let _ = s.cp.cordon(n, false).await;
    }
}

fn scenario(name: &str, f: impl for<'a> FnOnce(&'a mut Shared) -> Body<'a>) {
    support::shared::scenario(
        &CLUSTER,
        || Box::pin(start_cluster()),
        |s| Box::pin(prepare(s)),
        |s| format!("{}\n{}", s.cp.logs(), s.nodes.logs()),
        name,
        f,
    );
}

// ---------------------------------------------------------------- volguard on and off

/// volguard off: its controller stopped (it would repair the registrations) and its webhook
/// registrations removed, as an operator uninstalling it would leave the cluster.
async fn volguard(s: &mut Shared, on: bool) {
    if on {
        s.cp.ensure_running().await;
    } else {
        for mut p in std::mem::take(&mut s.cp.controllers) {
            p.kill();
        }
        s.cp.controller_probes.clear();
        s.cp.unregister_webhooks().await;
    }
}

fn mode(on: bool) -> &'static str {
    if on { "with" } else { "without" }
}

// ---------------------------------------------------------------- the writer and its volume

fn writer_spec(claim: &str) -> serde_json::Value {
    json!({
        "terminationGracePeriodSeconds": 2,
        "containers": [{"name": "writer", "image": IMAGE, "imagePullPolicy": "Never",
                        "command": ["sh", "-c", records::WRITER], "env": records::writer_env(),
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        "tolerations": [
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 3600},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 3600}]
    })
}

async fn claim(c: &kube::Client, ns: &str, name: &str, driver: &Driver) {
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": driver.class,
                 "resources": {"requests": {"storage": "1Mi"}}}
    }))
    .expect("claim");
    Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &pvc)
        .await
        .expect("create claim");
}

/// The file the writer appends to, on the shared storage root, for claim `ns/name`.
async fn log_path(s: &Shared, ns: &str, name: &str) -> PathBuf {
    let c = s.cp.admin().await;
    let pv =
        s.cp.eventually("the claim is bound", Duration::from_secs(60), || async {
            Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
                .get(name)
                .await
                .ok()
                .and_then(|p| p.spec?.volume_name)
        })
        .await;
    let pv = Api::<PersistentVolume>::all(c)
        .get(&pv)
        .await
        .expect("volume");
    let handle = pv
        .spec
        .and_then(|s| s.csi)
        .map(|c| c.volume_handle)
        .expect("a CSI volume");
    s.nodes.volumes.join(handle).join("data/log")
}

fn read(path: &PathBuf) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Wait until the log holds at least `n` records of the writer `uid`.
async fn records_of(path: &PathBuf, uid: &str, n: usize, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let have = read(path)
            .unwrap_or_default()
            .lines()
            .filter_map(records::parse)
            .filter(|r| r.writer == uid)
            .count();
        if have >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "writer {uid} wrote {have} of {n} records to {} in {within:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn running_pod(s: &Shared, ns: &str, name: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(s.cp.admin().await, ns);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(p) = pods.get(name).await
            && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "pod {ns}/{name} not running in 120s: {:?}\n{}",
            pods.get(name).await.ok().and_then(|p| p.status),
            s.nodes.logs()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

fn node_of(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

fn refusal(r: Result<impl Sized, kube::Error>) -> Option<String> {
    match r {
        Ok(_) => None,
        Err(kube::Error::Api(e)) => Some(e.message),
        Err(e) => Some(e.to_string()),
    }
}

/// The rule a refusal names (volguard's messages start with `volguard: RULE`), for the table.
fn rule_of(msg: &str) -> String {
    msg.split_whitespace()
        .find(|w| w.starts_with('[') || w.contains("volguard.io"))
        .unwrap_or_else(|| msg.split(':').next().unwrap_or(msg))
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '-' && c != '.')
        .to_string()
}

async fn record(
    s: &mut Shared,
    scenario: &str,
    on: bool,
    path: &PathBuf,
    seen: &BTreeSet<(String, u64)>,
    outcome: &str,
) -> records::Report {
    let r = records::check(read(path).as_deref(), seen);
    println!(
        "  {scenario} {}: lost {} corrupted {} overlaps {} gap {:?} records {} writers {} ({outcome})",
        mode(on),
        r.lost,
        r.corrupted,
        r.overlaps,
        r.gap_seconds,
        r.records,
        r.writers.len()
    );
    s.rows.push(Row::new(scenario, on, &r, outcome));
    write_table(&s.rows);
    r
}

fn write_table(rows: &[Row]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/e2e");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("data-loss.json"),
        serde_json::to_string_pretty(rows).unwrap_or_default(),
    );
    println!(
        "\ndata loss, measured on the volume's bytes:\n{}",
        records::table(rows)
    );
}

// ---------------------------------------------------------------- scenarios

/// A claim deleted (and its finalizers stripped with `finalizers: null`) under a running writer,
/// on shared-filesystem storage (no attach step, reclaim policy Delete). Without volguard the
/// claim is gone at once, the PV controller releases the volume and the provisioner deletes its
/// directory while the writer still writes: every record is lost. With volguard the strip is
/// refused (the claim is in use): the claim waits, Terminating, for its last pod, as the user's
/// delete asked, and the bytes stay while the writer runs. (On attachable storage the
/// provisioner itself waits for the VolumeAttachment to go, so the loss there comes later, when
/// the pod ends; this scenario measures the window volguard closes.)
async fn s_claim_deleted(s: &mut Shared) {
    for on in [false, true] {
        volguard(s, on).await;
        let ns = format!("dl-claim-{}", mode(on));
        let c = s.cp.admin().await;
        namespace(&c, &ns).await;
        claim(&c, &ns, "data", &SHARED_FS).await;
        let pods: Api<Pod> = Api::namespaced(c.clone(), &ns);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "writer"}, "spec": writer_spec("data")}))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create writer");
        let p = running_pod(s, &ns, "writer").await;
        let path = log_path(s, &ns, "data").await;
        records_of(&path, &uid(&p), 10, Duration::from_secs(60)).await;

        let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.clone(), &ns);
        let deleted = refusal(claims.delete("data", &DeleteParams::default()).await);
        let stripped = refusal(
            claims
                .patch(
                    "data",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await,
        );
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        if on {
            // Time enough for the PV controller and the provisioner, had the claim gone.
            tokio::time::sleep(Duration::from_secs(15)).await;
        } else {
            s.cp.eventually(
                "the provisioner deletes the volume under the writer",
                Duration::from_secs(90),
                || async { (!path.exists()).then_some(()) },
            )
            .await;
        }
        let still = pods
            .get("writer")
            .await
            .ok()
            .and_then(|p| p.status?.phase)
            .unwrap_or_default();
        let outcome = match (&deleted, &stripped) {
            (None, None) => {
                format!("claim deleted, finalizers stripped; volume deleted, writer {still}")
            }
            (_, Some(m)) => format!("strip refused ({}); writer {still}", rule_of(m)),
            (Some(m), None) => format!("delete refused ({}); writer {still}", rule_of(m)),
        };
        let r = record(s, "claim-deleted", on, &path, &seen, &outcome).await;
        // The user's delete completes once the writer ends (kcm's pvc-protection).
        pods.delete("writer", &DeleteParams::default())
            .await
            .expect("delete writer");
        s.cp.eventually("the claim is gone", Duration::from_secs(90), || async {
            claims.get_opt("data").await.ok()?.is_none().then_some(())
        })
        .await;
        if on {
            assert!(
                stripped.is_some(),
                "volguard let the finalizers of a claim in use be stripped"
            );
            assert_eq!((r.lost, r.overlaps), (0, 0), "with volguard: {r:?}");
        } else {
            assert!(
                r.lost > 0,
                "without volguard the provisioner deletes the bytes: {r:?}"
            );
        }
    }
}

/// A StatefulSet pod writing on node-a, whose network is then cut (its kubelet goes silent,
/// its container keeps writing). The user does what the non-graceful-shutdown page says: force
/// delete the pod and taint the node out-of-service. Without volguard the replacement starts on
/// node-b while the old container still writes: two writers on one ReadWriteOnce volume. With
/// volguard both steps are refused (nobody proved node-a down), and the old writer stays alone.
async fn s_force_delete_partitioned(s: &mut Shared) {
    for on in [false, true] {
        volguard(s, on).await;
        let ns = format!("dl-force-{}", mode(on));
        let c = s.cp.admin().await;
        namespace(&c, &ns).await;
        s.cp.cordon("node-b", true).await.expect("cordon");
        let mut spec = writer_spec("data");
        spec["volumes"] = json!([]);
        let sts: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}}, "spec": spec},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": ATTACHED.class,
                                 "resources": {"requests": {"storage": "1Mi"}}}}]}
        }))
        .expect("statefulset");
        Api::<StatefulSet>::namespaced(c.clone(), &ns)
            .create(&PostParams::default(), &sts)
            .await
            .expect("create statefulset");
        let old = running_pod(s, &ns, "db-0").await;
        assert_eq!(node_of(&old), "node-a");
        s.cp.cordon("node-b", false).await.expect("uncordon");
        let path = log_path(s, &ns, "data-db-0").await;
        records_of(&path, &uid(&old), 10, Duration::from_secs(60)).await;

        s.nodes.partition("node-a", true);
        let nodes: Api<Node> = Api::all(c.clone());
        s.cp.eventually("node-a is NotReady", Duration::from_secs(90), || async {
            let n = nodes.get("node-a").await.ok()?;
            let ready = n
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Ready")?;
            (ready.status != "True").then_some(())
        })
        .await;
        let pods: Api<Pod> = Api::namespaced(c.clone(), &ns);
        let forced = refusal(
            pods.delete(
                "db-0",
                &DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await,
        );
        let tainted = refusal(
            nodes
                .patch("node-a", &PatchParams::default(), &Patch::Merge(json!({"spec": {"taints": [
                    {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]}})))
                .await,
        );
        // Long enough for the replacement to be placed, attached, started and to write.
        let replaced = {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let p = pods.get_opt("db-0").await.ok().flatten();
                if let Some(p) = p.filter(|p| {
                    uid(p) != uid(&old)
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                }) {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    break Some(p);
                }
                if Instant::now() > deadline {
                    break None;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        };
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        let outcome = match (&forced, &tainted, &replaced) {
            (None, None, Some(p)) => format!("forced; replacement ran on {}", node_of(p)),
            (None, None, None) => "forced; no replacement ran".to_string(),
            (f, t, _) => format!(
                "force delete {}, taint {}",
                f.as_deref()
                    .map_or("allowed".into(), |m| format!("refused ({})", rule_of(m))),
                t.as_deref()
                    .map_or("allowed".into(), |m| format!("refused ({})", rule_of(m)))
            ),
        };
        let r = record(s, "force-delete-partitioned", on, &path, &seen, &outcome).await;
        // Heal, and leave nothing writing: the StatefulSet goes, its pods with it.
        s.nodes.partition("node-a", false);
        let _ = nodes
            .patch(
                "node-a",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"taints": null}})),
            )
            .await;
        let _ = Api::<StatefulSet>::namespaced(c.clone(), &ns)
            .delete("db", &DeleteParams::default())
            .await;
        s.cp.eventually(
            "the StatefulSet's pods are gone",
            Duration::from_secs(120),
            || async {
                pods.list(&ListParams::default())
                    .await
                    .ok()?
                    .items
                    .is_empty()
                    .then_some(())
            },
        )
        .await;
        if on {
            assert!(
                forced.is_some(),
                "volguard let a running pod on an unfenced node be force-deleted"
            );
            assert_eq!((r.lost, r.overlaps), (0, 0), "with volguard: {r:?}");
        } else {
            assert!(
                replaced.is_some(),
                "without volguard the replacement should run: {r:?}"
            );
            assert!(
                r.overlaps > 0,
                "without volguard two writers overlap: {r:?}"
            );
        }
    }
}

// ---------------------------------------------------------------- partition healing

async fn incident(c: &kube::Client, node: &str) -> Option<NodeFence> {
    volguard::state::fences::api(c.clone())
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .filter_map(|o| volguard::state::fences::decode(o).ok())
        .filter(|f| f.spec.node == node)
        .max_by_key(|f| f.metadata.creation_timestamp)
}

fn ts(s: Option<&str>) -> Option<jiff::Timestamp> {
    s?.parse().ok()
}

/// The machine clock of a record (seconds since boot) as a wall-clock time.
fn wall(uptime: f64) -> jiff::Timestamp {
    let now_up: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let back = jiff::SignedDuration::from_secs_f64(now_up - uptime);
    jiff::Timestamp::now() - back
}

fn secs(a: Option<jiff::Timestamp>, b: Option<jiff::Timestamp>) -> Option<f64> {
    Some(b?.duration_since(a?).as_secs_f64())
}

fn condition_time(p: &Pod, kind: &str) -> Option<jiff::Timestamp> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// A one-replica StatefulSet `db` writing to its claim of `class`, placed on node-a.
async fn placed_writer(s: &mut Shared, ns: &str, class: &str) -> (Pod, PathBuf, f64) {
    let c = s.cp.admin().await;
    namespace(&c, ns).await;
    s.cp.cordon("node-b", true).await.expect("cordon");
    let mut spec = writer_spec("data");
    spec["volumes"] = json!([]);
    // Forgiveness of 2 s: volguard waits out a pod's unreachable toleration before it fences
    // (the default 300 s would only make the scenario long).
    spec["tolerations"] = json!([
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}]);
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}}, "spec": spec},
                 "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                             "resources": {"requests": {"storage": "1Mi"}}}}]}
    }))
    .expect("statefulset");
    let t = Instant::now();
    Api::<StatefulSet>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &sts)
        .await
        .expect("create statefulset");
    let old = running_pod(s, ns, "db-0").await;
    assert_eq!(node_of(&old), "node-a");
    let path = log_path(s, ns, "data-db-0").await;
    records_of(&path, &uid(&old), 1, Duration::from_secs(60)).await;
    // A pod start on a healthy node, claim attach included: part of the physical limit.
    let start = t.elapsed().as_secs_f64();
    s.cp.cordon("node-b", false).await.expect("uncordon");
    records_of(&path, &uid(&old), 10, Duration::from_secs(60)).await;
    (old, path, start)
}

async fn remove_writer(s: &Shared, ns: &str) {
    let c = s.cp.admin().await;
    let _ = Api::<StatefulSet>::namespaced(c.clone(), ns)
        .delete("db", &DeleteParams::default())
        .await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), ns);
    s.cp.eventually(
        "the StatefulSet's pods are gone",
        Duration::from_secs(120),
        || async {
            pods.list(&ListParams::default())
                .await
                .ok()?
                .items
                .is_empty()
                .then_some(())
        },
    )
    .await;
}

/// The replacement of `old` once it runs on another node and has written `n` records.
async fn replacement(
    s: &Shared,
    ns: &str,
    old: &Pod,
    path: &PathBuf,
    within: Duration,
) -> Option<Pod> {
    let pods: Api<Pod> = Api::namespaced(s.cp.admin().await, ns);
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(p) = pods.get_opt("db-0").await.ok().flatten()
            && uid(&p) != uid(old)
            && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        {
            records_of(path, &uid(&p), 20, Duration::from_secs(30)).await;
            return Some(p);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// Partition healing on real nodes, end to end. node-a's network is cut while its StatefulSet
/// pod writes. With volguard: detection, a power fence through the fence agent (every process of
/// the machine killed), proof, release (out-of-service taint, force delete), the replacement
/// attached and writing on node-b; then the network heals and the machine is powered on with a
/// new boot ID: its reboot proof, after which the fence is undone and the taint goes. Without
/// volguard nothing releases the pod: no second writer, and no writer at all until node-a is
/// back. The recovery time is split into its phases beside the physical limit on this run
/// (target/e2e/recovery.json; `make bench` copies it into its report).
async fn s_partition_heals(s: &mut Shared) {
    for on in [false, true] {
        volguard(s, on).await;
        let _ = std::fs::remove_file(s.agent_dir.join("behaviour/node-a"));
        let ns = format!("dl-heal-{}", mode(on));
        let c = s.cp.admin().await;
        let (old, path, pod_start) = placed_writer(s, &ns, FENCED_CLASS).await;
        s.nodes.partition("node-a", true);
        let (outcome, next) = if on {
            let replaced = replacement(s, &ns, &old, &path, Duration::from_secs(150)).await;
            let f = incident(&c, "node-a")
                .await
                .expect("an incident for node-a");
            let Some(new) = replaced else {
                panic!(
                    "no replacement ran; incident: {:?}\n{}",
                    f.status,
                    s.nodes.logs()
                );
            };
            s.nodes.partition("node-a", false);
            s.nodes.power_on(&s.cp, "node-a").await;
            let done =
                s.cp.eventually(
                    "the incident is Done after the reboot proof",
                    Duration::from_secs(120),
                    || async {
                        incident(&c, "node-a")
                            .await
                            .filter(|f| f.status.phase == volguard::model::fence::Phase::Done)
                    },
                )
                .await;
            let untainted = Api::<Node>::all(c.clone())
                .get("node-a")
                .await
                .ok()
                .and_then(|n| n.spec?.taints)
                .is_none_or(|t| {
                    t.iter()
                        .all(|t| t.key != "node.kubernetes.io/out-of-service")
                });
            assert!(
                untainted,
                "node-a keeps the out-of-service taint after Done"
            );
            recovery_split(&done, &new, &path, pod_start);
            (
                format!(
                    "fenced (power), released; replacement on {}; node-a back after reboot proof",
                    node_of(&new)
                ),
                Some(new),
            )
        } else {
            let replaced = replacement(s, &ns, &old, &path, Duration::from_secs(60)).await;
            s.nodes.partition("node-a", false);
            (
                match &replaced {
                    Some(p) => format!("replacement ran on {}", node_of(p)),
                    None => "no replacement in 60 s (the pod waits on the unreachable node)".into(),
                },
                replaced,
            )
        };
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        let r = record(s, "partition-heals", on, &path, &seen, &outcome).await;
        remove_writer(s, &ns).await;
        assert_eq!((r.lost, r.overlaps), (0, 0), "{} volguard: {r:?}", mode(on));
        if on {
            assert!(next.is_some() && r.writers.len() == 2, "{r:?}");
        }
    }
}

/// The same partition with a fence agent that answers "fenced" and fences nothing. While the
/// partition lasts, the node's Lease is silent either way, so nothing volguard can read tells
/// the lie from the truth: it releases, and the old container (still running behind the cut)
/// and the replacement both write. The row shows that overlap; docs/fencing.md says why a
/// backend must really fence.
async fn s_lying_agent(s: &mut Shared) {
    volguard(s, true).await;
    std::fs::write(s.agent_dir.join("behaviour/node-a"), "lie").expect("behaviour");
    let ns = "dl-lying";
    let c = s.cp.admin().await;
    let (old, path, _) = placed_writer(s, ns, FENCED_CLASS).await;
    s.nodes.partition("node-a", true);
    let replaced = replacement(s, ns, &old, &path, Duration::from_secs(150)).await;
    let f = incident(&c, "node-a").await;
    // Heal: node-a's kubelet finds its pod deleted and stops the old container.
    s.nodes.partition("node-a", false);
    let _ = std::fs::remove_file(s.agent_dir.join("behaviour/node-a"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let seen = records::snapshot(&read(&path).unwrap_or_default());
    let outcome = match (&replaced, &f) {
        (Some(p), _) => format!(
            "agent lied; released; replacement on {} beside the old writer",
            node_of(p)
        ),
        (None, Some(f)) => format!("not released: {}", f.status.phase.as_str()),
        (None, None) => "no incident".into(),
    };
    let r = record(s, "partition-lying-agent", true, &path, &seen, &outcome).await;
    remove_writer(s, ns).await;
    if replaced.is_some() {
        assert!(
            r.overlaps > 0,
            "released on a lie, yet the checker saw no overlap: {r:?}"
        );
    } else {
        assert_eq!(r.overlaps, 0, "{r:?}");
    }
    s.cp.eventually(
        "node-a's incident ends",
        Duration::from_secs(120),
        || async {
            incident(&c, "node-a").await.filter(|f| {
                matches!(
                    f.status.phase,
                    volguard::model::fence::Phase::Done | volguard::model::fence::Phase::Failed
                )
            })
        },
    )
    .await;
}

/// From the node's last heartbeat to the replacement's first record, phase by phase, beside the
/// physical limit (kcm's node-monitor grace + the fence agent's own time + a pod start on a
/// healthy node, measured on this run).
fn recovery_split(f: &NodeFence, new: &Pod, path: &PathBuf, pod_start: f64) {
    let st = &f.status;
    let heartbeat = ts(st.lease_renew_time.as_deref());
    let detected = f.metadata.creation_timestamp;
    let fence_asked = ts(st.fence_requested_at.as_deref());
    let fenced = ts(st.fenced_at.as_deref());
    let released = ts(st.released_at.as_deref());
    let created = new.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let scheduled = condition_time(new, "PodScheduled");
    let sandbox = condition_time(new, "PodReadyToStartContainers");
    let first = read(path)
        .unwrap_or_default()
        .lines()
        .filter_map(records::parse)
        .find(|r| r.writer == uid(new))
        .map(|r| wall(r.at));
    let phases = [
        ("detection", secs(heartbeat, detected)),
        ("fence", secs(detected, fenced)),
        ("proof_and_release", secs(fenced, released)),
        ("reschedule", secs(released, scheduled.or(created))),
        ("attach_and_mount", secs(scheduled, sandbox)),
        ("start", secs(sandbox, first)),
    ];
    let total = secs(heartbeat, first);
    let agent = secs(fence_asked, fenced).unwrap_or(0.0);
    let limit = 16.0 + agent + pod_start;
    let mut out =
        String::from("\nrecovery on real nodes (node-a partitioned, power-fenced), seconds:\n");
    for (name, v) in &phases {
        out += &format!(
            "  {name:<20} {}\n",
            v.map_or("-".into(), |v| format!("{v:.1}"))
        );
    }
    out += &format!(
        "  {:<20} {}\n  {:<20} {limit:.1}  (node-monitor grace 16 s + fence agent {agent:.1} s + pod start on a healthy node {pod_start:.1} s)\n",
        "total",
        total.map_or("-".into(), |v| format!("{v:.1}")),
        "limit"
    );
    println!("{out}");
    let mut json = serde_json::Map::new();
    for (name, v) in phases {
        json.insert(format!("{name}_seconds"), json!(v));
    }
    json.insert("total_seconds".into(), json!(total));
    json.insert("limit_seconds".into(), json!(limit));
    json.insert("node_monitor_grace_seconds".into(), json!(16.0));
    json.insert("fence_agent_seconds".into(), json!(agent));
    json.insert("pod_start_seconds".into(), json!(pod_start));
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/e2e");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("recovery.json"),
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    );
}

crate::scenarios! { scenario:
    claim_deleted_under_writer => |s| s_claim_deleted(s);
    force_delete_partitioned => |s| s_force_delete_partitioned(s);
    partition_heals => |s| s_partition_heals(s);
    partition_lying_agent => |s| s_lying_agent(s);
}

#[test]
fn checker_counts_loss_corruption_and_overlap() {
    let line = |w: &str, seq: u64, at: f64| {
        let body = format!("{w} n {seq} {at:.2}\n");
        format!(
            "{} {:08x}",
            body.trim_end(),
            crc32fast::hash(body.as_bytes())
        )
    };
    // One writer, nothing lost: 0 everywhere.
    let a: Vec<String> = (1..=3).map(|i| line("A", i, i as f64)).collect();
    let text = a.join("\n");
    let r = records::check(Some(&text), &records::snapshot(&text));
    assert_eq!((r.lost, r.corrupted, r.overlaps, r.records), (0, 0, 0, 3));
    // The volume gone: everything seen earlier is lost.
    assert_eq!(records::check(None, &records::snapshot(&text)).lost, 3);
    // A hole in a sequence is a loss; a torn line is corruption.
    let holed = format!("{}\n{}\nA n 9 9.00 deadbeef", a[0], a[2]);
    let r = records::check(Some(&holed), &BTreeSet::new());
    assert_eq!((r.lost, r.corrupted), (1, 1));
    // B starts while A still writes: A's two later records are overlaps; the gap is negative.
    let both = [
        line("A", 1, 1.0),
        line("B", 1, 2.0),
        line("A", 2, 3.0),
        line("A", 3, 4.0),
        line("B", 2, 5.0),
    ]
    .join("\n");
    let r = records::check(Some(&both), &BTreeSet::new());
    assert_eq!(r.overlaps, 2);
    assert_eq!(r.gap_seconds, Some(-2.0));
    // B after A has stopped: no overlap, a positive gap.
    let handover = [line("A", 1, 1.0), line("B", 1, 3.5)].join("\n");
    let r = records::check(Some(&handover), &BTreeSet::new());
    assert_eq!((r.overlaps, r.gap_seconds), (0, Some(2.5)));
}
