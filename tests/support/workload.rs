//! The workloads the cluster tests and benches churn: pods with claims from StatefulSets, scaled
//! up and down through the real StatefulSet controller, scheduler and kwok.

use super::harness::ControlPlane;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;

/// The default StorageClass: kube-controller-manager's hostPath provisioner (test clusters only)
/// creates a PV for each claim and deletes it with the claim.
pub async fn default_storage_class(c: &kube::Client) {
    use k8s_openapi::api::storage::v1::StorageClass;
    let sc: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "e2e-hostpath",
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/host-path", "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate"
    }))
    .expect("storage class");
    Api::<StorageClass>::all(c.clone())
        .create(&PostParams::default(), &sc)
        .await
        .expect("create storage class");
}

pub fn pod_template(app: &str, claim_volume: serde_json::Value) -> serde_json::Value {
    json!({"metadata": {"labels": {"app": app}},
           "spec": {"containers": [{"name": "app", "image": "example.invalid/app:1",
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                    "terminationGracePeriodSeconds": 5,
                    "volumes": [claim_volume]}})
}

/// A StatefulSet with a `data` volumeClaimTemplate (RWO, default class), pods started in parallel.
pub fn statefulset(name: &str, replicas: i32, retention: serde_json::Value) -> StatefulSet {
    let mut template = pod_template(name, json!(null));
    template["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("volumes");
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": name}},
                 "persistentVolumeClaimRetentionPolicy": retention,
                 "template": template,
                 "volumeClaimTemplates": [{"metadata": {"name": "data"},
                     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}
    }))
    .expect("statefulset")
}

/// Create the StatefulSets `{prefix}-{i}` for each `i` of `range`, with `replicas` pods each; their
/// claims are retained when they scale down and deleted with them.
pub async fn create_statefulsets(
    api: &Api<StatefulSet>,
    prefix: &str,
    range: std::ops::Range<usize>,
    replicas: i32,
) {
    for s in range {
        api.create(
            &PostParams::default(),
            &statefulset(
                &format!("{prefix}-{s}"),
                replicas,
                json!({"whenScaled": "Retain", "whenDeleted": "Delete"}),
            ),
        )
        .await
        .expect("statefulset");
    }
}

/// Scale the StatefulSets `{prefix}-0..sets` to `replicas`, then wait until `replicas × sets` of
/// their pods run (or, at 0, until none is left).
pub async fn scale_all(
    cp: &ControlPlane,
    api: &Api<StatefulSet>,
    pods: &Api<Pod>,
    prefix: &str,
    sets: usize,
    replicas: i32,
    what: &str,
) {
    for s in 0..sets {
        api.patch(
            &format!("{prefix}-{s}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .expect("scale");
    }
    let want = sets * replicas as usize;
    cp.eventually(what, Duration::from_secs(300), || {
        let pods = pods.clone();
        async move {
            let items = pods.list(&ListParams::default()).await.ok()?.items;
            let running = items
                .iter()
                .filter(|p| {
                    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                        && p.metadata.deletion_timestamp.is_none()
                })
                .count();
            let done = if replicas == 0 {
                items.is_empty()
            } else {
                running >= want
            };
            done.then_some(())
        }
    })
    .await;
}

/// How the pods of a churn round were registered with the apiserver.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Hooks {
    /// No volguard registration at all.
    None,
    /// volguard's registrations (same webhooks, paths, matchConditions, failure policies,
    /// timeouts, TLS) served by the floor binary, which answers every review "allowed".
    Noop,
    /// As `Noop`, with the floor writing one annotation onto the pod's claim on each placement (a
    /// bind, or a create naming its node; resourceVersion-checked): the least an RWO lock can cost.
    WritingNoop,
    Volguard,
}

impl Hooks {
    /// Register this mode's webhooks: none, or volguard's registrations pointing at the no-op
    /// server on `floor`, the writing one on `writing`, or at volguard on `volguard`.
    pub async fn register(self, cp: &mut ControlPlane, floor: u16, writing: u16, volguard: u16) {
        match self {
            Hooks::None => cp.unregister_webhooks().await,
            Hooks::Noop => cp.route_webhooks_to(floor).await,
            Hooks::WritingNoop => cp.route_webhooks_to(writing).await,
            Hooks::Volguard => cp.route_webhooks_to(volguard).await,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Hooks::None => "none",
            Hooks::Noop => "noop",
            Hooks::WritingNoop => "writing-noop",
            Hooks::Volguard => "volguard",
        }
    }
}

/// The writing floor's counters (`/stats` on its webhook port).
pub async fn floor_stats(cp: &ControlPlane, port: u16) -> std::collections::BTreeMap<String, f64> {
    let ca = reqwest::Certificate::from_pem(cp.webhook_ca.as_bytes()).expect("ca");
    let http = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("client");
    let text = http
        .get(format!("https://localhost:{port}/stats"))
        .send()
        .await
        .expect("the writing floor's /stats")
        .text()
        .await
        .expect("text");
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}
