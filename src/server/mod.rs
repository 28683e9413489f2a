//! Serving plumbing: TLS with hot reload, the admission router, probes, metrics, shutdown.
//! Knows nothing about storage beyond handing requests to `admission`.

pub mod admission_http;
pub mod listener;
pub mod metrics;
pub mod probes;
pub mod tls;

use crate::admission::Admission;
use crate::cli::ServeArgs;
use crate::state::{Cluster, Store, live::LiveCluster, loader};
use anyhow::Context;
use metrics::Metrics;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await
            }
        }
    };
    tokio::select! {
        _ = term => tracing::info!("SIGTERM received"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
    }
}

/// Build the cluster view for `--state` or a live cluster.
pub async fn cluster_from(
    state: Option<&std::path::Path>,
    kubeconfig: Option<&std::path::Path>,
) -> anyhow::Result<Cluster> {
    match state {
        Some(path) => {
            let store = Store::default();
            let started = std::time::Instant::now();
            let summary = loader::load_file(path, &store)?;
            crate::alloc::release_free_memory();
            tracing::info!(
                file = %path.display(), pvcs = summary.pvcs, pvs = summary.pvs, nodes = summary.nodes,
                pods = summary.pods, skipped = ?summary.skipped, seconds = started.elapsed().as_secs_f64(),
                "state loaded"
            );
            Ok(Cluster::Offline(Arc::new(store)))
        }
        None => {
            let client = crate::kubeclient::client(kubeconfig).await?;
            Ok(Cluster::Live(LiveCluster::start(client)))
        }
    }
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let metrics = Arc::new(Metrics::new());
    let reloader =
        tls::CertReloader::new(args.tls_cert.clone(), args.tls_key.clone(), metrics.clone())
            .context("loading the serving certificate")?;
    let tls_config = reloader.server_config()?;
    tokio::spawn(
        reloader
            .clone()
            .run(Duration::from_millis(args.tls_reload_interval_ms)),
    );

    let cluster = cluster_from(args.state.as_deref(), args.kubeconfig.as_deref()).await?;
    let admission = Arc::new(Admission::new(
        cluster.clone(),
        args.force_delete_policy(),
        args.controller_users.clone(),
    ));
    let app = admission_http::router(admission_http::AppState {
        admission,
        metrics: metrics.clone(),
        decide_timeout: Duration::from_millis(2500),
        body_timeout: Duration::from_millis(args.read_timeout_ms),
        max_concurrent_requests: args.max_concurrent_requests,
    });

    let listener = TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding the webhook listener {}", args.listen))?;
    let probe_listener = TcpListener::bind(&args.probe_listen)
        .await
        .with_context(|| format!("binding the probe listener {}", args.probe_listen))?;
    let tls_bound = Arc::new(AtomicBool::new(true));
    let ready_cluster = cluster.clone();
    let ready_tls = tls_bound.clone();
    let ready: probes::ReadyCheck = Arc::new(move || {
        if !ready_tls.load(Ordering::Acquire) {
            Some("webhook listener not serving".into())
        } else if !ready_cluster.synced() {
            Some("caches not synced".into())
        } else {
            None
        }
    });
    tracing::info!(
        webhook = %listener.local_addr()?, probes = %probe_listener.local_addr()?,
        "volguard serve listening (HTTPS admission: POST /mutate, /validate; HTTP: /healthz /readyz /metrics)"
    );

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let probe_app = probes::router(metrics.clone(), ready);
    let mut probe_stop = stop_rx.clone();
    let probes_task = tokio::spawn(async move {
        let r = axum::serve(probe_listener, probe_app)
            .with_graceful_shutdown(async move {
                let _ = probe_stop.changed().await;
            })
            .await;
        if let Err(e) = r {
            tracing::error!(error = %e, "probe server failed");
        }
    });

    let limits = listener::Limits {
        max_connections: args.max_connections,
        handshake_timeout: Duration::from_millis(args.read_timeout_ms),
        header_read_timeout: Duration::from_millis(args.read_timeout_ms),
        ..Default::default()
    };
    let mut webhook_stop = stop_rx.clone();
    let serve = listener::serve_tls(listener, tls_config, app, limits, async move {
        let _ = webhook_stop.changed().await;
    });
    let signal_tx = stop_tx.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = signal_tx.send(true);
    });
    serve.await;
    tls_bound.store(false, Ordering::Release);
    let _ = stop_tx.send(true);
    let _ = probes_task.await;
    tracing::info!("volguard serve stopped");
    Ok(())
}
