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
    let (agent_dir, agent, port) = support::nodes::power_fence_agent(&cp, &nodes);
    cp.controller_extra = support::nodes::fencing_flags(&cp, port, "20s");
    cp.start_controller("replica-a").await;
    support::nodes::create_fenced_class(&cp, FENCED_CLASS).await;
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

/// The file the writer appends to, on the shared storage root, for claim `ns/name`.
async fn log_path(s: &Shared, ns: &str, name: &str) -> PathBuf {
    s.nodes.log_of(&s.cp, ns, name).await
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

fn read(path: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Wait until the log holds at least `n` records of the writer `uid`.
async fn records_of(path: &std::path::Path, uid: &str, n: usize, within: Duration) {
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
    path: &std::path::Path,
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

#[path = "nodes/deletion.rs"]
mod deletion;
#[path = "nodes/partition.rs"]
mod partition;
#[path = "nodes/placement.rs"]
mod placement;
#[path = "nodes/upstream.rs"]
mod upstream;
use deletion::*;
use partition::*;
use placement::*;
use upstream::*;

crate::scenarios! { scenario:
    claim_deleted_under_writer => |s| s_claim_deleted(s);
    volume_deleted_under_writer => |s| s_volume_deleted(s);
    namespace_deleted_with_protected_claim => |s| s_namespace_deleted(s);
    protected_volume_claim_deleted => |s| s_protected_volume_claim_deleted(s);
    two_pods_one_claim_sharedfs => |s| s_two_pods_shared_fs(s);
    two_pods_one_claim_attached => |s| s_two_pods_attached(s);
    rolling_update_rwo_sharedfs => |s| s_rolling_update(s);
    force_delete_partitioned => |s| s_force_delete_partitioned(s);
    partition_heals => |s| s_partition_heals(s);
    partition_lying_agent => |s| s_lying_agent(s);
    frozen_machine_fenced => |s| s_frozen_machine(s);
    upstream_protection_and_statefulset => |s| s_upstream(s);
    // By hand (`make upstream-storage`, about an hour); `make test` skips it.
    upstream_storage_suites => |s| s_upstream_storage(s);
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
