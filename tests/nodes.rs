//! Real nodes and real bytes (docs/testing.md, "Real nodes"): kubelets with containerd, the
//! test CSI driver with the real external-provisioner and external-attacher, kube-controller-
//! manager's attach/detach and PV controllers, and a writer appending checksummed records to
//! its volume. Each scenario runs the same steps twice, without volguard (its registrations
//! removed and its controller stopped) and with it, and the checker reads the volume's bytes
//! afterwards. The table is printed and written to target/e2e/data-loss.json.

mod support;

use support::harness::{ControlPlane, Profile};
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

const NODES: [&str; 2] = ["node-a", "node-b"];

struct Shared {
    /// Dropped first: the nodes' processes, mounts and links go before the control plane.
    nodes: RealNodes,
    cp: ControlPlane,
    rows: Vec<Row>,
}

static CLUSTER: std::sync::Mutex<Option<Shared>> = std::sync::Mutex::new(None);

async fn start_cluster() -> Shared {
    let mut cp = ControlPlane::start_with(
        Profile::Cluster,
        &["--kubelet-preferred-address-types=InternalIP"],
    )
    .await;
    let version = cp.admin().await.apiserver_version().await.expect("version");
    cp.install_manifests().await;
    cp.start_webhook().await;
    cp.start_controller("replica-a").await;
    let mut nodes = RealNodes::start(&cp).await;
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

crate::scenarios! { scenario:
    claim_deleted_under_writer => |s| s_claim_deleted(s);
    force_delete_partitioned => |s| s_force_delete_partitioned(s);
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
