//! The floor for admission benchmarks: the same TLS and HTTP stack as `volguard serve` (rustls,
//! hyper-util auto h1/h2, axum, the same accept loop) answering every review "allowed" after
//! parsing only its uid. volguard/floor ratios isolate the cost of volguard's own work.
//!
//! Usage: floor --listen 127.0.0.1:0 --tls-cert CERT --tls-key KEY (prints `listening ADDR`).

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use serde::Deserialize;
use std::sync::Arc;
use volguard::server::{listener, metrics::Metrics, tls::CertReloader};

/// The same allocator as `volguard` (src/main.rs): the floor is the same stack.
#[global_allocator]
static ALLOC: volguard::alloc::Allocator = volguard::alloc::Allocator;

#[derive(Deserialize)]
struct Review<'a> {
    #[serde(borrow)]
    request: Req<'a>,
}

#[derive(Deserialize)]
struct Req<'a> {
    uid: &'a str,
}

async fn allow(body: Bytes) -> ([(&'static str, &'static str); 1], String) {
    let uid = serde_json::from_slice::<Review<'_>>(&body)
        .map(|r| r.request.uid.to_string())
        .unwrap_or_default();
    (
        [("content-type", "application/json")],
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":{},"allowed":true}}}}"#,
            serde_json::Value::String(uid)
        ),
    )
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
        Arc::new(Metrics::new()),
    )?;
    let tls = reloader.server_config()?;
    let l = tokio::net::TcpListener::bind(arg("--listen")?).await?;
    println!("listening {}", l.local_addr()?);
    let app = Router::new()
        .route("/mutate", post(allow))
        .route("/validate", post(allow));
    listener::serve_tls(l, tls, app, listener::Limits::default(), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(())
}
