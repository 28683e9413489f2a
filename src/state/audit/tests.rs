use super::*;

fn refusal(name: &str, row: &'static str) -> Refusal {
    refusal_in("team", name, row)
}

fn refusal_in(ns: &str, name: &str, row: &'static str) -> Refusal {
    Refusal {
        regarding: Regarding::of("Pod", "DELETE", Some(ns), Some(name)).expect("pod"),
        user: "alice".into(),
        reason: "Denied",
        action: "Delete".into(),
        row,
        rule: "force-delete".into(),
        note: format!("volguard refused DELETE Pod team/{name}"),
    }
}

#[test]
fn regarding_is_the_pod_for_its_subresources_and_the_namespace_before_creation() {
    let pod = |kind, op, name| Regarding::of(kind, op, Some("team"), name);
    // Binding and Eviction are CREATEs about a pod that exists.
    for kind in ["Binding", "Eviction"] {
        let r = pod(kind, "CREATE", Some("db-0")).expect(kind);
        assert_eq!((r.kind, r.name.as_str()), ("Pod", "db-0"), "{kind}");
    }
    // A pod being created does not exist yet (nor does one with only a generateName).
    for name in [Some("web-1"), None] {
        let r = pod("Pod", "CREATE", name).expect("pod create");
        assert_eq!((r.kind, r.name.as_str()), ("Namespace", "team"));
        assert_eq!(
            event_namespace(&r),
            "team",
            "in the namespace its users read"
        );
    }
    let r = pod("Pod", "UPDATE", Some("db-0")).expect("status");
    assert_eq!((r.kind, r.namespace.as_deref()), ("Pod", Some("team")));
    let node = Regarding::of("Node", "UPDATE", None, Some("node-1")).expect("node");
    assert_eq!((node.kind, node.namespace.as_deref()), ("Node", None));
    assert_eq!(event_namespace(&node), "default");
    assert_eq!(
        Regarding::of("ConfigMap", "UPDATE", Some("team"), Some("x")),
        None
    );
}

#[test]
fn each_caller_gets_its_own_event() {
    // One Event says "by" one user: a second caller refused the same way is not folded into
    // the first one's count.
    let t0 = Instant::now();
    let wall = jiff::Timestamp::UNIX_EPOCH;
    let mut a = Aggregator::new(t0);
    assert_eq!(a.observe(refusal("db-0", "row-1"), t0, wall), Observed::New);
    assert_eq!(
        a.observe(refusal("db-0", "row-1"), t0, wall),
        Observed::Repeat
    );
    let bob = Refusal {
        user: "bob".into(),
        ..refusal("db-0", "row-1")
    };
    assert_eq!(a.observe(bob, t0, wall), Observed::New);
    let w = a.due(t0);
    assert_eq!(w.len(), 2, "{w:?}");
}

#[test]
fn the_reference_carries_the_objects_uid() {
    let mut r = Regarding::of("Pod", "DELETE", Some("team"), Some("db-0")).expect("pod");
    r.uid = Some("uid-db-0".into());
    assert_eq!(r.reference().uid.as_deref(), Some("uid-db-0"));
}

#[test]
fn a_repeat_is_counted_into_one_event_and_written_every_flush() {
    let t0 = Instant::now();
    let wall = jiff::Timestamp::UNIX_EPOCH;
    let mut a = Aggregator::new(t0);
    assert_eq!(a.observe(refusal("db-0", "row-1"), t0, wall), Observed::New);
    let w = a.due(t0);
    assert!(matches!(&w[..], [Write::Create { count: 1, .. }]), "{w:?}");
    a.created(0, "db-0.abc".into());
    // A loop of 100 refusals within the flush interval: no write until FLUSH has passed.
    for i in 1..=100 {
        let t = t0 + Duration::from_millis(i * 50);
        assert_eq!(
            a.observe(refusal("db-0", "row-1"), t, wall),
            Observed::Repeat
        );
        if Duration::from_millis(i * 50) < FLUSH {
            assert!(a.due(t).is_empty(), "written before the flush at {i}");
        }
    }
    let w = a.due(t0 + FLUSH);
    assert!(
        matches!(&w[..], [Write::Series { count: 101, event, namespace, .. }] if event == "db-0.abc" && namespace == "team"),
        "{w:?}"
    );
    assert!(
        a.due(t0 + FLUSH * 2).is_empty(),
        "nothing new, nothing written"
    );
    // Another row of the same rule on the same pod is its own Event.
    assert_eq!(a.observe(refusal("db-0", "row-2"), t0, wall), Observed::New);
    assert_eq!(a.len(), 2);
}

#[test]
fn writes_share_a_token_bucket_and_the_rest_wait() {
    let t0 = Instant::now();
    let wall = jiff::Timestamp::UNIX_EPOCH;
    let mut a = Aggregator::new(t0);
    for i in 0..100 {
        a.observe(refusal(&format!("p-{i}"), "row"), t0, wall);
    }
    let first = a.due(t0);
    assert_eq!(first.len(), BURST as usize, "a burst, then the rate");
    // One second later: WRITES_PER_SECOND more.
    let next = a.due(t0 + Duration::from_secs(1));
    assert_eq!(next.len(), WRITES_PER_SECOND as usize);
    // All 100 are written in the end, none lost.
    let mut written = first.len() + next.len();
    for s in 2..60 {
        written += a.due(t0 + Duration::from_secs(s)).len();
    }
    assert_eq!(written, 100);
}

#[test]
fn entries_are_bounded_and_forgotten_when_idle() {
    let t0 = Instant::now();
    let wall = jiff::Timestamp::UNIX_EPOCH;
    let mut a = Aggregator::new(t0);
    for i in 0..CAPACITY {
        let ns = format!("team-{}", i / PER_NAMESPACE);
        assert_eq!(
            a.observe(refusal_in(&ns, &format!("p-{i}"), "row"), t0, wall),
            Observed::New
        );
    }
    assert_eq!(
        a.observe(refusal("one-more", "row"), t0, wall),
        Observed::Dropped
    );
    // Written out over time (5 a second), then idle: forgotten, and room again.
    let mut written = 0;
    for sec in 0..1000 {
        written += a.due(t0 + Duration::from_secs(sec)).len();
    }
    assert_eq!(written, CAPACITY);
    let later = t0 + Duration::from_secs(1000) + IDLE;
    assert!(a.due(later).is_empty());
    assert!(a.is_empty(), "{} entries left", a.len());
    assert_eq!(
        a.observe(refusal("one-more", "row"), later, wall),
        Observed::New
    );
}

#[test]
fn one_namespace_cannot_take_every_other_namespaces_room() {
    // Trust review point 13: a flood of refusals in one namespace must not drop another's Events.
    let t0 = Instant::now();
    let wall = jiff::Timestamp::UNIX_EPOCH;
    let mut a = Aggregator::new(t0);
    let mut dropped = 0;
    for i in 0..CAPACITY {
        if a.observe(refusal_in("flood", &format!("p-{i}"), "row"), t0, wall) == Observed::Dropped {
            dropped += 1;
        }
    }
    assert_eq!(dropped, CAPACITY - PER_NAMESPACE);
    assert_eq!(
        a.observe(refusal_in("quiet", "victim", "row"), t0, wall),
        Observed::New,
        "another namespace still has room"
    );
}

/// A client whose every request fails (the connection is closed unanswered), as an apiserver
/// that cannot be reached does.
fn failing_client() -> crate::state::Writer {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
        }
    });
    let cfg = kube::Config::new(format!("http://{addr}").parse().expect("uri"));
    crate::state::Writer::new(
        Default::default(),
        Some(kube::Client::try_from(cfg).expect("client")),
        "volguard-webhook",
        "w-0".into(),
    )
}

/// The log lines written while `f` runs (this thread's subscriber, WARN and up).
#[derive(Clone, Default)]
struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("logs").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let logs = self.clone();
        tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::WARN)
                .with_ansi(false)
                .with_writer(move || logs.clone())
                .finish(),
        )
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("logs")).into_owned()
    }
}

/// The results the VolguardAuditRecordsDropped alert matches, read from the alert rules.
fn alert_results() -> Vec<String> {
    let rules = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("manifests/monitoring/alerts.rules.yaml"),
    )
    .expect("alerts.rules.yaml");
    let expr = rules
        .split("- alert: VolguardAuditRecordsDropped")
        .nth(1)
        .and_then(|a| a.lines().find(|l| l.trim_start().starts_with("expr:")))
        .expect("the alert's expr")
        .to_string();
    let (_, rest) = expr.split_once("result=~\"").expect("a result matcher");
    let (alternatives, _) = rest.split_once('"').expect("closing quote");
    alternatives.split('|').map(str::to_string).collect()
}

#[tokio::test]
async fn a_failed_report_write_is_warned_with_its_object_and_counted_where_the_alert_looks() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let metrics = AuditMetrics::register(&crate::runtime::MetricsRegistry::default());
    let mut pending: Pending = HashMap::new();
    pending
        .entry("team".to_string())
        .or_default()
        .push(line(&refusal("db-0", "row-1"), jiff::Timestamp::UNIX_EPOCH));
    let reports = Reports {
        retention: jiff::SignedDuration::from_hours(1),
        max: 10,
    };
    fold_reports(&failing_client(), &mut pending, &reports, &metrics).await;
    assert_eq!(metrics.get("report", "failed"), 1);
    assert!(
        alert_results().iter().any(|r| r == "failed"),
        "the alert reads result=\"failed\": {:?}",
        alert_results()
    );
    assert_eq!(
        pending["team"].len(),
        1,
        "the line waits for the next write"
    );
    let text = logs.text();
    assert!(
        text.contains("WARN")
            && text.contains("could not write the AuditReport")
            && text.contains("namespace=team")
            && text.contains("auditreport=volguard")
            && text.contains("error="),
        "{text}"
    );
}

#[tokio::test]
async fn a_failed_event_write_is_warned_with_its_object_and_counted_where_the_alert_looks() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let metrics = AuditMetrics::register(&crate::runtime::MetricsRegistry::default());
    let w = Write::Create {
        key: 0,
        refusal: refusal("db-0", "row-1"),
        count: 1,
    };
    assert_eq!(
        write_event(&failing_client(), "w-0", w, &metrics).await,
        None
    );
    let w = Write::Series {
        key: 0,
        event: "db-0.abc".into(),
        namespace: "team".into(),
        count: 3,
        last: jiff::Timestamp::UNIX_EPOCH,
    };
    assert_eq!(
        write_event(&failing_client(), "w-0", w, &metrics).await,
        None
    );
    assert_eq!(metrics.get("event", "failed"), 2);
    let text = logs.text();
    assert!(
        text.contains("could not record an audit Event")
            && text.contains("regarding=Pod db-0")
            && text.contains("namespace=team"),
        "{text}"
    );
    assert!(
        text.contains("could not update an audit Event") && text.contains("event=db-0.abc"),
        "{text}"
    );
}

#[test]
fn every_loss_of_either_record_is_a_result_the_alert_reads_and_starts_at_zero() {
    let alert = alert_results();
    for lost in ["dropped", "failed"] {
        assert!(alert.iter().any(|r| r == lost), "{alert:?}");
        assert!(EVENT_RESULTS.contains(&lost) && REPORT_RESULTS.contains(&lost));
    }
    let registry = crate::runtime::MetricsRegistry::default();
    let _ = AuditMetrics::register(&registry);
    let text = registry.render_prometheus();
    for record in ["event", "report"] {
        for lost in ["dropped", "failed"] {
            let series =
                format!("volguard_audit_events_total{{record=\"{record}\",result=\"{lost}\"}} 0\n");
            assert!(text.contains(&series), "{series} in\n{text}");
        }
    }
}
