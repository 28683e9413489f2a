//! The writing floor: the floor's stack, and on each placement (`/validate/rwo-single-node`: a
//! bind, or a pod created with its node named) one compare-and-swap write onto the pod's first claim (a merge patch carrying the claim's
//! resourceVersion, as volguard's RWO lock writes it), then "allowed". Its facts come from
//! kube-rs reflectors of pods and claims, so a placement costs what a lock must cost at least: one etcd
//! write, no read. `make bench` compares volguard's rwo-single-node webhook against it.

use super::floor_app::BindReq;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The annotation the writing floor puts on a claim.
pub const ANNOTATION: &str = "bench.volguard.io/writer";

pub struct Writer {
    client: kube::Client,
    pods: Store<Pod>,
    claims: Store<PersistentVolumeClaim>,
    /// Writes made, and binds that found nothing to write (pod or claim not cached).
    pub written: AtomicU64,
    pub skipped: AtomicU64,
    /// Time inside the bind handler and inside its write (ns, summed): where a bind's time goes,
    /// beside volguard's own duration histogram.
    pub handler_ns: AtomicU64,
    pub write_ns: AtomicU64,
}

impl Writer {
    /// Start the reflectors; answers wait for nothing (a cache miss is counted, not read).
    pub fn start(client: kube::Client) -> Arc<Writer> {
        let pods = super::reflect::reflect(Api::<Pod>::all(client.clone()), prune_pod);
        let claims = super::reflect::reflect(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            prune_claim,
        );
        Arc::new(Writer {
            client,
            pods,
            claims,
            written: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            handler_ns: AtomicU64::new(0),
            write_ns: AtomicU64::new(0),
        })
    }

    /// A placement's write: onto `claim` (a create names it) or the cached pod's first claim.
    async fn bind(&self, ns: &str, pod: &str, node: &str, claim: Option<&str>) {
        let claim = match claim {
            Some(c) => Some(c.to_string()),
            None => self
                .pods
                .get(&ObjectRef::new(pod).within(ns))
                .and_then(|p| {
                    p.spec.as_ref()?.volumes.as_ref()?.iter().find_map(|v| {
                        v.persistent_volume_claim
                            .as_ref()
                            .map(|c| c.claim_name.clone())
                    })
                }),
        }
        .and_then(|c| self.claims.get(&ObjectRef::new(&c).within(ns)));
        let Some(claim) = claim else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let name = claim.metadata.name.clone().unwrap_or_default();
        let patch = serde_json::json!({"metadata": {
            "resourceVersion": claim.metadata.resource_version,
            "annotations": {ANNOTATION: format!("{node}/{pod}")},
        }});
        let api = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), ns);
        // A conflict (the cache was behind) is still one write attempt: what a lock pays.
        let t = std::time::Instant::now();
        let _ = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        self.write_ns.fetch_add(nanos(t), Ordering::Relaxed);
        self.written.fetch_add(1, Ordering::Relaxed);
    }
}

/// A bind reads the pod's claim volumes and nothing else of it. Whole, the reflectors held ~20 KiB
/// per pod and claim, so at 80,000 pods the writing no-op did not fit beside the cluster
/// (`make bench-scale` at 5,000 nodes) and the bind had no floor to be compared with.
fn prune_pod(p: &mut Pod) {
    let volumes = p.spec.take().and_then(|s| s.volumes).map(|vs| {
        vs.into_iter()
            .filter(|v| v.persistent_volume_claim.is_some())
            .collect()
    });
    p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
        volumes,
        ..Default::default()
    });
    p.status = None;
    keep_identity(&mut p.metadata);
}

/// A claim's name and resourceVersion are all the write uses.
fn prune_claim(c: &mut PersistentVolumeClaim) {
    c.spec = None;
    c.status = None;
    keep_identity(&mut c.metadata);
}

fn keep_identity(m: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    *m = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: m.name.take(),
        namespace: m.namespace.take(),
        resource_version: m.resource_version.take(),
        ..Default::default()
    };
}

async fn bind(
    State(w): State<Arc<Writer>>,
    body: Bytes,
) -> ([(&'static str, &'static str); 1], String) {
    let t = std::time::Instant::now();
    let mut uid = String::new();
    if let Ok(r) = serde_json::from_slice::<super::floor_app::Review<BindReq<'_>>>(&body) {
        uid = r.request.uid.to_string();
        if let Some(at) = r.request.placement() {
            w.bind(r.request.namespace, r.request.name, at.node, at.claim)
                .await;
            w.handler_ns.fetch_add(nanos(t), Ordering::Relaxed);
        }
    }
    (
        [("content-type", "application/json")],
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":{},"allowed":true}}}}"#,
            serde_json::Value::String(uid)
        ),
    )
}

fn nanos(since: std::time::Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

async fn stats(State(w): State<Arc<Writer>>) -> String {
    format!(
        "written {}\nskipped {}\nhandler_ns {}\nwrite_ns {}\n",
        w.written.load(Ordering::Relaxed),
        w.skipped.load(Ordering::Relaxed),
        w.handler_ns.load(Ordering::Relaxed),
        w.write_ns.load(Ordering::Relaxed)
    )
}

/// The floor's routes, with the bind webhook's replaced by the writing one, and `/stats`.
pub fn router(w: Arc<Writer>) -> Router {
    super::floor_app::router().merge(
        Router::new()
            .route("/validate/rwo-single-node", post(bind))
            .route("/stats", axum::routing::get(stats))
            .with_state(w),
    )
}
