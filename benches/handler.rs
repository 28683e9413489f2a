//! In-process cost of one admission request, without sockets or TLS: volguard's router against
//! the floor's, on the benchmark's three reviews and a 100k-PVC state. Wall time is printed; for
//! numbers that do not move with machine noise, `make profile` runs this under callgrind and
//! reports instructions per request.
//!
//! Usage: handler [--only REVIEW] [--app volguard|floor|both] [--requests N] [--pvcs N]

#[path = "floor_app.rs"]
mod floor_app;
#[path = "synth.rs"]
mod synth;

use axum::Router;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;
use volguard::admission::Admission;
use volguard::server::admission_http::{self, AppState};

/// The same allocator as `volguard` (src/main.rs).
#[global_allocator]
static ALLOC: volguard::alloc::Allocator = volguard::alloc::Allocator;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

async fn drive(app: &Router, path: &str, body: &bytes::Bytes, n: usize) -> anyhow::Result<f64> {
    let started = Instant::now();
    for _ in 0..n {
        let req = http::Request::post(path)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.clone()))?;
        let resp = app.clone().oneshot(req).await?;
        anyhow::ensure!(resp.status() == 200, "status {}", resp.status());
        axum::body::to_bytes(resp.into_body(), usize::MAX).await?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64)
}

fn main() -> anyhow::Result<()> {
    let only = arg("--only");
    let which = arg("--app").unwrap_or_else(|| "both".into());
    let n: usize = arg("--requests").map_or(Ok(100_000), |v| v.parse())?;
    let pvcs: usize = arg("--pvcs").map_or(Ok(100_000), |v| v.parse())?;
    // Logging as `make bench` runs the server: refusals at info, the rest filtered out.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "warn,volguard::server=info",
        ))
        .with_writer(std::io::sink)
        .init();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let text = serde_json::to_string(&synth::state(pvcs, pvcs, 5_000))?;
        let store = volguard::state::Store::default();
        volguard::state::loader::load_str(&text, &store)?;
        drop(text);
        let cluster = volguard::state::Cluster::Offline(Arc::new(store));
        let volguard = admission_http::router(AppState {
            admission: Arc::new(Admission::new(cluster, Default::default(), vec![])),
            metrics: Arc::new(volguard::server::metrics::Metrics::new()),
            decide_timeout: Duration::from_millis(2500),
            body_timeout: Duration::from_secs(10),
            max_concurrent_requests: 512,
            max_body_bytes_in_flight: 64 << 20,
        });
        let floor = floor_app::router();
        println!("review                   bytes  volguard µs  floor µs");
        for (name, path, body) in synth::reviews() {
            if only.as_deref().is_some_and(|o| o != name) {
                continue;
            }
            let body = bytes::Bytes::from(body);
            let run = |app: &'static str| which == "both" || which == app;
            let v = if run("volguard") {
                drive(&volguard, path, &body, n).await?
            } else {
                f64::NAN
            };
            let f = if run("floor") {
                drive(&floor, path, &body, n).await?
            } else {
                f64::NAN
            };
            println!("{name:24} {:5}  {v:11.2}  {f:8.2}", body.len());
        }
        Ok(())
    })
}
