//! Unit tests of `src/state/view.rs`: what each freshness answers, from a file and from a live
//! view, and that a cache read never turns a kind the view does not hold into an absence.

use super::*;
use crate::model::testing;
use crate::state::Readable;
use crate::state::query;

/// A client whose every request is answered 500 at once, and how many requests it made.
fn counting_client() -> (kube::Client, Counted) {
    let (client, log) = answering_client(|_| {
        (
            "500 Internal Server Error",
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}"#,
        )
    });
    (client, Counted(log))
}

/// How many requests a `counting_client` made.
struct Counted(Arc<std::sync::Mutex<Vec<String>>>);

impl Counted {
    fn count(&self) -> usize {
        self.0.lock().expect("log").len()
    }
}

/// A client whose every request is answered by `answer` (given its target: path and query, as a
/// status line's end and a JSON body), and the targets in the order they came.
fn answering_client(
    answer: impl Fn(&str) -> (&'static str, &'static str) + Send + 'static,
) -> (kube::Client, Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).unwrap_or(0);
            // A connection closed before it sent a request (a client that gave up on it, on a
            // loaded machine) is no request.
            if n == 0 {
                continue;
            }
            let head = String::from_utf8_lossy(&buf[..n]).to_string();
            let target = head.split(' ').nth(1).unwrap_or_default().to_string();
            let (status, body) = answer(&target);
            log.lock().expect("log").push(target);
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
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
            view.read(Pvc::named("ns", "data", fresh)).await,
            Fact::Found(_)
        ));
        assert!(matches!(
            view.read(Pvc::named("ns", "other", fresh)).await,
            Fact::Missing
        ));
        assert!(matches!(
            view.read(Node::named("", "n1", fresh)).await,
            Fact::Found(_)
        ));
        assert!(matches!(
            view.read(Pv::named("", "v", fresh)).await,
            Fact::Missing
        ));
        let naming = view.read(query::PodsNaming("ns", "data", fresh)).await;
        assert!(matches!(naming, Fact::Found(p) if p.len() == 1));
        let on = view
            .read(query::Pods(PodsIn::Node("n1"), |_| true, fresh))
            .await;
        assert!(matches!(on, Fact::Found(p) if p.len() == 1));
        // A file holds no Namespaces or Leases: none known.
        assert!(matches!(
            view.read(query::Namespace("ns", fresh)).await,
            Fact::Missing
        ));
        assert!(matches!(
            view.read(query::RenewTime("n1", fresh)).await,
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
        matches!(
            view.read(Pvc::named("ns", "data", c)).await,
            Fact::Unknown(_)
        ),
        "pvc",
    );
    unknown(
        matches!(view.read(Pv::named("", "v", c)).await, Fact::Unknown(_)),
        "pv",
    );
    unknown(
        matches!(view.read(Node::named("", "n1", c)).await, Fact::Unknown(_)),
        "node",
    );
    unknown(
        matches!(view.read(Pod::named("ns", "p", c)).await, Fact::Unknown(_)),
        "pod",
    );
    unknown(
        matches!(
            view.read(StorageClass::named("", "c", c)).await,
            Fact::Unknown(_)
        ),
        "class",
    );
    unknown(
        matches!(view.read(query::Namespace("ns", c)).await, Fact::Unknown(_)),
        "namespace",
    );
    unknown(
        matches!(view.read(query::RenewTime("n1", c)).await, Fact::Unknown(_)),
        "lease",
    );
    unknown(
        matches!(
            view.read(query::Fences(FencesOf::Named("f"), c)).await,
            Fact::Unknown(_)
        ),
        "fence",
    );
    unknown(
        matches!(
            view.read(query::Fences(FencesOf::Node("n1"), c)).await,
            Fact::Unknown(_)
        ),
        "fences",
    );
    unknown(
        matches!(
            view.read(query::PodsNaming("ns", "data", c)).await,
            Fact::Unknown(_)
        ),
        "pods naming",
    );
    let on = view
        .read(query::Pods(PodsIn::Node("n1"), |_| true, c))
        .await;
    unknown(matches!(on, Fact::Unknown(_)), "pods on a node");
    assert_eq!(requests.count(), 0, "a cache read sent a request");
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
    assert!(matches!(
        view.read(Pvc::named("ns", "data", c)).await,
        Fact::Found(_)
    ));
    assert!(matches!(
        view.read(Pvc::named("ns", "other", c)).await,
        Fact::Missing
    ));
    assert!(matches!(
        view.read(Pvc::named("elsewhere", "data", c)).await,
        Fact::Unknown(_)
    ));
    assert!(matches!(
        view.read(Node::named("", "n2", c)).await,
        Fact::Missing
    ));
    let naming = view.read(query::PodsNaming("ns", "data", c)).await;
    assert!(matches!(naming, Fact::Found(p) if p.len() == 1));
    // Every namespace's pods on a node: a view of one namespace does not hold them.
    let on = view
        .read(query::Pods(PodsIn::Node("n1"), |_| true, c))
        .await;
    assert!(matches!(on, Fact::Unknown(_)));
    assert_eq!(requests.count(), 0);
}

/// `CacheOrLive` answers a hit from memory and confirms a miss live; `Live` always reads live.
#[tokio::test]
async fn a_miss_and_a_live_read_go_to_the_apiserver() {
    let (client, requests) = counting_client();
    let view = View::from_store(client, store(), Needs::admission(true));
    assert!(matches!(
        view.read(Pvc::named("ns", "data", Fresh::CacheOrLive))
            .await,
        Fact::Found(_)
    ));
    assert_eq!(requests.count(), 0);
    // The apiserver fails: unknown, never the cache's absence.
    assert!(matches!(
        view.read(Pvc::named("ns", "other", Fresh::CacheOrLive))
            .await,
        Fact::Unknown(_)
    ));
    assert_eq!(requests.count(), 1);
    assert!(matches!(
        view.read(Pvc::named("ns", "data", Fresh::Live)).await,
        Fact::Unknown(_)
    ));
    assert!(matches!(
        view.read(query::Pods(PodsIn::Namespace("ns"), |_| true, Fresh::Live))
            .await,
        Fact::Unknown(_)
    ));
    assert_eq!(requests.count(), 3);
    // An unbounded read never answers from the cache either.
    assert!(matches!(
        view.read(Pvc::named("ns", "data", Fresh::Unbounded)).await,
        Fact::Unknown(_)
    ));
    assert_eq!(requests.count(), 4);
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
        view.read(Pvc::named("ns", "data", Fresh::Unbounded)).await,
        Fact::Found(_)
    ));
    assert!(matches!(
        view.read(query::Fences(FencesOf::All, Fresh::Unbounded)).await,
        Fact::Found(f) if f.is_empty()
    ));
    assert!(matches!(
        view.read(query::Attachments("v", Fresh::Unbounded)).await,
        Fact::Found(a) if a.is_empty()
    ));
}

/// A file answers each kind of NodeFence read from its records: one by name (`Missing` when it
/// holds none of that name), a node's, or all.
#[tokio::test]
async fn a_file_answers_the_fences_each_read_names() {
    let s = Store::default();
    for (name, node) in [("a", "n1"), ("b", "n2"), ("c", "n1")] {
        let mut f = crate::model::fence::NodeFence::default();
        f.metadata.name = name.into();
        f.spec.node = node.into();
        s.fences.apply(f);
    }
    let view = View::file(Arc::new(s));
    let names = |fact: Fact<Vec<Arc<crate::model::fence::NodeFence>>>| match fact {
        Fact::Found(v) => {
            let mut n: Vec<String> = v.iter().map(|f| f.metadata.name.clone()).collect();
            n.sort();
            n
        }
        other => panic!("expected records, got {other:?}"),
    };
    let live = Fresh::Live;
    assert_eq!(
        names(view.read(query::Fences(FencesOf::Named("b"), live)).await),
        ["b"]
    );
    assert!(matches!(
        view.read(query::Fences(FencesOf::Named("z"), live)).await,
        Fact::Missing
    ));
    assert!(matches!(
        view.read(query::Fences(FencesOf::Named("z"), live))
            .await
            .first(),
        Fact::Missing
    ));
    assert_eq!(
        names(view.read(query::Fences(FencesOf::Node("n1"), live)).await),
        ["a", "c"]
    );
    assert_eq!(
        names(view.read(query::Fences(FencesOf::Node("n3"), live)).await),
        [""; 0]
    );
    assert_eq!(
        names(
            view.read(query::Fences(FencesOf::All, Fresh::Unbounded))
                .await
        ),
        ["a", "b", "c"]
    );
}

/// A client that records each request's target (path and query) and answers a LIST "not older
/// than" a version as a watch cache lagging it does (504, "Too large resource version"), any
/// other with an empty PodList.
fn lagging_cache_client() -> (kube::Client, Arc<std::sync::Mutex<Vec<String>>>) {
    recording_client(
        "504 Gateway Timeout",
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Timeout","message":"Too large resource version","code":504}"#,
    )
}

/// As `lagging_cache_client`, answering a LIST "not older than" a version with `status` and
/// `body`, any other with an empty PodList.
fn recording_client(
    status: &'static str,
    body: &'static str,
) -> (kube::Client, Arc<std::sync::Mutex<Vec<String>>>) {
    answering_client(
        move |target| match target.contains("resourceVersionMatch=NotOlderThan") {
            true => (status, body),
            false => (
                "200 OK",
                r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"50"},"items":[]}"#,
            ),
        },
    )
}

/// A LIST "not older than" a claim's version asks the watch cache for it, and one the cache
/// cannot serve is read again consistently (no resourceVersion): never an answer from an older
/// cache, never unknown for the cache's lag alone.
#[tokio::test]
async fn a_list_not_older_than_a_version_falls_back_to_a_consistent_one() {
    let (client, requests) = lagging_cache_client();
    let view = View::from_store(client, store(), Needs::admission(true));
    // kube's client retries the 504 for `SINCE_WAIT` first: the cache gets its time.
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let fresh = Fresh::LiveUntil(until).not_older_than(Some("42"));
    assert_eq!(fresh, Fresh::LiveSince(42, Some(until)));
    let users = view
        .read(query::Pods(
            PodsIn::NamespaceOnNode("ns", "n1"),
            |_| true,
            fresh,
        ))
        .await;
    assert!(
        matches!(users, Fact::Found(ref p) if p.is_empty()),
        "{users:?}"
    );
    let seen = requests.lock().expect("log").clone();
    let (last, lagged) = seen.split_last().expect("requests");
    assert!(!lagged.is_empty(), "{seen:?}");
    for l in lagged {
        assert!(l.contains("resourceVersion=42"), "{seen:?}");
        assert!(l.contains("fieldSelector=spec.nodeName%3Dn1"), "{seen:?}");
    }
    assert!(!last.contains("resourceVersion"), "{seen:?}");
}

/// A view opened with `consistent_lists` (pods and claims in etcds of their own) never sends a
/// version to compare across kinds.
#[tokio::test]
async fn a_view_with_consistent_lists_never_lists_at_a_version() {
    let (client, requests) = lagging_cache_client();
    let holds = Needs {
        consistent_lists: true,
        ..Needs::admission(true)
    };
    let view = View::from_store(client, store(), holds);
    let fresh = Fresh::Live.not_older_than(Some("42"));
    let users = view
        .read(query::Pods(
            PodsIn::NamespaceOnNode("ns", "n1"),
            |_| true,
            fresh,
        ))
        .await;
    assert!(matches!(users, Fact::Found(p) if p.is_empty()));
    let seen = requests.lock().expect("log").clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(!seen[0].contains("resourceVersion"), "{seen:?}");
}

/// Only a live read takes a version, and only one that is a number (resourceVersions are
/// opaque: another stays consistent); a cache's freshness is unchanged.
#[test]
fn only_a_live_read_takes_a_numeric_version() {
    let t = tokio::time::Instant::now();
    assert_eq!(
        Fresh::Live.not_older_than(Some("7")),
        Fresh::LiveSince(7, None)
    );
    assert_eq!(by(Fresh::LiveSince(7, None)), By::Cap);
    assert_eq!(by(Fresh::LiveSince(7, Some(t))), By::Until(t));
    for v in [None, Some(""), Some("0"), Some("abc")] {
        assert_eq!(Fresh::Live.not_older_than(v), Fresh::Live);
    }
    for f in [
        Fresh::Cache,
        Fresh::CacheOrLive,
        Fresh::Whole,
        Fresh::Unbounded,
    ] {
        assert_eq!(f.not_older_than(Some("7")), f);
    }
}

/// A refusal that is not the cache's lag (403 here; 429 after the client's retries alike) is the
/// answer: read again consistently, it would only add a dearer read to the load.
#[tokio::test]
async fn a_refused_list_not_older_than_a_version_is_not_read_again() {
    let (client, requests) = recording_client(
        "403 Forbidden",
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","message":"no","code":403}"#,
    );
    let view = View::from_store(client, store(), Needs::admission(true));
    let fresh = Fresh::Live.not_older_than(Some("42"));
    let users = view
        .read(query::Pods(
            PodsIn::NamespaceOnNode("ns", "n1"),
            |_| true,
            fresh,
        ))
        .await;
    assert!(
        matches!(users, Fact::Unknown(ReadError::Refused { code: 403, .. })),
        "{users:?}"
    );
    assert_eq!(requests.lock().expect("log").len(), 1);
}

/// A LIST "not older than" a version is answered by this process's own cache once its pod watch
/// has applied that version (no request), and by the apiserver while it lags that version or
/// after a relist replaced what it had applied.
#[tokio::test]
async fn a_cache_caught_up_with_a_version_answers_a_list_not_older_than_it() {
    let (client, counted) = counting_client();
    let store = store();
    store.pods.mark.applied(100);
    let view = View::from_store(client, store.clone(), Needs::admission(true));
    let on_n1 = || PodsIn::NamespaceOnNode("ns", "n1");
    for v in ["42", "100"] {
        let users = view
            .read(query::Pods(
                on_n1(),
                |_| true,
                Fresh::Live.not_older_than(Some(v)),
            ))
            .await;
        assert!(
            matches!(&users, Fact::Found(p) if p.len() == 1 && p[0].metadata.name == "p"),
            "at {v}: {users:?}"
        );
    }
    assert_eq!(counted.count(), 0, "the cache answered");
    let ahead = view
        .read(query::Pods(
            on_n1(),
            |_| true,
            Fresh::Live.not_older_than(Some("101")),
        ))
        .await;
    assert!(matches!(ahead, Fact::Unknown(_)), "{ahead:?}");
    let asked = counted.count();
    assert!(
        asked > 0,
        "a version the cache lags is asked of the apiserver"
    );
    store.pods.mark.relisting();
    let relisted = view
        .read(query::Pods(
            on_n1(),
            |_| true,
            Fresh::Live.not_older_than(Some("42")),
        ))
        .await;
    assert!(matches!(relisted, Fact::Unknown(_)), "{relisted:?}");
    assert!(counted.count() > asked, "a relist vouches for nothing yet");
}

/// A pod the cache lacks is absent "since" a version only when the cache has applied that
/// version, holds that namespace's pods, and the resourceVersions of pods and claims compare;
/// never for a pod stored under that UID, nor without a UID, nor over a file.
#[tokio::test]
async fn a_pod_is_absent_since_a_version_only_where_the_cache_can_tell() {
    let (client, counted) = counting_client();
    let s = Store::default();
    let mut held = testing::pod("ns", "p").on(Some("n1")).mounting("data");
    held.metadata.uid = "u-p".into();
    s.claims.add(&held);
    s.pods.apply(held);
    s.pods.mark.applied(100);
    let store = Arc::new(s);
    let view = View::from_store(client.clone(), store.clone(), Needs::admission(true));
    assert!(view.pod_absent_since("ns", "q", "u-q", 100), "never stored");
    assert!(
        view.pod_absent_since("ns", "p", "u-old", 100),
        "its name taken by another UID"
    );
    assert!(!view.pod_absent_since("ns", "p", "u-p", 100), "stored");
    assert!(
        !view.pod_absent_since("ns", "q", "u-q", 101),
        "the cache lags"
    );
    assert!(!view.pod_absent_since("ns", "q", "", 100), "no UID");
    let other_namespace = Needs {
        namespace: Some("elsewhere".into()),
        ..Needs::admission(true)
    };
    let scoped = View::from_store(client.clone(), store.clone(), other_namespace);
    assert!(
        !scoped.pod_absent_since("ns", "q", "u-q", 100),
        "pods of ns not held"
    );
    let consistent = Needs {
        consistent_lists: true,
        ..Needs::admission(true)
    };
    let apart = View::from_store(client, store.clone(), consistent);
    assert!(
        !apart.pod_absent_since("ns", "q", "u-q", 100),
        "versions not comparable"
    );
    assert!(
        !View::file(store).pod_absent_since("ns", "q", "u-q", 100),
        "a file"
    );
    assert_eq!(counted.count(), 0, "nothing read");
}
