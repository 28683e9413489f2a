//! Unit tests of `src/state/view.rs`: what each freshness answers, from a file and from a live
//! view, and that a cache read never turns a kind the view does not hold into an absence.

use super::*;
use crate::model::testing;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A client whose every request is answered 500 at once, and how many requests it made.
fn counting_client() -> (kube::Client, Arc<AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            count.fetch_add(1, Ordering::SeqCst);
            let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let cfg = kube::Config::new(format!("http://{addr}").parse().expect("uri"));
    (kube::Client::try_from(cfg).expect("client"), seen)
}

fn store() -> Arc<Store> {
    let s = Store::default();
    s.pvcs.apply(testing::pvc("ns", "data"));
    s.nodes.apply(testing::node("n1"));
    let pod = testing::pod("ns", "p").on(Some("n1")).mounting("data");
    s.claims.add(&pod);
    s.pods.apply(pod);
    Arc::new(s)
}

const ALL: [Fresh; 4] = [Fresh::Cache, Fresh::CacheOrLive, Fresh::Live, Fresh::Whole];

#[tokio::test]
async fn a_file_answers_every_freshness_from_its_contents() {
    let view = View::file(store());
    for fresh in ALL {
        assert!(matches!(
            view.pvc("ns", "data", fresh).await,
            Fact::Found(_)
        ));
        assert!(matches!(
            view.pvc("ns", "other", fresh).await,
            Fact::Missing
        ));
        assert!(matches!(view.node("n1", fresh).await, Fact::Found(_)));
        assert!(matches!(view.pv("v", fresh).await, Fact::Missing));
        let naming = view.pods_naming("ns", "data", fresh).await;
        assert!(matches!(naming, Fact::Found(p) if p.len() == 1));
        let on = view.pods(PodsIn::Node("n1"), |_| true, fresh).await;
        assert!(matches!(on, Fact::Found(p) if p.len() == 1));
        // A file holds no Namespaces or Leases: none known.
        assert!(matches!(view.namespace("ns", fresh).await, Fact::Missing));
        assert!(matches!(
            view.lease_renew_time("n1", fresh).await,
            Fact::Found(None)
        ));
    }
}

/// Review finding L2: a cache read of a kind the live view does not hold is unknown, never an
/// empty answer (an empty cache says nothing of what exists), and it sends no request.
#[tokio::test]
async fn a_cache_read_of_a_kind_not_held_is_unknown_and_reads_nothing() {
    let (client, requests) = counting_client();
    let view = View::from_store(client, store(), Needs::default());
    let unknown = |f: bool, what: &str| assert!(f, "{what}: a cache read not held must be Unknown");
    let c = Fresh::Cache;
    unknown(
        matches!(view.pvc("ns", "data", c).await, Fact::Unknown(_)),
        "pvc",
    );
    unknown(matches!(view.pv("v", c).await, Fact::Unknown(_)), "pv");
    unknown(matches!(view.node("n1", c).await, Fact::Unknown(_)), "node");
    unknown(
        matches!(view.pod("ns", "p", c).await, Fact::Unknown(_)),
        "pod",
    );
    unknown(
        matches!(view.class("c", c).await, Fact::Unknown(_)),
        "class",
    );
    unknown(
        matches!(view.namespace("ns", c).await, Fact::Unknown(_)),
        "namespace",
    );
    unknown(
        matches!(view.lease_renew_time("n1", c).await, Fact::Unknown(_)),
        "lease",
    );
    unknown(
        matches!(view.node_fence("f", c).await, Fact::Unknown(_)),
        "fence",
    );
    unknown(
        matches!(view.fences_of_node("n1", c).await, Fact::Unknown(_)),
        "fences",
    );
    unknown(
        matches!(view.pods_naming("ns", "data", c).await, Fact::Unknown(_)),
        "pods naming",
    );
    let on = view.pods(PodsIn::Node("n1"), |_| true, c).await;
    unknown(matches!(on, Fact::Unknown(_)), "pods on a node");
    assert_eq!(
        requests.load(Ordering::SeqCst),
        0,
        "a cache read sent a request"
    );
}

/// A held kind: the cache answers, an absence included; a claim of a namespace the view does not
/// watch is not held.
#[tokio::test]
async fn a_cache_read_of_a_held_kind_answers_from_memory() {
    let (client, requests) = counting_client();
    let holds = Needs {
        namespace: Some("ns".into()),
        ..Needs::admission(true)
    };
    let view = View::from_store(client, store(), holds);
    let c = Fresh::Cache;
    assert!(matches!(view.pvc("ns", "data", c).await, Fact::Found(_)));
    assert!(matches!(view.pvc("ns", "other", c).await, Fact::Missing));
    assert!(matches!(
        view.pvc("elsewhere", "data", c).await,
        Fact::Unknown(_)
    ));
    assert!(matches!(view.node("n2", c).await, Fact::Missing));
    let naming = view.pods_naming("ns", "data", c).await;
    assert!(matches!(naming, Fact::Found(p) if p.len() == 1));
    // Every namespace's pods on a node: a view of one namespace does not hold them.
    let on = view.pods(PodsIn::Node("n1"), |_| true, c).await;
    assert!(matches!(on, Fact::Unknown(_)));
    assert_eq!(requests.load(Ordering::SeqCst), 0);
}

/// `CacheOrLive` answers a hit from memory and confirms a miss live; `Live` always reads live.
#[tokio::test]
async fn a_miss_and_a_live_read_go_to_the_apiserver() {
    let (client, requests) = counting_client();
    let view = View::from_store(client, store(), Needs::admission(true));
    assert!(matches!(
        view.pvc("ns", "data", Fresh::CacheOrLive).await,
        Fact::Found(_)
    ));
    assert_eq!(requests.load(Ordering::SeqCst), 0);
    // The apiserver fails: unknown, never the cache's absence.
    assert!(matches!(
        view.pvc("ns", "other", Fresh::CacheOrLive).await,
        Fact::Unknown(_)
    ));
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    assert!(matches!(
        view.pvc("ns", "data", Fresh::Live).await,
        Fact::Unknown(_)
    ));
    assert!(matches!(
        view.pods(PodsIn::Namespace("ns"), |_| true, Fresh::Live)
            .await,
        Fact::Unknown(_)
    ));
    assert_eq!(requests.load(Ordering::SeqCst), 3);
    // An unbounded read never answers from the cache either.
    assert!(matches!(
        view.pvc("ns", "data", Fresh::Unbounded).await,
        Fact::Unknown(_)
    ));
    assert_eq!(requests.load(Ordering::SeqCst), 4);
}

/// A take-over's reads wait until the caller's instant, and the reads that never had a deadline
/// (`Unbounded`) still have none; every other live read keeps the cap.
#[test]
fn only_live_until_and_unbounded_lift_the_cap() {
    let t = tokio::time::Instant::now();
    assert_eq!(by(Fresh::LiveUntil(t)), By::Until(t));
    assert_eq!(by(Fresh::Unbounded), By::Unbounded);
    for fresh in ALL {
        assert_eq!(by(fresh), By::Cap);
    }
}

/// A file answers an unbounded read from its contents too, incidents included.
#[tokio::test]
async fn a_file_answers_an_unbounded_read_from_its_contents() {
    let view = View::file(store());
    assert!(matches!(
        view.pvc("ns", "data", Fresh::Unbounded).await,
        Fact::Found(_)
    ));
    assert!(matches!(
        view.node_fences(Fresh::Unbounded).await,
        Fact::Found(f) if f.is_empty()
    ));
    assert!(matches!(
        view.attachments("v", Fresh::Unbounded).await,
        Fact::Found(a) if a.is_empty()
    ));
}
