//! Serving plumbing: TLS with hot reload, the admission router, admission metrics. Knows nothing
//! about storage beyond handing requests to `admission`; probes, shutdown and the cluster view
//! come from `runtime`.

pub mod admission_http;
pub mod args;
pub mod listener;
pub mod metrics;
pub mod tls;
mod trail;

use crate::admission::Admission;
use crate::runtime::{self, MetricsRegistry, probes, shutdown_signal};
use crate::server::args::ServeArgs;
use crate::state;
use anyhow::Context;
use metrics::Metrics;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::net::TcpListener;

/// Serve admission over TLS until a signal, then drain (not ready first, serving on meanwhile).
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let families = ServeMetrics::register();
    let registry = families.registry.clone();
    let metrics = families.admission.clone();
    let tls_config = serving_tls(&args, &metrics)?;
    let (cluster, admission, audit) = open_admission(&args, &families).await?;
    let app = admission_http::router(admission_http::AppState {
        admission,
        metrics: metrics.clone(),
        decide_timeout: args.decide_timeout(),
        placement_decide_timeout: args.placement_decide_timeout,
        body_timeout: args.read_timeout(),
        max_concurrent_requests: args.max_concurrent_requests,
        max_body_bytes_in_flight: args.max_body_bytes_in_flight,
        audit,
    });
    let listener = TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding the webhook listener {}", args.listen))?;
    let probe_listener = TcpListener::bind(&args.probe_listen)
        .await
        .with_context(|| format!("binding the probe listener {}", args.probe_listen))?;
    let readiness = Readiness::default();
    tracing::info!(
        webhook = %listener.local_addr()?, probes = %probe_listener.local_addr()?,
        "volguard serve listening (HTTPS admission: POST /mutate, /validate, /validate/<rule>; HTTP: /healthz /readyz /metrics)"
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let probes_task = spawn_probes(
        probe_listener,
        probes::router(registry.clone(), readiness.check(cluster)),
        stop_rx.clone(),
    );
    let limits = listener::Limits {
        max_connections: args.max_connections,
        max_connections_per_peer: args.max_connections_per_peer,
        handshake_timeout: args.read_timeout(),
        header_read_timeout: args.read_timeout(),
        first_request_timeout: args.read_timeout(),
        idle_timeout: args.idle_timeout,
        ..Default::default()
    };
    let closed = registry.add(
        "volguard_connections_closed",
        "HTTPS connections volguard closed or refused, by reason (limit, peer_limit, handshake_failed, \
         handshake_timeout, no_request, idle)",
        listener::ConnectionMetrics::default(),
    );
    let mut webhook_stop = stop_rx;
    let serve =
        listener::serve_tls_counted(listener, tls_config, app, limits, closed, async move {
            let _ = webhook_stop.changed().await;
        });
    tokio::spawn(drain_on_signal(
        readiness.draining.clone(),
        args.shutdown_drain,
        stop_tx.clone(),
    ));
    serve.await;
    readiness.tls_bound.store(false, Ordering::Release);
    let _ = stop_tx.send(true);
    let _ = probes_task.await;
    tracing::info!("volguard serve stopped");
    Ok(())
}

/// The serving certificate, reloaded in the background as it rotates.
fn serving_tls(args: &ServeArgs, metrics: &Arc<Metrics>) -> anyhow::Result<tls::TlsConfig> {
    let reloader = tls::CertReloader::new(
        args.tls_cert.clone(),
        args.tls_key.clone(),
        metrics.tls.clone(),
    )
    .context("loading the serving certificate")?;
    let tls_config = reloader
        .serving_config(args.client_ca.as_deref())
        .context("building the TLS configuration")?;
    if args.client_ca.is_none() {
        tracing::warn!(
            "no --client-ca: any TLS client may call the webhook; set it (the apiserver presents a client \
             certificate through its AdmissionConfiguration) or restrict callers with a NetworkPolicy"
        );
    }
    tokio::spawn(reloader.clone().run(args.tls_reload_interval()));
    Ok(tls_config)
}

/// Every family `volguard serve` exports but its connections', registered before anything
/// happens, whatever the source (`--state` or a cluster), each series an alert reads at 0: an
/// `increase()` alert then sees the first failure, not a series that appears already at 1.
pub struct ServeMetrics {
    pub registry: Arc<MetricsRegistry>,
    pub admission: Arc<Metrics>,
    pub audit: state::audit::AuditMetrics,
    pub locks: prometheus_client::metrics::family::Family<
        crate::admission::LockLabels,
        prometheus_client::metrics::counter::Counter,
    >,
    pub lock_writes: prometheus_client::metrics::histogram::Histogram,
}

impl ServeMetrics {
    pub fn register() -> Self {
        let registry = Arc::new(MetricsRegistry::default());
        runtime::build::register(&registry);
        runtime::process::register(&registry);
        let admission = Arc::new(Metrics::register(registry.clone()));
        let audit = state::audit::AuditMetrics::register(&registry);
        state::live_reads::register(&registry);
        let locks = registry.add(
            "volguard_rwo_locks",
            "ReadWriteOnce lock operations by result (taken, taken_over, conflict_retried, waited, refused, unconfirmed, write_failed)",
            prometheus_client::metrics::family::Family::default(),
        );
        for result in metrics::RWO_LOCK_RESULTS {
            let _ = locks.get_or_create(&crate::admission::LockLabels { result });
        }
        let lock_writes = registry.add(
            "volguard_rwo_lock_write_duration_seconds",
            "The RWO lock's compare-and-swap write, sent to answered (whatever the answer)",
            crate::admission::lock_write_histogram(),
        );
        ServeMetrics {
            registry,
            admission,
            audit,
            locks,
            lock_writes,
        }
    }
}

/// The view (a `--state` file, or the cluster with its audit trail) and the rules over it.
async fn open_admission(
    args: &ServeArgs,
    families: &ServeMetrics,
) -> anyhow::Result<(state::View, Arc<Admission>, Option<state::Writer>)> {
    let rwo_guard = args.rwo_guard == crate::server::args::RwoGuard::All;
    // The lock's grace in the log, beside the controller's: an operator compares the two.
    tracing::info!(
        rwo_guard,
        rwo_lock_grace_seconds =
            crate::rules::rwo_lock::lock_grace(args.apiserver_request_timeout).as_secs(),
        "ReadWriteOnce guard"
    );
    let source = match args.state.as_deref() {
        Some(path) => state::Source::File(path),
        None => state::Source::Live(runtime::kube::client(args.kubeconfig.as_deref()).await?),
    };
    let needs = state::Needs {
        consistent_lists: args.consistent_lists,
        ..state::Needs::admission(rwo_guard)
    };
    let cluster = state::open(source, needs)?;
    // The audit trail's writer (none for a `--state` file).
    let audit = (!cluster.is_file()).then(|| {
        cluster
            .writer(
                "volguard-webhook",
                crate::runtime::identity::process_identity(),
            )
            .with_audit(
                crate::runtime::identity::process_identity(),
                families.audit.clone(),
                state::audit::Reports {
                    retention: jiff::SignedDuration::try_from(args.audit_retention)
                        .unwrap_or(jiff::SignedDuration::MAX),
                    max: args.audit_report_entries,
                },
            )
    });
    let mut admission = Admission::new(
        cluster.clone(),
        args.force_delete_policy(),
        crate::runtime::identity::controller_users(&args.controller_users),
    )
    .with_enforcement(args.enforcement)
    .with_exemptions(crate::rules::exemptions::Exemptions(args.exempt.clone()))
    .with_rwo_guard(rwo_guard)
    .with_break_glass(args.break_glass)
    .with_break_glass_expiry(args.break_glass_expiry)
    .with_partition_after(args.partition_after)
    .with_apiserver_request_timeout(args.apiserver_request_timeout);
    // The registered families (already at 0), not the ones the rules were built with.
    admission.locks.results = families.locks.clone();
    admission.locks.writes = families.lock_writes.clone();
    Ok((cluster, Arc::new(admission), audit))
}

/// What `/readyz` reads: ready while the listener serves, the caches are synced and no drain
/// has begun.
struct Readiness {
    tls_bound: Arc<AtomicBool>,
    draining: Arc<AtomicBool>,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness {
            tls_bound: Arc::new(AtomicBool::new(true)),
            draining: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl Readiness {
    fn check(&self, cluster: state::View) -> probes::ReadyCheck {
        let (tls, draining) = (self.tls_bound.clone(), self.draining.clone());
        Arc::new(move || {
            if draining.load(Ordering::Acquire) {
                Some("shutting down (draining)".into())
            } else if !tls.load(Ordering::Acquire) {
                Some("webhook listener not serving".into())
            } else if !cluster.synced() {
                Some("caches not synced".into())
            } else {
                None
            }
        })
    }
}

fn spawn_probes(
    listener: TcpListener,
    app: axum::Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let r = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.changed().await;
            })
            .await;
        if let Err(e) = r {
            tracing::error!(error = %e, "probe server failed");
        }
    })
}

/// On the first signal: not ready, then keep serving while the endpoints drop this replica (the
/// apiserver's calls in between still find a listener: a refused connection would deny every
/// Fail rule's request and skip every Ignore rule's); stop after `drain` or a second signal.
async fn drain_on_signal(
    draining: Arc<AtomicBool>,
    drain: std::time::Duration,
    stop: tokio::sync::watch::Sender<bool>,
) {
    shutdown_signal().await;
    draining.store(true, Ordering::Release);
    tracing::info!(drain = ?drain, "not ready; serving on until the drain period ends");
    tokio::select! {
        _ = tokio::time::sleep(drain) => {}
        _ = shutdown_signal() => tracing::info!("second signal: stopping now"),
    }
    let _ = stop.send(true);
}
