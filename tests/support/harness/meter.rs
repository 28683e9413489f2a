//! What the apiserver sends one client, counted on the wire: a TCP relay in front of the
//! apiserver for that client alone (`ControlPlane::meter`), its kubeconfigs pointed at it. The
//! apiserver's own response-size metrics carry no client label, so a client's bytes read from them
//! are a difference between windows with and without it, which the rest of the cluster's traffic
//! (kwok's heartbeats, the churn's own writes) swamps: at 5,000 nodes it came out negative. The
//! relay passes TLS through untouched (the apiserver's certificate names 127.0.0.1), so the count
//! is every response, LIST page and watch event with its TLS and HTTP framing, as sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One client's relay: its URL and the bytes the apiserver sent through it so far.
#[derive(Clone)]
pub struct Meter {
    pub url: String,
    sent: Arc<AtomicU64>,
}

impl Meter {
    /// Bytes the apiserver sent the client, all connections together, since the relay started.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// A relay to `apiserver` (`host:port`) on loopback, counting.
    pub fn start(apiserver: String) -> Meter {
        let sent = Arc::new(AtomicU64::new(0));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let port = listener.local_addr().expect("relay address").port();
        serve(listener, apiserver, sent.clone());
        Meter {
            url: format!("https://127.0.0.1:{port}"),
            sent,
        }
    }
}

/// Hand every connection `listener` accepts, with its peer, to `handle` on a task, on a thread
/// and runtime of its own: a test (or the bench) may block its own runtime, and a stalled relay
/// would stall the client behind it.
pub fn accept_apart<F, Fut>(listener: std::net::TcpListener, handle: F)
where
    F: Fn(TcpStream, std::net::SocketAddr) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("relay runtime");
        rt.block_on(async move {
            let listener = TcpListener::from_std(listener).expect("relay listener");
            while let Ok((inbound, peer)) = listener.accept().await {
                tokio::spawn(handle(inbound, peer));
            }
        });
    });
}

/// Relay every connection `listener` accepts to `target` (`host:port`), adding what `target`
/// sends to `sent`.
pub fn serve(listener: std::net::TcpListener, target: String, sent: Arc<AtomicU64>) {
    accept_apart(listener, move |inbound, _| {
        let (target, sent) = (target.clone(), sent.clone());
        async move {
            if let Ok(outbound) = TcpStream::connect(&target).await {
                relay(inbound, outbound, &sent).await;
            }
        }
    });
}

/// Both directions until either side closes; what comes from the apiserver is counted as it
/// passes (a watch stays open for minutes: counted at the end it would land in the wrong window).
async fn relay(mut client: TcpStream, mut apiserver: TcpStream, sent: &AtomicU64) {
    let _ = client.set_nodelay(true);
    let _ = apiserver.set_nodelay(true);
    let (mut from_client, mut to_client) = client.split();
    let (mut from_apiserver, mut to_apiserver) = apiserver.split();
    let up = async {
        let _ = tokio::io::copy(&mut from_client, &mut to_apiserver).await;
        let _ = to_apiserver.shutdown().await;
    };
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from_apiserver.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    sent.fetch_add(n as u64, Ordering::Relaxed);
                    if to_client.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to_client.shutdown().await;
    };
    tokio::join!(up, down);
}
