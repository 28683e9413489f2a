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
