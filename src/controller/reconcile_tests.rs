//! Unit tests of `src/controller/reconcile.rs`.

use super::*;
use crate::state::Store;

fn config() -> ReconcilerConfig {
    ReconcilerConfig {
        list_batch: 50,
        unused_grace: std::time::Duration::from_secs(120),
        qps: 100.0,
        burst: 100,
        apiserver_request_timeout: rwo_lock::DEFAULT_GRACE,
    }
}

fn pvc(ns: &str, name: &str, terminating: bool) -> Pvc {
    let mut p = crate::model::testing::pvc(ns, name);
    p.metadata.set_finalizers(&[PVC_FINALIZER]);
    if terminating {
        p.metadata.deleted_at("2026-11-21T00:00:00Z");
    }
    p
}

/// A real client whose every request fails the way an unreachable apiserver's does (the
/// connection is closed unanswered; no fake server answers anything), and what it sent: each
/// request line, followed by its body when it had one, so a test can assert what the reconciler
/// tried to write.
fn failing_client() -> (kube::Client, Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            // The head, then as much body as it announces (hyper may write them apart).
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            let complete = |got: &[u8]| {
                let text = String::from_utf8_lossy(got);
                let Some((head, body)) = text.split_once("\r\n\r\n") else {
                    return false;
                };
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                body.len() >= length
            };
            while !complete(&got) {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let text = String::from_utf8_lossy(&got);
            let line = text.lines().next().unwrap_or("").to_string();
            // The body follows the head; a test looks into it for what a write carried.
            let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
            log.lock().expect("log").push(if body.is_empty() {
                line
            } else {
                format!("{line} {body}")
            });
        }
    });
    let cfg = kube::Config::new(format!("http://{addr}").parse().expect("uri"));
    (kube::Client::try_from(cfg).expect("client"), seen)
}

#[tokio::test]
async fn list_failure_retries_that_pvc_and_goes_on_with_the_next() {
    let store = Arc::new(Store::default());
    store.pvcs.apply(pvc("ns1", "gone-soon", true));
    store.pvcs.apply(pvc("ns2", "live", false));
    let Harness {
        r,
        queue,
        metrics: m,
        requests,
    } = harness(store.clone());
    let r = Arc::new(r);
    let failing = Key::pvc("ns1", "gone-soon");
    let next = Key::pvc("ns2", "live");
    queue.add(failing.clone());
    queue.add(next.clone());
    let worker = tokio::spawn(r.clone().work());
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while queue.failures(&failing) == 0
        || !m
            .render()
            .contains(r#"volguard_controller_reconciles_total{result="success"} 1"#)
    {
        assert!(tokio::time::Instant::now() < deadline, "{}", m.render());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        queue.failures(&failing),
        1,
        "the PVC whose LIST failed is retried with backoff"
    );
    assert_eq!(
        queue.failures(&next),
        0,
        "the next PVC was processed normally"
    );
    assert!(
        m.render()
            .contains("volguard_controller_consistent_lists_total 1")
    );
    // Nothing was released on a guess: the one request was the LIST, no PATCH followed it.
    let sent = requests.lock().expect("requests").clone();
    assert!(
        sent.iter()
            .any(|l| l.starts_with("GET /api/v1/namespaces/ns1/pods")),
        "{sent:?}"
    );
    assert!(
        !sent.iter().any(|l| l.starts_with("PATCH")),
        "a finalizer patch was sent after a failed LIST: {sent:?}"
    );
    queue.shut_down();
    let _ = worker.await;
}

#[tokio::test(start_paused = true)]
async fn rate_limiter_bursts_then_paces() {
    let l = RateLimiter::new(10.0, 5);
    let start = tokio::time::Instant::now();
    for _ in 0..5 {
        l.acquire().await;
    }
    assert!(
        start.elapsed() < std::time::Duration::from_millis(1),
        "burst is free"
    );
    for _ in 0..10 {
        l.acquire().await;
    }
    let e = start.elapsed().as_secs_f64();
    assert!(
        (0.9..1.2).contains(&e),
        "10 more at 10 qps take ~1s, took {e}"
    );
}

#[test]
fn classify_not_found_is_done_others_retry() {
    let status = |code: u16| -> kube::Error {
        kube::Error::Api(Box::new(
            serde_json::from_value(serde_json::json!({"status": "Failure", "message": "m", "reason": "r", "code": code}))
                .expect("status"),
        ))
    };
    let nf = status(404);
    assert_eq!(classify(Err(nf)), Err(Outcome::Done));
    for code in [409, 422] {
        assert!(matches!(
            classify(Err(status(code))),
            Err(Outcome::Retry(Retry::Changed(_)))
        ));
    }
    assert!(matches!(
        classify(Err(status(500))),
        Err(Outcome::Retry(Retry::Api(_)))
    ));
}

/// A reconciler over `store` whose every API call fails, its queue and metrics, and the request
/// lines it sent.
pub(crate) struct Harness {
    pub(crate) r: Reconciler,
    pub(crate) queue: Arc<Queue<Key>>,
    metrics: crate::runtime::MetricsRegistry,
    requests: Arc<std::sync::Mutex<Vec<String>>>,
}

pub(crate) fn harness(store: Arc<Store>) -> Harness {
    harness_with(store, config())
}

fn harness_with(store: Arc<Store>, config: ReconcilerConfig) -> Harness {
    let queue = Queue::new(super::super::queue::Backoff {
        base: std::time::Duration::from_secs(60),
        max: std::time::Duration::from_secs(60),
    });
    let metrics = crate::runtime::MetricsRegistry::default();
    let cm = Arc::new(ControllerMetrics::register(&metrics));
    let (client, requests) = failing_client();
    let view =
        crate::state::View::from_store(client, store, crate::state::Needs::controller(false));
    Harness {
        r: Reconciler::new(
            view.clone(),
            view.writer("volguard-controller", "test".into()),
            queue.clone(),
            cm,
            config,
        ),
        queue,
        metrics,
        requests,
    }
}

fn lock_reconciler(store: Arc<Store>) -> (Reconciler, Arc<std::sync::Mutex<Vec<String>>>) {
    let h = harness(store);
    (h.r, h.requests)
}

/// A claim carrying a lock just written for `pod-0` on `node`, with nobody using it yet.
fn freshly_locked(node: &str) -> Pvc {
    let pod = crate::model::testing::pod("ns1", "pod-0").with_uid("u-0");
    let lock = RwoLock::new(&pod, node, rwo_lock::Via::Bind, jiff::Timestamp::now());
    let mut pvc = crate::model::testing::pvc("ns1", "data-0");
    pvc.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(RWO_LOCK, &lock.encode());
    pvc
}

/// A fresh lock whose pod is not bound yet, on a node the cache shows in service: nothing the
/// controller could read live would clear it, so it reads nothing (those reads raced the bind
/// that wrote the lock) and looks again when the grace ends.
#[tokio::test]
async fn a_fresh_lock_on_a_node_in_service_is_left_without_a_live_read() {
    let store = Arc::new(Store::default());
    store.nodes.apply(crate::model::testing::node("node-a"));
    let (r, requests) = lock_reconciler(store);
    let outcome = r
        .execute(r.clear_stale_lock(&freshly_locked("node-a")).await)
        .await;
    assert!(
        matches!(outcome, Outcome::RequeueAfter(d) if d > rwo_lock::DEFAULT_GRACE && d <= rwo_lock::BIND_LOCK_TIDY + Duration::from_secs(1)),
        "a bind's lock is looked at again when its tidy time ends: {outcome:?}"
    );
    let sent = requests.lock().expect("requests").clone();
    assert!(sent.is_empty(), "live reads for a fresh lock: {sent:?}");
}

/// A node the cache no longer shows may be gone with a record of proof: that is read live.
#[tokio::test]
async fn a_lock_on_a_node_missing_from_the_cache_is_read_live() {
    let (r, requests) = lock_reconciler(Arc::new(Store::default()));
    let outcome = r
        .execute(r.clear_stale_lock(&freshly_locked("node-gone")).await)
        .await;
    assert!(
        matches!(outcome, Outcome::Retry(_)),
        "the failed read retries"
    );
    let sent = requests.lock().expect("requests").clone();
    assert!(
        sent.iter()
            .any(|l| l.starts_with("GET /api/v1/nodes/node-gone")),
        "{sent:?}"
    );
}

/// A lock looked at again later does not hold up the claim's unused clock, and the unused-since
/// mark carries the claim's uid (a claim made again under this name is refused, not marked).
#[tokio::test]
async fn a_young_lock_leaves_the_unused_clock_running_and_the_mark_names_its_claim() {
    let store = Arc::new(Store::default());
    store.nodes.apply(crate::model::testing::node("node-a"));
    let mut pvc = freshly_locked("node-a");
    pvc.metadata.uid = "claim-uid-1".into();
    pvc.status.phase = Some("Bound".into());
    let Harness { r, requests, .. } = harness_with(
        store,
        ReconcilerConfig {
            unused_grace: std::time::Duration::ZERO,
            ..config()
        },
    );
    let outcome = r
        .execute(r.reconcile_pvc(&pvc, PvcPlan::Keep, &[]).await)
        .await;
    assert!(
        matches!(outcome, Outcome::Retry(_)),
        "the mark's write was tried (and failed here): {outcome:?}"
    );
    let sent = requests.lock().expect("requests").clone();
    let marks: Vec<&String> = sent
        .iter()
        .filter(|l| l.starts_with("PATCH /api/v1/namespaces/ns1/persistentvolumeclaims/data-0"))
        .collect();
    assert_eq!(marks.len(), 1, "{sent:?}");
    assert!(
        marks[0].contains(UNUSED_SINCE) && marks[0].contains("\"uid\":\"claim-uid-1\""),
        "{marks:?}"
    );
}
