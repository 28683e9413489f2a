//! End-to-end: volguard against a real kube-apiserver + etcd (and kube-controller-manager's
//! protection controllers in the "beside upstream" profile), built from Go modules by
//! `make controlplane`. No fake API server. The upstream control loops (scheduler, StatefulSet,
//! Job, GC, PodGC, namespace, kwok nodes, cert-manager, kubectl) are in `tests/cluster.rs`.
//! Run with `make e2e` (part of `make test`).

mod support;

#[path = "e2e/finalizers.rs"]
mod finalizers;
#[path = "e2e/operations.rs"]
mod operations;
#[path = "e2e/pods.rs"]
mod pods;

use support::shared::Body;
use support::{harness, objects};

use harness::{ControlPlane, Profile, eventually};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use objects::*;
use serde_json::json;
use std::time::Duration;

// ---------------------------------------------------------------- scenarios

// ---------------------------------------------------------------- the shared control planes

/// volguard alone (kube-controller-manager without its protection controllers): its own
/// scenarios. Built by the first scenario that runs, shared by the others.
static STANDALONE: std::sync::Mutex<Option<ControlPlane>> = std::sync::Mutex::new(None);
/// volguard beside kube-controller-manager's own pvc/pv-protection controllers.
static BESIDE: std::sync::Mutex<Option<ControlPlane>> = std::sync::Mutex::new(None);

async fn start_standalone() -> ControlPlane {
    let mut cp = ControlPlane::start(Profile::Standalone).await;
    let version = cp.admin().await.apiserver_version().await.expect("version");
    println!("kube-apiserver {}", version.git_version);
    let applied = cp.install_manifests().await;
    println!(
        "manifests applied (namespace, RBAC, CRDs for real; the rest server-side dry run): {}",
        applied.join(", ")
    );
    assert!(
        applied.iter().any(|a| a == "Certificate/volguard-webhook"),
        "cert-manager objects dry-run"
    );
    cp.start_webhook().await;
    cp.start_controller("replica-a").await;
    let c = cp.admin().await;
    for ns in [
        "s1",
        "s2",
        "s-conflict",
        "s4",
        "s5",
        "s6",
        "s7",
        "s8",
        "s9",
        "s10",
        "s12",
        "s13",
        "s14",
        "s15",
        "s5b",
        "s17",
    ] {
        namespace(&c, ns).await;
    }
    cp
}

async fn start_beside() -> ControlPlane {
    let mut cp = ControlPlane::start(Profile::BesideUpstream).await;
    cp.install_manifests().await;
    cp.start_webhook().await;
    cp.start_controller("replica-a").await;
    let c = cp.admin().await;
    for ns in ["u1", "u2", "u4", "u-kcm"] {
        namespace(&c, ns).await;
    }
    cp
}

/// A scenario on the standalone control plane; a wait that times out dumps every log.
fn standalone(name: &str, f: impl for<'a> FnOnce(&'a mut ControlPlane) -> Body<'a>) {
    support::shared::scenario(
        &STANDALONE,
        || Box::pin(start_standalone()),
        |cp| Box::pin(cp.ensure_running()),
        |cp| cp.logs(),
        name,
        f,
    );
}

/// A scenario beside kube-controller-manager's protection controllers.
fn beside(name: &str, f: impl for<'a> FnOnce(&'a mut ControlPlane) -> Body<'a>) {
    support::shared::scenario(
        &BESIDE,
        || Box::pin(start_beside()),
        |cp| Box::pin(cp.ensure_running()),
        |cp| cp.logs(),
        name,
        f,
    );
}

// ---------------------------------------------------------------- one test per scenario

crate::scenarios! { standalone:
    least_privilege => |cp| operations::least_privilege(cp);
    finalizers_on_create => |cp| finalizers::finalizers_on_create(cp, "s1");
    postponed_refused_released => |cp| finalizers::postponed_refused_released(cp, "s2");
    test_guarded_finalizer_removal => |cp| finalizers::test_guarded_finalizer_removal(cp, "s-conflict");
    finalizer_strip_guard => |cp| finalizers::finalizer_strip_guard(cp, "s4");
    force_delete => |cp| pods::force_delete(cp, "s5");
    stale_out_of_service_cache => |cp| pods::stale_out_of_service_cache(cp, "s5b");
    prebound_terminating_pv => |cp| finalizers::prebound_terminating_pv(cp, "s6");
    bound_pv => |cp| finalizers::bound_pv(cp, "s7");
    unused_since => |cp| finalizers::unused_since(cp, "s8");
    eviction => |cp| pods::eviction(cp, "s12");
    recreated_claim => |cp| finalizers::recreated_claim(cp, "s13");
    match_conditions => |cp| operations::match_conditions(cp, "s14");
    claim_metadata => |cp| pods::claim_metadata(cp, "s-claim-meta");
    rwo_pod_create => |cp| pods::rwo_pod_create(cp, "s15");
    late_decisions => |cp| operations::late_decisions(cp);
    explain_kubectl_plugin => |cp| operations::explain_kubectl_plugin(cp);
    webhook_down => |cp| operations::webhook_down(cp, "s9");
    leader_failover => |cp| operations::leader_failover(cp, "s10");
}

crate::scenarios! { beside:
    beside_upstream_finalizers_on_create => |cp| finalizers::finalizers_on_create(cp, "u1");
    beside_upstream_postponed_refused_released => |cp| finalizers::postponed_refused_released(cp, "u2");
    beside_upstream_finalizer_strip_guard => |cp| finalizers::finalizer_strip_guard(cp, "u4");
    beside_upstream_then_kcm_alone_releases => |cp| finalizers::then_kcm_alone_releases(cp);
}

#[test]
#[ignore = "needs the control plane that `make e2e` builds (it runs the ignored tests)"]
fn policy_manifest_admission() {
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(operations::policy_manifest_admission());
}
