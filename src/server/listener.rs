//! The HTTPS accept loop: TLS handshake with a timeout, HTTP/1.1 or h2 per connection, bounded
//! connections (in all and per peer address), connections that carry no request closed, and
//! graceful shutdown that lets in-flight requests finish.
//!
//! Every connection slot is a caller locked out, so a connection must earn its slot: a TLS client
//! that sends no request within the first-request timeout, or an idle one (an HTTP/1.1 keep-alive,
//! an h2 connection that only answers PINGs) past the idle timeout, is closed gracefully (h2:
//! GOAWAY, so a request racing the close is retried by the client). "Activity" is a request, not a
//! byte: h2 PINGs do not keep a connection.

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use rustls::ServerConfig;
use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

#[derive(Debug, Clone)]
pub struct Limits {
    pub max_connections: usize,
    /// Connections from one peer address at once (one client must not take every slot).
    pub max_connections_per_peer: usize,
    pub handshake_timeout: Duration,
    /// Slow-header (slowloris) bound for HTTP/1.1.
    pub header_read_timeout: Duration,
    /// A connection that has sent no request this long after its handshake is closed.
    pub first_request_timeout: Duration,
    /// A connection with no request in flight for this long is closed (longer than Go's 90 s
    /// idle-connection timeout, so the apiserver normally closes first).
    pub idle_timeout: Duration,
    pub max_h2_streams: u32,
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_connections_per_peer: 128,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            first_request_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_h2_streams: 256,
            shutdown_grace: Duration::from_secs(25),
        }
    }
}

/// `volguard_connections_closed_total{reason}`: connections volguard closed or refused, by why.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct CloseLabels {
    pub reason: &'static str,
}

pub type ConnectionMetrics = Family<CloseLabels, Counter>;

fn closed(metrics: &ConnectionMetrics, reason: &'static str) {
    metrics.get_or_create(&CloseLabels { reason }).inc();
}

/// Connections per peer address; a slot is given back when its guard drops.
#[derive(Default)]
struct Peers(Mutex<HashMap<IpAddr, usize>>);

struct PeerSlot {
    peers: Arc<Peers>,
    ip: IpAddr,
}

impl Peers {
    fn take(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<PeerSlot> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(ip).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(PeerSlot {
            peers: self.clone(),
            ip,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut m = self.peers.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

/// Requests in flight on one connection and when the last one ended (ms since `start`).
struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    requests: AtomicU64,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Arc<Self> {
        Arc::new(Activity {
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Why to close this connection now, if it has earned no more time.
    fn expired(&self, limits: &Limits) -> Option<&'static str> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let quiet = Duration::from_millis(
            self.now_ms()
                .saturating_sub(self.last_ms.load(Ordering::Acquire)),
        );
        match self.requests.load(Ordering::Acquire) {
            0 if quiet >= limits.first_request_timeout => Some("no_request"),
            0 => None,
            _ if quiet >= limits.idle_timeout => Some("idle"),
            _ => None,
        }
    }
}

/// Counts a request in flight until dropped (the response sent, or the request abandoned).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.last_ms.store(self.0.now_ms(), Ordering::Release);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The router, counting this connection's requests.
#[derive(Clone)]
struct Tracked {
    app: Router,
    activity: Arc<Activity>,
}

impl tower::Service<axum::http::Request<hyper::body::Incoming>> for Tracked {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>,
    >;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: axum::http::Request<hyper::body::Incoming>) -> Self::Future {
        self.activity.in_flight.fetch_add(1, Ordering::AcqRel);
        self.activity.requests.fetch_add(1, Ordering::AcqRel);
        let guard = InFlight(self.activity.clone());
        let app = self.app.clone();
        Box::pin(async move {
            let _guard = guard;
            tower::ServiceExt::oneshot(app, req.map(axum::body::Body::new)).await
        })
    }
}

/// How often a connection checks whether it has earned more time.
const WATCH_EVERY: Duration = Duration::from_millis(500);
/// How long a connection told to close gracefully may take to finish.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Serve `app` over TLS on `listener` until `shutdown` resolves, then drain connections.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    serve_tls_counted(
        listener,
        Arc::new(arc_swap::ArcSwap::new(tls)),
        app,
        limits,
        ConnectionMetrics::default(),
        shutdown,
    )
    .await
}

/// `serve_tls`, counting the connections it closes in `metrics`; each handshake uses the
/// configuration `tls` holds when the connection is accepted (a reloaded client CA applies to new
/// connections, never to one already established).
pub async fn serve_tls_counted(
    listener: TcpListener,
    tls: super::tls::TlsConfig,
    app: Router,
    limits: Limits,
    metrics: ConnectionMetrics,
    shutdown: impl Future<Output = ()>,
) {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let peers = Arc::new(Peers::default());
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "connection limit reached; closing new connection");
            closed(&metrics, "limit");
            continue;
        };
        let Some(peer_slot) = peers.take(peer.ip(), limits.max_connections_per_peer) else {
            tracing::warn!(%peer, max = limits.max_connections_per_peer,
                "per-peer connection limit reached; closing new connection");
            closed(&metrics, "peer_limit");
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let conn = Connection {
            peer,
            acceptor: TlsAcceptor::from(tls.load_full()),
            app: app.clone(),
            limits: limits.clone(),
            metrics: metrics.clone(),
        };
        let stop = stop_rx.clone();
        tokio::spawn(async move {
            let _slots = (permit, peer_slot);
            conn.serve(tcp, stop).await;
        });
    }
    drop(listener);
    tracing::info!("stopped accepting; draining in-flight requests");
    let _ = stop_tx.send(true);
    // Every connection holds a slot until it is done: all slots back means all drained.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.shutdown_grace, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("shutdown grace period elapsed with connections still open");
    }
}

/// One accepted connection, served until it ends, carries no request for too long, or the
/// listener stops.
struct Connection {
    peer: std::net::SocketAddr,
    acceptor: TlsAcceptor,
    app: Router,
    limits: Limits,
    metrics: ConnectionMetrics,
}

impl Connection {
    async fn serve(self, tcp: tokio::net::TcpStream, mut stop: tokio::sync::watch::Receiver<bool>) {
        let Connection {
            peer,
            acceptor,
            app,
            limits,
            metrics,
        } = self;
        let tls = match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                closed(&metrics, "handshake_failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                closed(&metrics, "handshake_timeout");
                return;
            }
        };
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .keep_alive(true);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.max_h2_streams)
            .keep_alive_interval(Some(Duration::from_secs(30)));
        let activity = Activity::new();
        let svc = TowerToHyperService::new(Tracked {
            app,
            activity: activity.clone(),
        });
        let conn = builder.serve_connection(TokioIo::new(tls), svc);
        tokio::pin!(conn);
        let mut watch = tokio::time::interval(WATCH_EVERY);
        watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let why = loop {
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(%peer, error = %e, "connection ended with error");
                    }
                    return;
                }
                _ = stop.changed() => break None,
                _ = watch.tick() => if let Some(why) = activity.expired(&limits) {
                    break Some(why);
                },
            }
        };
        if let Some(why) = why {
            tracing::debug!(%peer, reason = why, "closing a connection that carries no request");
            closed(&metrics, why);
        }
        conn.as_mut().graceful_shutdown();
        let grace = match why {
            Some(_) => CLOSE_GRACE,
            None => limits.shutdown_grace,
        };
        match tokio::time::timeout(grace, conn).await {
            Ok(Err(e)) => tracing::debug!(%peer, error = %e, "connection ended with error"),
            Ok(Ok(())) => {}
            Err(_) => tracing::debug!(%peer, "connection did not close in time; dropped"),
        }
    }
}

#[cfg(test)]
#[path = "listener_tests.rs"]
mod tests;
