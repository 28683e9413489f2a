//! volguard among the real control loops: kube-scheduler, kube-controller-manager with its default
//! controllers (StatefulSet, Job, TTL, ephemeral-volume, garbage collector, namespace, PodGC,
//! node-lifecycle, taint eviction, PV binder with the hostPath provisioner), kwok playing each
//! node's kubelet under the node's own identity, and kubectl as users run it. Every scenario
//! prints `scenario NAME: ok`; `make e2e` runs this file on each Kubernetes version it builds.

#[path = "cluster/direct.rs"]
mod direct;
#[path = "cluster/doors.rs"]
mod doors;
#[path = "cluster/exemptions.rs"]
mod exemptions;
#[path = "cluster/lock.rs"]
mod lock;
#[path = "cluster/lock_race.rs"]
mod lock_race;
#[path = "cluster/nodes.rs"]
mod nodes;
#[path = "cluster/operators.rs"]
mod operators;
#[path = "cluster/policies.rs"]
mod policies;
#[path = "cluster/policy_install.rs"]
mod policy_install;
mod support;
#[path = "cluster/webhook.rs"]
mod webhook;
#[path = "cluster/workloads.rs"]
mod workloads;

use support::apiserver::*;
use support::shared::Body;
use support::workload::*;
use support::{harness, objects};

use harness::{ControlPlane, Profile};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Node, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use objects::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lock::*;
use policies::*;
use policy_install::*;
use webhook::*;
use workloads::*;

const LONG: Duration = Duration::from_secs(120);
/// The name cert-manager's certificate for the webhook carries (the kustomize base's Service).
const WEBHOOK_DNS: &str = "volguard-webhook.volguard-system.svc";

// ---------------------------------------------------------------- objects

/// A claim of the default class (provisioned and bound by kube-controller-manager).
async fn claim(cp: &ControlPlane, ns: &str, name: &str) {
    let c = cp.admin().await;
    let p: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("pvc");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c, ns);
    pvcs.create(&PostParams::default(), &p)
        .await
        .expect("create claim");
    cp.eventually(&format!("claim {ns}/{name} Bound"), WAIT, || {
        let pvcs = pvcs.clone();
        async move {
            let p = pvcs.get(name).await.ok()?;
            (p.status?.phase.as_deref() == Some("Bound")).then_some(())
        }
    })
    .await;
}

/// A plain pod on `claim`, scheduled by kube-scheduler (to `node` when given).
fn claim_pod(name: &str, claim: &str, node: Option<&str>) -> Pod {
    let mut t = pod_template(
        name,
        json!({"name": "data", "persistentVolumeClaim": {"claimName": claim}}),
    );
    t["metadata"]["name"] = json!(name);
    if let Some(n) = node {
        t["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": n});
    }
    serde_json::from_value(t).expect("pod")
}

async fn running(cp: &ControlPlane, ns: &str, name: &str) -> Pod {
    let pods = Api::<Pod>::namespaced(cp.admin().await, ns);
    cp.eventually(&format!("pod {ns}/{name} Running"), LONG, || {
        let pods = pods.clone();
        async move {
            let p = pods.get(name).await.ok()?;
            let phase = p.status.as_ref()?.phase.as_deref()?;
            (phase == "Running" && p.metadata.deletion_timestamp.is_none()).then_some(p)
        }
    })
    .await
}

async fn gone_within<K>(cp: &ControlPlane, api: &Api<K>, what: &str, name: &str, within: Duration)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    cp.eventually(&format!("{what} {name} gone"), within, || async {
        gone(api, name).await.then_some(())
    })
    .await;
}

/// Messages of the events on `name` with `reason` (any reason when None).
async fn events(c: &kube::Client, ns: &str, name: &str, reason: Option<&str>) -> Vec<String> {
    Api::<Event>::namespaced(c.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| reason.is_none_or(|r| e.reason.as_deref() == Some(r)))
        .filter_map(|e| e.message)
        .collect()
}

/// kubectl as a user runs it (admin kubeconfig): success and everything it printed.
fn kubectl(cp: &ControlPlane, args: &[&str]) -> (bool, String) {
    let kc = cp.kubeconfig_file("kubectl-user", "e2e-user", &["system:masters"]);
    let out = std::process::Command::new(harness::bin_dir().join("kubectl"))
        .arg(format!("--kubeconfig={}", kc.display()))
        .args(args)
        .output()
        .expect("run kubectl");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// A test's own finalizer that keeps a claim Terminating ("as a slow detach would").
const HOLD: &str = "e2e.volguard.io/hold";

/// Remove `HOLD` from a claim, whatever else its finalizer list holds by now (volguard or kcm
/// may have released the protection finalizer meanwhile).
async fn release_hold(pvcs: &Api<PersistentVolumeClaim>, name: &str) {
    let p = pvcs.get(name).await.expect("claim");
    let i = finalizers(&p)
        .iter()
        .position(|f| f == HOLD)
        .expect("hold finalizer");
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": HOLD},
        {"op": "remove", "path": format!("/metadata/finalizers/{i}")}
    ]))
    .expect("patch");
    pvcs.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .expect("release hold");
}

/// Records the etcd revision at which each pod and claim of `ns` was deleted (from watches).
struct Deletions {
    seen: std::sync::Arc<std::sync::Mutex<BTreeMap<String, u64>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Deletions {
    async fn watch(c: &kube::Client, ns: &str) -> Deletions {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::new()));
        let tasks = vec![
            Self::spawn::<Pod>(Api::namespaced(c.clone(), ns), "pod", seen.clone()).await,
            Self::spawn::<PersistentVolumeClaim>(
                Api::namespaced(c.clone(), ns),
                "pvc",
                seen.clone(),
            )
            .await,
        ];
        Deletions { seen, tasks }
    }

    async fn spawn<K>(
        api: Api<K>,
        kind: &'static str,
        seen: std::sync::Arc<std::sync::Mutex<BTreeMap<String, u64>>>,
    ) -> tokio::task::JoinHandle<()>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        use futures::StreamExt;
        use kube::api::{WatchEvent, WatchParams};
        let rv = api
            .list(&ListParams::default())
            .await
            .expect("list")
            .metadata
            .resource_version
            .unwrap_or_default();
        tokio::spawn(async move {
            let mut rv = rv;
            loop {
                let Ok(stream) = api.watch(&WatchParams::default().timeout(290), &rv).await else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let mut stream = std::pin::pin!(stream);
                while let Some(Ok(ev)) = stream.next().await {
                    let obj = match ev {
                        WatchEvent::Deleted(o) => {
                            let rev = o.meta().resource_version.clone().unwrap_or_default();
                            let name = o.meta().name.clone().unwrap_or_default();
                            if let Ok(rev) = rev.parse() {
                                seen.lock()
                                    .expect("lock")
                                    .insert(format!("{kind}/{name}"), rev);
                            }
                            o
                        }
                        WatchEvent::Added(o) | WatchEvent::Modified(o) => o,
                        WatchEvent::Bookmark(_) | WatchEvent::Error(_) => continue,
                    };
                    rv = obj.meta().resource_version.clone().unwrap_or(rv);
                }
            }
        })
    }

    fn at(&self, key: &str) -> Option<u64> {
        self.seen.lock().expect("lock").get(key).copied()
    }
}

impl Drop for Deletions {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

// ---------------------------------------------------------------- scenarios

/// One cluster per test process (`make e2e` runs this file once per Kubernetes version): built
/// by the first scenario that runs, shared by the others, stopped when the process exits.
struct Shared {
    cp: ControlPlane,
    /// The apiserver's minor version (some upstream behaviour differs between versions).
    minor: u32,
}

static CLUSTER: std::sync::Mutex<Option<Shared>> = std::sync::Mutex::new(None);

async fn start_cluster() -> Shared {
    let mut cp = ControlPlane::start(Profile::Cluster).await;
    let version = cp.admin().await.apiserver_version().await.expect("version");
    println!(
        "\nkube-apiserver {} with kube-controller-manager (default controllers), kube-scheduler, kwok nodes",
        version.git_version
    );
    cp.install_manifests().await;
    cp.start_cert_manager().await;
    cp.start_webhook().await;
    println!(
        "cert-manager v1.11.5 issued the serving certificate (cainjector running; no configuration asks it to inject: dropped matchConditions: {})",
        cp.cainjector_dropped_match_conditions
    );
    // The CA in place and no inject-ca-from annotation: the conditions stay, cainjector has nothing to do.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        cp.match_conditions().await > 0,
        "matchConditions erased again after re-applying"
    );
    cp.start_controller("replica-a").await;
    let c = cp.admin().await;
    default_storage_class(&c).await;
    for n in ["kwok-1", "kwok-2"] {
        cp.kwok_node(n).await;
    }
    for ns in [
        "sts-scale",
        "sts-recreate",
        "ephemeral",
        "jobs",
        "podgc",
        "oos",
        "drain",
        "ux",
        "down",
        "churn",
        "sbs",
        "rwo",
        "renewal",
        "unused",
        "rollout",
        "rwo-race",
        "multi-rwo",
        "rwo-stale",
        "rwo-pages",
        "eph-owner",
        "rwo-missing",
        "rwo-restarted",
        "rwo-cache-since",
        "flood",
        "mtls",
        "policy",
        "explain-pod",
        "agree",
        "registration",
        "protect",
        "doors",
        "rwo-same-node",
        "exempt",
        "renew",
        "audit-report",
    ] {
        namespace(&c, ns).await;
    }
    let minor: u32 = version.minor.trim_end_matches('+').parse().expect("minor");
    Shared { cp, minor }
}

/// Run scenario `name` on this process's cluster.
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

/// Before each scenario: the webhook and a controller run, and both shared nodes take pods (a
/// scenario that failed half-way may have left one cordoned).
async fn prepare(s: &mut Shared) {
    no_policies_left(&s.cp.admin().await).await;
    s.cp.ensure_running().await;
    for n in ["kwok-1", "kwok-2"] {
        let _ = s.cp.cordon(n, false).await;
    }
}

// ---------------------------------------------------------------- one test per scenario

crate::scenarios! { scenario:
    audit_report_outlives_events => |s| exemptions::audit_report_outlives_events(&mut s.cp, "audit-report");
    cert_manager_renewal => |s| webhook::cert_manager_renewal(&s.cp, "renewal");
    statefulset_scale => |s| workloads::statefulset_scale(&s.cp, "sts-scale");
    statefulset_recreate => |s| workloads::statefulset_recreate(&s.cp, "sts-recreate");
    ephemeral_volume => |s| workloads::ephemeral_volume(&s.cp, "ephemeral");
    rwo_stale_replica => |s| lock::rwo_stale_replica(&s.cp, "rwo-stale");
    rwo_takeover_reads_every_page => |s| lock::rwo_takeover_reads_every_page(&s.cp, "rwo-pages");
    ephemeral_owner_repointed => |s| workloads::ephemeral_owner_repointed(&s.cp, "eph-owner");
    policy_webhook_down => |s| policies::policy_webhook_down(&mut s.cp, "policy");
    explain_pod_multi_attach => |s| operators::explain_pod_multi_attach(&s.cp, "explain-pod");
    policy_agrees => |s| policies::policy_agrees(&mut s.cp, "agree");
    registration_drift => |s| policies::registration_drift(&mut s.cp, "registration");
    delete_protection => |s| policies::delete_protection(&s.cp, "protect");
    // Named to run after the policy scenarios (libtest runs them in name order): run before them,
    // its policies installed and removed left kube-apiserver 1.37.2 evaluating policy-agrees'
    // re-created bindings with the parameters of before (30 s and more, set before or after).
    proof_door_matrix => |s| doors::proof_door_matrix(&mut s.cp, "doors");
    rwo_missing_claim => |s| lock::rwo_missing_claim(&s.cp, "rwo-missing");
    rwo_restarted_replica => |s| lock::rwo_restarted_replica(&s.cp, "rwo-restarted");
    rwo_restarted_replica_reads_its_cache => |s| lock::rwo_restarted_replica_reads_its_cache(&s.cp, "rwo-cache-since");
    rwo_same_node_creates => |s| lock::rwo_same_node_creates(&s.cp, "rwo-same-node");
    webhook_idle_flood => |s| webhook::webhook_idle_flood(&s.cp, "flood");
    // Named to run after the policy scenarios (see proof_door_matrix): it installs them with
    // parameters of its own.
    webhook_exemption_and_expiry => |s| exemptions::webhook_exemption_and_expiry(&mut s.cp, "exempt");
    override_renewed_after_expiry => |s| exemptions::override_renewed_after_expiry(&mut s.cp, "renew");
    webhook_client_cert => |s| webhook::webhook_client_cert(&mut s.cp, "mtls");
    job_completion => |s| workloads::job_completion(&s.cp, "jobs");
    kubectl_ux => |s| operators::kubectl_ux(&s.cp, "ux");
    namespace_deletion => |s| async move { let took = workloads::namespace_deletion(&s.cp, "doomed").await; println!( "namespace-deletion: namespace deleted in {:.1}s", took.as_secs_f64() ); };
    node_delete_guard => |s| nodes::node_delete_guard(&mut s.cp, "podgc");
    out_of_service => |s| nodes::out_of_service(&mut s.cp, "oos");
    drain_eviction => |s| nodes::drain_eviction(&mut s.cp, "drain");
    webhook_down => |s| webhook::webhook_down(&mut s.cp, "down");
    rwo_single_node => |s| lock::rwo_single_node(&s.cp, "rwo");
    rwo_lock_race => |s| lock_race::rwo_lock_race(&mut s.cp, "rwo-race");
    multi_node_rwo_detection => |s| lock_race::multi_node_rwo_detection(&mut s.cp, "multi-rwo");
    unused_condition => |s| workloads::unused_condition(&mut s.cp, "unused", s.minor);
    webhook_rollout => |s| webhook::webhook_rollout(&mut s.cp, "rollout");
    /// The apiserver's own latency figures for volguard's webhooks under churn (`cargo test
    /// --test cluster -- --ignored --exact apiserver_latency` runs this one alone).
    // 10 StatefulSets x 10 pods, twice: the correctness of every call under churn. The
    // latency figures of record come from `make bench`'s side by side.
    apiserver_latency => |s| webhook::apiserver_latency(&s.cp, "churn", 10, 10, 2);
}

/// `make bench`: none / no-op / volguard side by side (`--exact apiserver_side_by_side`).
#[test]
#[ignore = "needs the control plane and the floor example: make bench"]
fn apiserver_side_by_side() {
    // VOLGUARD_BENCH_ROUNDS: fewer rounds for a quick look (at least 2: each figure is also
    // given per half of the rounds).
    let rounds = std::env::var("VOLGUARD_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(4usize)
        .max(2);
    scenario("apiserver-side-by-side", move |s| {
        Box::pin(s_side_by_side(&mut s.cp, "sbs", 10, 10, rounds))
    });
}
