//! Objects and polling helpers shared by the e2e test files: namespaces, claims, volumes and
//! pods as users write them, and what volguard's metrics say.
#![allow(dead_code)]

use super::harness::ControlPlane;
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ServiceAccount,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;

pub const PVCF: &str = "kubernetes.io/pvc-protection";
pub const PVF: &str = "kubernetes.io/pv-protection";
pub const WAIT: Duration = Duration::from_secs(30);

pub async fn namespace(c: &kube::Client, name: &str) {
    labelled_namespace(c, name, json!({})).await;
}

pub async fn labelled_namespace(c: &kube::Client, name: &str, labels: serde_json::Value) {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).expect("ns");
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    // The beside-upstream profile runs the ServiceAccount admission plugin without its controller.
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).expect("sa");
    let _ = Api::<ServiceAccount>::namespaced(c.clone(), name)
        .create(&PostParams::default(), &sa)
        .await;
}

pub async fn node(c: &kube::Client, name: &str) {
    let n: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("node");
    let _ = Api::<Node>::all(c.clone())
        .create(&PostParams::default(), &n)
        .await;
}

pub async fn pvc(
    c: &kube::Client,
    ns: &str,
    name: &str,
    volume: Option<&str>,
) -> Result<PersistentVolumeClaim, kube::Error> {
    let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": ""});
    if let Some(v) = volume {
        spec["volumeName"] = json!(v);
    }
    let p: PersistentVolumeClaim =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("pvc");
    Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &p)
        .await
}

pub async fn pv(c: &kube::Client, name: &str, extra_finalizers: &[&str]) -> PersistentVolume {
    let mut meta = json!({"name": name});
    if !extra_finalizers.is_empty() {
        meta["finalizers"] = json!(extra_finalizers);
    }
    let p: PersistentVolume = serde_json::from_value(json!({
        "metadata": meta,
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
                 "hostPath": {"path": format!("/tmp/{name}")}}
    }))
    .expect("pv");
    Api::<PersistentVolume>::all(c.clone())
        .create(&PostParams::default(), &p)
        .await
        .expect("create pv")
}

pub fn pod_json(name: &str, node: Option<&str>, claims: &[&str], tgps: i64) -> Pod {
    let vols: Vec<_> = claims
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    let mut spec = json!({"containers": [{"name": "app", "image": "example.invalid/app:1"}], "volumes": vols,
                          "terminationGracePeriodSeconds": tgps, "automountServiceAccountToken": false});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("pod")
}

pub async fn pod(
    c: &kube::Client,
    ns: &str,
    name: &str,
    node: Option<&str>,
    claims: &[&str],
) -> Result<Pod, kube::Error> {
    Api::<Pod>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &pod_json(name, node, claims, 30))
        .await
}

pub async fn set_pod_phase(c: &kube::Client, ns: &str, name: &str, phase: &str) {
    Api::<Pod>::namespaced(c.clone(), ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase}})),
        )
        .await
        .expect("pod status");
}

pub async fn set_status_phase<K>(api: &Api<K>, name: &str, phase: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": phase}})),
    )
    .await
    .expect("status");
}

pub fn finalizers<K: kube::Resource>(o: &K) -> Vec<String> {
    o.meta().finalizers.clone().unwrap_or_default()
}

pub fn denial(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message.clone()),
        other => panic!("expected an API error, got {other}"),
    }
}

pub fn force() -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    }
}

pub async fn gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    matches!(api.get_opt(name).await, Ok(None))
}

/// `/metrics` of a volguard process's probe port.
pub async fn metrics_text(probe_port: u16) -> String {
    reqwest::get(format!("http://127.0.0.1:{probe_port}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text")
}

/// The serve's count of admission requests on one endpoint (rule path), all decisions.
pub async fn reached(cp: &ControlPlane, endpoint: &str) -> f64 {
    decided(cp, endpoint, None).await
}

/// The serve's count of admission requests on one endpoint with one decision (all when None).
pub async fn decided(cp: &ControlPlane, endpoint: &str, decision: Option<&str>) -> f64 {
    let text = metrics_text(cp.serve_probe).await;
    text.lines()
        .filter(|l| {
            l.starts_with("volguard_admission_requests_total{")
                && l.contains(&format!("endpoint=\"{endpoint}\""))
                && decision.is_none_or(|d| l.contains(&format!("decision=\"{d}\"")))
        })
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum()
}

pub async fn run_or_dump<F: std::future::Future<Output = ()>>(cp: &ControlPlane, name: &str, f: F) {
    let started = std::time::Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(120), f).await;
    if r.is_err() {
        panic!("{name} timed out\n{}", cp.logs());
    }
    println!(
        "scenario {name}: ok ({:.1}s)",
        started.elapsed().as_secs_f64()
    );
}

/// The NodeFence incidents and records, as the apiserver serves them.
pub fn fence_api(c: &kube::Client) -> kube::Api<kube::api::DynamicObject> {
    use volguard::model::fence::{GROUP, KIND, PLURAL, VERSION};
    let gvk = kube::api::GroupVersionKind::gvk(GROUP, VERSION, KIND);
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, PLURAL);
    kube::Api::all_with(c.clone(), &ar)
}

/// csi-addons NetworkFences (the networkfence backend's), as the apiserver serves them.
pub fn network_fence_api(c: &kube::Client) -> kube::Api<kube::api::DynamicObject> {
    let gvk =
        kube::api::GroupVersionKind::gvk("csiaddons.openshift.io", "v1alpha1", "NetworkFence");
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, "networkfences");
    kube::Api::all_with(c.clone(), &ar)
}

/// A NodeFence as the apiserver stores it, typed (`None`: it does not decode).
pub fn decode_fence(o: kube::api::DynamicObject) -> Option<volguard::model::fence::NodeFence> {
    serde_json::to_value(o)
        .and_then(serde_json::from_value)
        .ok()
}

/// Every NodeFence the apiserver holds, decoded (one that does not decode is left out).
pub async fn node_fences(c: &kube::Client) -> Vec<volguard::model::fence::NodeFence> {
    fence_api(c)
        .list(&kube::api::ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(decode_fence)
        .collect()
}

/// When the pod's condition `kind` last turned `True` (`None`: not true, or never written).
pub fn condition_time(p: &Pod, kind: &str) -> Option<jiff::Timestamp> {
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
