//! The PVC finalizer webhook written the way kube-rs's admission example writes one: axum's `Json`
//! extractor into kube-core's `AdmissionReview<DynamicObject>`, `AdmissionResponse::from(&req)`,
//! a json-patch, `into_review()` serialized back. It runs on the floor's TLS and HTTP stack, so
//! volguard/this ratios compare the handlers alone. `make bench` runs it beside volguard.
//!
//! Usage: kube_rs --listen 127.0.0.1:0 --tls-cert CERT --tls-key KEY (prints `listening ADDR`).

use axum::routing::post;
use axum::{Json, Router};
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use std::sync::Arc;
use volguard::server::{listener, tls::CertReloader};

/// The same allocator as `volguard` and the floor.
#[global_allocator]
static ALLOC: volguard::alloc::Allocator = volguard::alloc::Allocator;

const FINALIZER: &str = "kubernetes.io/pvc-protection";

async fn mutate(
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let req: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(e) => return Json(AdmissionResponse::invalid(e.to_string()).into_review()),
    };
    let res = AdmissionResponse::from(&req);
    let Some(obj) = req
        .object
        .as_ref()
        .filter(|_| req.kind.kind == "PersistentVolumeClaim")
    else {
        return Json(res.into_review());
    };
    let op = match &obj.metadata.finalizers {
        Some(f) if f.iter().any(|f| f == FINALIZER) => return Json(res.into_review()),
        Some(_) => AddOperation {
            path: PointerBuf::from_tokens(["metadata", "finalizers", "-"]),
            value: FINALIZER.into(),
        },
        None => AddOperation {
            path: PointerBuf::from_tokens(["metadata", "finalizers"]),
            value: serde_json::json!([FINALIZER]),
        },
    };
    let res = match res.clone().with_patch(Patch(vec![PatchOperation::Add(op)])) {
        Ok(r) => r,
        Err(e) => res.deny(e.to_string()),
    };
    Json(res.into_review())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("missing {name}"))
    };
    let reloader = CertReloader::new(
        arg("--tls-cert")?.into(),
        arg("--tls-key")?.into(),
        Arc::new(volguard::server::tls::TlsMetrics::default()),
    )?;
    let tls = reloader.server_config()?;
    let l = tokio::net::TcpListener::bind(arg("--listen")?).await?;
    println!("listening {}", l.local_addr()?);
    let app = Router::new()
        .route("/mutate", post(mutate))
        .route("/mutate/{rule}", post(mutate));
    listener::serve_tls(l, tls, app, listener::Limits::default(), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(())
}
