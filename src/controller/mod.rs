//! `volguard controller`: keeps protection finalizers on live volumes, removes them only when a
//! consistent read proves the volume unused, explains postponed deletions, and keeps
//! `volguard.io/unused-since` (rules.md §4). Decisions come from `rules::release` and `rules::in_use`.

pub mod args;
pub mod follow;
pub mod leader;
pub mod metrics;
pub mod queue;
pub mod reconcile;
pub mod registration;

use crate::controller::args::ControllerArgs;
use crate::runtime::{MetricsRegistry, probes, shutdown_signal};
use crate::state::{self, Needs};
use follow::Leads;
use queue::{Backoff, Queue};
use reconcile::{Reconciler, ReconcilerConfig};
use std::sync::Arc;
use std::time::Duration;

/// The controller's registry as it starts, each known series at 0 (the fencing families join it
/// with `--fencing`, the registration watch's on leadership).
pub fn registry() -> (Arc<MetricsRegistry>, Arc<metrics::ControllerMetrics>) {
    let metrics = Arc::new(MetricsRegistry::default());
    crate::runtime::build::register(&metrics);
    crate::runtime::process::register(&metrics);
    crate::state::live_reads::register(&metrics);
    let cmetrics = Arc::new(metrics::ControllerMetrics::register(&metrics));
    (metrics, cmetrics)
}

/// Run the controller: warm caches in every replica, act only as the leader (rules.md §4, §7, §9).
pub async fn run(args: ControllerArgs) -> anyhow::Result<()> {
    let (metrics, cmetrics) = registry();
    // Followers keep warm caches too, so a takeover starts from synced state.
    let view = state::open(
        state::Source::Live(crate::runtime::kube::client(args.kubeconfig.as_deref()).await?),
        Needs {
            consistent_lists: args.consistent_lists,
            ..Needs::controller(args.fencing.enabled)
        },
    )?;
    // Each writer its own (its own Events' series), as each job wrote before.
    let writer = |field_manager: &str| view.writer(field_manager, args.identity());
    let reconciler = reconciler(&args, writer("volguard-controller"), &view, &cmetrics);
    let queue = reconciler.queue.clone();
    let leads = Leads::default();
    tokio::spawn(follow::follow(
        view.subscribe(),
        reconciler.clone(),
        leads.clone(),
    ));
    let registration_status = registration::Status::default();
    serve_probes(&args, &metrics, &view, registration_status.clone()).await?;
    // Parsed before leadership: a bad fencing flag fails at start, not at takeover.
    let fencer = fencer(
        &args,
        writer(crate::fencing::incident::FIELD_MANAGER),
        &metrics,
        &view,
    )?;
    let elector = elector(&args, &view, writer("volguard-controller"))?;
    let registration_writer = writer("volguard-controller");

    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    if let Some(e) = &elector {
        tokio::select! {
            _ = e.acquire() => {}
            _ = &mut shutdown => return Ok(()),
        }
    }
    cmetrics.leader.set(1);
    // The leader keeps renewing from here on, while its caches sync too: a slow sync must not
    // let the lease lapse while this replica still believes it leads.
    let lost = async {
        match &elector {
            Some(e) => e.hold().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(lost);
    // Wait for synced caches before acting on them.
    while !view.synced() {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = &mut lost => {
                cmetrics.leader.set(0);
                return Err(anyhow::anyhow!("leadership lost while caches synced; exiting so a fresh replica can take over"));
            }
            _ = &mut shutdown => {
                if let Some(e) = &elector {
                    e.release().await;
                }
                return Ok(());
            }
        }
    }
    // Everything once: what this replica let pass as a follower, or saw before it subscribed.
    leads.lead(&reconciler);
    let lead = Leading::start(
        &args,
        registration_writer,
        &metrics,
        &cmetrics,
        &reconciler,
        fencer,
        registration_status,
    );
    let result = tokio::select! {
        _ = &mut shutdown => Ok(()),
        _ = &mut lost => Err(anyhow::anyhow!("leadership lost; exiting so a fresh replica can take over")),
    };
    queue.shut_down();
    cmetrics.leader.set(0);
    lead.stop(result.is_err()).await;
    if let Some(e) = &elector
        && result.is_ok()
    {
        e.release().await;
    }
    result
}

fn reconciler(
    args: &ControllerArgs,
    writer: state::Writer,
    view: &state::View,
    cmetrics: &Arc<metrics::ControllerMetrics>,
) -> Arc<Reconciler> {
    let queue = Queue::new(Backoff {
        base: args.backoff_base(),
        max: args.backoff_max(),
    });
    Arc::new(Reconciler::new(
        view.clone(),
        writer,
        queue,
        cmetrics.clone(),
        ReconcilerConfig {
            list_batch: args.list_batch,
            unused_grace: args.unused_grace,
            qps: args.qps,
            burst: args.burst,
            apiserver_request_timeout: args.apiserver_request_timeout,
        },
    ))
}

/// `/healthz`, `/readyz` (ready once the caches synced) and `/metrics`, in every replica.
async fn serve_probes(
    args: &ControllerArgs,
    metrics: &Arc<MetricsRegistry>,
    view: &state::View,
    registration_status: registration::Status,
) -> anyhow::Result<()> {
    let ready_view = view.clone();
    let ready: probes::ReadyCheck = Arc::new(move || {
        if ready_view.synced() {
            None
        } else {
            Some("caches not synced".into())
        }
    });
    let probe_listener = tokio::net::TcpListener::bind(&args.probe_listen).await?;
    // The lock's grace in the log, beside the webhook's: an operator compares the two.
    tracing::info!(probes = %probe_listener.local_addr()?,
        rwo_lock_grace_seconds = crate::rules::rwo_lock::lock_grace(args.apiserver_request_timeout).as_secs(),
        "volguard controller starting");
    let probe_app = probes::router_with_detail(
        metrics.clone(),
        ready,
        Some(Arc::new(move || registration_status.get())),
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(probe_listener, probe_app).await {
            tracing::error!(error = %e, "probe server failed");
        }
    });
    Ok(())
}

fn fencer(
    args: &ControllerArgs,
    writer: state::Writer,
    metrics: &MetricsRegistry,
    view: &state::View,
) -> anyhow::Result<Option<Arc<crate::fencing::Fencer>>> {
    if !args.fencing.enabled {
        return Ok(None);
    }
    let cfg = crate::fencing::FencingConfig::from_args(&args.fencing)?;
    let fm = Arc::new(crate::fencing::metrics::FencingMetrics::register(metrics));
    Ok(Some(crate::fencing::Fencer::new(
        view.clone(),
        writer,
        cfg,
        fm,
    )))
}

fn elector(
    args: &ControllerArgs,
    view: &state::View,
    writer: state::Writer,
) -> anyhow::Result<Option<leader::Elector>> {
    if !args.leader_elect {
        return Ok(None);
    }
    let lease = leader::LeaseConfig {
        name: args.lease_name.clone(),
        namespace: args
            .lease_namespace
            .clone()
            .unwrap_or_else(crate::runtime::identity::install_namespace),
        identity: args.identity(),
        duration: args.lease_duration(),
        retry: args.lease_renew(),
        renew_deadline: args.lease_renew_deadline(),
    };
    lease.validate().map_err(anyhow::Error::msg)?;
    Ok(Some(leader::Elector::new(view.clone(), writer, lease)))
}

/// What only the leader runs: the workers, the unused-storage gauges, partition healing
/// (rules.md §7) and the registration watch (rules.md §9).
struct Leading {
    workers: Vec<tokio::task::JoinHandle<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    fencer: Option<Arc<crate::fencing::Fencer>>,
}

impl Leading {
    fn start(
        args: &ControllerArgs,
        writer: state::Writer,
        metrics: &MetricsRegistry,
        cmetrics: &Arc<metrics::ControllerMetrics>,
        reconciler: &Arc<Reconciler>,
        fencer: Option<Arc<crate::fencing::Fencer>>,
        registration_status: registration::Status,
    ) -> Leading {
        let mut tasks = vec![
            spawn_unused_gauges(
                reconciler.view.clone(),
                cmetrics.clone(),
                metrics,
                args.per_pvc_unused_metrics,
            ),
            spawn_lift_overrides(
                reconciler.clone(),
                args.break_glass,
                Some(args.break_glass_expiry).filter(|_| args.lift_expired_overrides),
            ),
        ];
        let workers = (0..args.workers.max(1))
            .map(|_| {
                let r = reconciler.clone();
                tokio::spawn(async move { r.work().await })
            })
            .collect();
        if let Some(f) = &fencer {
            tasks.push(tokio::spawn(f.clone().run()));
        }
        // One Event per drift of the registration.
        let watch = Arc::new(registration::Watch::new(
            reconciler.view.clone(),
            writer,
            &args.registration,
            metrics,
            registration_status,
        ));
        tasks.push(tokio::spawn(watch.run()));
        Leading {
            workers,
            tasks,
            fencer,
        }
    }

    async fn stop(self, lost_leadership: bool) {
        for t in self.tasks {
            t.abort();
        }
        if let Some(f) = &self.fencer {
            // Incidents stay recorded; the next leader resumes them.
            f.stop();
        }
        for w in self.workers {
            if lost_leadership {
                // Leadership is gone: stop now, before a follower may act (every write carries a
                // `test` or a resourceVersion, so a patch cut off mid-flight is harmless).
                w.abort();
            }
            // On shutdown workers finish their current item (a patch in flight) before stopping.
            let _ = tokio::time::timeout(Duration::from_secs(10), w).await;
        }
    }
}

/// rules.md §8: a person's expired overrides on claims and volumes, lifted every `LIFT_EVERY`
/// (with no expiry, or `--lift-expired-overrides=false`, the task ends at once).
fn spawn_lift_overrides(
    reconciler: Arc<Reconciler>,
    mode: crate::rules::proof::BreakGlass,
    expiry: Option<Duration>,
) -> tokio::task::JoinHandle<()> {
    let after = expiry
        .and_then(|e| jiff::SignedDuration::try_from(e).ok())
        .filter(|d| !d.is_zero());
    tokio::spawn(async move {
        // Overrides that never expire are never lifted: nothing to look at.
        let Some(after) = after else {
            return;
        };
        let refused = reconcile::overrides::Refused::default();
        let mut tick = tokio::time::interval(reconcile::overrides::LIFT_EVERY);
        loop {
            tick.tick().await;
            let reader = crate::rules::proof::Reader {
                mode,
                expiry: Some(crate::rules::proof::Expiry {
                    after,
                    now: jiff::Timestamp::now(),
                }),
            };
            reconciler.lift_overrides(reader, &refused).await;
        }
    })
}

/// Unused-storage gauges, from the leader's caches every 30 s.
fn spawn_unused_gauges(
    view: state::View,
    cm: Arc<metrics::ControllerMetrics>,
    metrics: &MetricsRegistry,
    per_pvc: bool,
) -> tokio::task::JoinHandle<()> {
    if per_pvc {
        cm.register_per_pvc(metrics);
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        loop {
            tick.tick().await;
            let report = crate::report::build(
                &view.sweep::<crate::model::Pvc>(None),
                &view.sweep::<crate::model::Pv>(None),
                &view.sweep::<crate::model::Pod>(None),
                &crate::report::Filter::default(),
                jiff::Timestamp::now(),
            );
            cm.set_unused(&report, per_pvc);
        }
    })
}
