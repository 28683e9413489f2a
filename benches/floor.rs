//! The floor for admission benchmarks: the same TLS and HTTP stack as `volguard serve` (rustls,
//! hyper-util auto h1/h2, axum, the same accept loop) answering every review "allowed" after
//! parsing only its uid. volguard/floor ratios isolate the cost of volguard's own work.
//!
//! With `--write-claims KUBECONFIG` it is the *writing* floor (`floor_writer.rs`): each bind also
//! writes one annotation onto the pod's claim with a resourceVersion precondition, the least an RWO
//! lock can cost.
//!
//! Usage: floor --listen 127.0.0.1:0 --tls-cert CERT --tls-key KEY [--write-claims KUBECONFIG]
//! (prints `listening ADDR`).

#[path = "floor_app.rs"]
mod floor_app;
#[path = "floor_writer.rs"]
mod floor_writer;
#[path = "reflect.rs"]
mod reflect;

use std::sync::Arc;
use volguard::server::{listener, tls::CertReloader};

/// The same allocator as `volguard` (src/main.rs): the floor is the same stack.
#[global_allocator]
static ALLOC: volguard::alloc::Allocator = volguard::alloc::Allocator;

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
    let app = match arg("--write-claims") {
        Ok(kubeconfig) => {
            let client =
                volguard::runtime::kube::client(Some(std::path::Path::new(&kubeconfig))).await?;
            floor_writer::router(floor_writer::Writer::start(client))
        }
        Err(_) => floor_app::router(),
    };
    listener::serve_tls(l, tls, app, listener::Limits::default(), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(())
}
