//! A small HTTPS load generator on hyper + tokio-rustls: closed loop over N keep-alive
//! connections (HTTP/1.1 or h2), and an open loop at a fixed rate whose latencies are measured
//! from the intended send time (no coordinated omission).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_rustls::TlsConnector;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    H1,
    H2,
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::H1 => "http1",
            Proto::H2 => "h2",
        }
    }
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

pub struct Target {
    pub addr: std::net::SocketAddr,
    pub ca_pem: String,
}

fn tls(ca_pem: &str, proto: Proto) -> TlsConnector {
    let alpn: &[u8] = match proto {
        Proto::H1 => b"http/1.1",
        Proto::H2 => b"h2",
    };
    super::tls_client::connector(ca_pem, alpn)
}

async fn connect(t: &Target, proto: Proto) -> Sender {
    let tcp = tokio::net::TcpStream::connect(t.addr)
        .await
        .expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    let stream = tls(&t.ca_pem, proto)
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("tls");
    let io = TokioIo::new(stream);
    match proto {
        Proto::H1 => {
            let (s, conn) = hyper::client::conn::http1::handshake(io).await.expect("h1");
            tokio::spawn(conn);
            Sender::H1(s)
        }
        Proto::H2 => {
            let (s, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .expect("h2");
            tokio::spawn(conn);
            Sender::H2(s)
        }
    }
}

async fn send(s: &mut Sender, path: &str, body: &Bytes) -> bool {
    let req = Request::post(path)
        .header("content-type", "application/json")
        .header("host", "localhost")
        .body(Full::new(body.clone()))
        .expect("request");
    let resp = match s {
        Sender::H1(s) => {
            if s.ready().await.is_err() {
                return false;
            }
            s.send_request(req).await
        }
        Sender::H2(s) => {
            if s.ready().await.is_err() {
                return false;
            }
            s.send_request(req).await
        }
    };
    match resp {
        Ok(r) => {
            let ok = r.status() == 200;
            r.into_body().collect().await.is_ok() && ok
        }
        Err(_) => false,
    }
}

pub struct Throughput {
    pub rps: f64,
    pub requests: u64,
}

/// Requests per second over `conns` connections for `dur`, each connection one request at a time.
pub async fn closed_loop(
    t: &Target,
    proto: Proto,
    conns: usize,
    path: &'static str,
    body: &[u8],
    dur: Duration,
) -> Throughput {
    let body = Bytes::copy_from_slice(body);
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mut senders = Vec::new();
    for _ in 0..conns {
        senders.push(connect(t, proto).await);
    }
    // Warm-up so both servers run hot before the clock starts.
    for s in senders.iter_mut() {
        send(s, path, &body).await;
    }
    let start = Instant::now();
    let deadline = start + dur;
    let mut tasks = Vec::new();
    for mut s in senders {
        let (body, done, errors) = (body.clone(), done.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                if send(&mut s, path, &body).await {
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let e = errors.load(Ordering::Relaxed);
    if e > 0 {
        eprintln!("warning: {e} failed requests");
    }
    let requests = done.load(Ordering::Relaxed);
    Throughput {
        rps: requests as f64 / start.elapsed().as_secs_f64(),
        requests,
    }
}

pub struct Latency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub sent: usize,
    /// How late the pacer itself handed requests out (p99): the load generator's own error.
    pub pacer_late_p99_ms: f64,
}

/// Latencies (ms from each request's due time) and the pacer's lateness, over one or more runs.
#[derive(Default)]
pub struct Samples {
    latency_ms: Vec<f64>,
    late_ms: Vec<f64>,
}

impl Samples {
    pub fn extend(&mut self, other: Samples) {
        self.latency_ms.extend(other.latency_ms);
        self.late_ms.extend(other.late_ms);
    }

    pub fn summary(mut self) -> Latency {
        let pct = |v: &mut Vec<f64>, p: f64| {
            v.sort_by(|a, b| a.total_cmp(b));
            v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
                .copied()
                .unwrap_or(f64::NAN)
        };
        Latency {
            p50_ms: pct(&mut self.latency_ms, 0.50),
            p99_ms: pct(&mut self.latency_ms, 0.99),
            p999_ms: pct(&mut self.latency_ms, 0.999),
            sent: self.latency_ms.len(),
            pacer_late_p99_ms: pct(&mut self.late_ms, 0.99),
        }
    }
}

/// Fixed-rate load: requests are due every 1/rate s; latency counts from the due time.
///
/// The pacer is an OS thread sleeping on the kernel's high-resolution timers: tokio's timer
/// wheel ticks in whole milliseconds, which at 2,000 req/s (one request every 0.5 ms) added up
/// to a millisecond of the generator's own lateness to every measured latency.
pub async fn open_loop(
    t: &Target,
    conns: usize,
    path: &'static str,
    body: &[u8],
    rate: f64,
    dur: Duration,
) -> Samples {
    let body = Bytes::copy_from_slice(body);
    let (tx, rx) = async_channel::unbounded::<Instant>();
    let mut workers = Vec::new();
    for _ in 0..conns {
        let mut s = connect(t, Proto::H1).await;
        send(&mut s, path, &body).await;
        let (rx, body) = (rx.clone(), body.clone());
        workers.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while let Ok(due) = rx.recv().await {
                send(&mut s, path, &body).await;
                lat.push(due.elapsed().as_secs_f64() * 1000.0);
            }
            lat
        }));
    }
    let total = (rate * dur.as_secs_f64()) as usize;
    let pacer = std::thread::spawn(move || {
        let start = Instant::now();
        let mut late = Vec::with_capacity(total);
        for i in 0..total {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            late.push(due.elapsed().as_secs_f64() * 1000.0);
            if tx.send_blocking(due).is_err() {
                break;
            }
        }
        late
    });
    let mut latency_ms = Vec::with_capacity(total);
    for w in workers {
        latency_ms.extend(w.await.unwrap_or_default());
    }
    let late_ms = tokio::task::spawn_blocking(move || pacer.join().unwrap_or_default())
        .await
        .unwrap_or_default();
    Samples {
        latency_ms,
        late_ms,
    }
}
