//! Partition healing (docs/fencing.md) among the real control loops: kube-controller-manager's
//! node-lifecycle, taint-eviction and PodGC controllers, kube-scheduler, StatefulSets, kwok
//! nodes (a partition is a node's kwok stopped, so its Lease stops), volguard's webhook and
//! controller, and volguard's reference fence agent running a script per node. Every scenario
//! prints `scenario NAME: ok`; `make e2e` runs this file on each Kubernetes version it builds.
//!
//! A checker samples the scenario's pods every 300 ms and fails the scenario if a ReadWriteOnce
//! claim is ever used by non-terminal pods on two nodes of which more than one is unfenced (the
//! agent's marker files are the ground truth of "fenced").

#[path = "partition/fencing.rs"]
mod fencing;
#[path = "partition/helpers.rs"]
mod helpers;
#[path = "partition/remediators.rs"]
mod remediators;
#[path = "partition/scope.rs"]
mod scope;
mod support;
use helpers::*;

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
    // kwok nodes have no machine whose state could be read back: a fence is proven by its
    // behaviour's own `.verify` script where a test gives one, else by the fence script's exit.
    std::fs::write(
        agent_dir.join("verify.sh"),
        "d=$(dirname \"$0\"); export FENCED=\"$d/fenced/$NODE\"\n\
         [ -f \"$d/behaviour/$NODE.verify\" ] && exec sh \"$d/behaviour/$NODE.verify\"\n\
         exit 0\n",
    )
    .expect("verify.sh");
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
        "p-static",
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

// ---------------------------------------------------------------- scenarios

// ---------------------------------------------------------------- one test per scenario

crate::scenarios! { scenario:
    partition_fenced => |s| fencing::partition_fenced(s);
    partition_lying_agent => |s| fencing::partition_lying_agent(s);
    partition_agent_timeout => |s| fencing::partition_agent_timeout(s);
    partition_heals => |s| fencing::partition_heals(s);
    partition_zombie => |s| fencing::partition_zombie(s);
    partition_storm => |s| remediators::partition_storm(s);
    partition_restart => |s| remediators::partition_restart(s);
    partition_opt_out => |s| remediators::partition_opt_out(s);
    partition_guards => |s| remediators::partition_guards(s);
    partition_networkfence => |s| scope::partition_networkfence(s);
    partition_maintenance => |s| fencing::partition_maintenance(s);
    partition_needs_reboot => |s| fencing::partition_needs_reboot(s);
    remediator_taint => |s| remediators::remediator_taint(s);
    remediator_node_delete => |s| remediators::remediator_node_delete(s);
    partition_partial_fence => |s| scope::partition_partial_fence(s);
    partition_static_claim => |s| fencing::partition_static_claim(s);
}
