//! In-process cost of one admission request, without sockets or TLS: volguard's router against
//! the floor's, on the benchmark's three reviews and a 100k-PVC state. Wall time is printed; for
//! numbers that do not move with machine noise, `make profile` runs this under callgrind and
//! reports instructions per request.
//!
//! Usage: handler [--only REVIEW] [--app volguard|floor|writing-floor|both] [--requests N] [--pvcs N]
//!                [--evict-kib N]   (write N KiB between requests: each starts with cold caches)

#[path = "floor_app.rs"]
mod floor_app;
#[path = "floor_store_writer.rs"]
mod floor_store_writer;
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

/// Mean µs per request. With `evict` non-empty, the buffer is written through before each request
/// (outside the timed part), so the request starts with cold caches, as it does under load when
/// TLS, the kernel and the load generator share the cores between two requests.
async fn drive(
    app: &Router,
    path: &str,
    body: &bytes::Bytes,
    n: usize,
    evict: &mut [u8],
) -> anyhow::Result<f64> {
    let mut spent = Duration::ZERO;
    for i in 0..n {
        for b in evict.iter_mut().step_by(64) {
            *b = b.wrapping_add(i as u8);
        }
        std::hint::black_box(&evict);
        let started = Instant::now();
        let req = http::Request::post(path)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.clone()))?;
        let resp = app.clone().oneshot(req).await?;
        anyhow::ensure!(resp.status() == 200, "status {}", resp.status());
        axum::body::to_bytes(resp.into_body(), usize::MAX).await?;
        spent += started.elapsed();
    }
    Ok(spent.as_secs_f64() * 1e6 / n.max(1) as f64)
}

fn main() -> anyhow::Result<()> {
    let only = arg("--only");
    let which = arg("--app").unwrap_or_else(|| "both".into());
    let n: usize = arg("--requests").map_or(Ok(100_000), |v| v.parse())?;
    let pvcs: usize = arg("--pvcs").map_or(Ok(100_000), |v| v.parse())?;
    let mut evict = vec![0u8; arg("--evict-kib").map_or(Ok(0), |v| v.parse::<usize>())? << 10];
    // Logging as `make bench` runs the server (refusals at info, the rest filtered out), unless
    // RUST_LOG says otherwise: `make profile` turns refusal lines off, since how many fit in their
    // 50-a-second budget depends on how fast valgrind runs, not on the code.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,volguard::server=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
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
        let store = Arc::new(store);
        let writing_floor = floor_store_writer::router(store.clone());
        let cluster = volguard::state::View::file(store);
        let volguard = admission_http::router(AppState {
            audit: None,
            admission: Arc::new(Admission::new(cluster, Default::default(), vec![])),
            metrics: Arc::new(volguard::server::metrics::Metrics::new()),
            decide_timeout: Duration::from_millis(2500),
            placement_decide_timeout: Duration::from_millis(9500),
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
                drive(&volguard, path, &body, n, &mut evict).await?
            } else {
                f64::NAN
            };
            let f = if run("floor") {
                drive(&floor, path, &body, n, &mut evict).await?
            } else if which == "writing-floor" {
                drive(&writing_floor, path, &body, n, &mut evict).await?
            } else {
                f64::NAN
            };
            println!("{name:24} {:5}  {v:11.2}  {f:8.2}", body.len());
        }
        Ok(())
    })
}
