//! Unit tests of `src/explain/node.rs`: why a node is fenced, released or waiting, and what to do.

use crate::explain::node::{Facts, build, table};
use crate::model::fence::{NodeFence, Phase};
use crate::model::testing;

fn incident(phase: Phase, release: bool) -> NodeFence {
    let mut f = testing::incident(phase, release);
    f.status.message = Some("the message".into());
    f
}
fn pods() -> Vec<crate::model::Pod> {
    vec![
        testing::pod("shop", "db-0")
            .on(Some("n1"))
            .in_phase("Running")
            .mounting("data-db-0"),
    ]
}
fn facts<'a>(
    node: Option<&'a crate::model::Node>,
    fences: &'a [NodeFence],
    pods: &'a [crate::model::Pod],
    alive: Option<&str>,
) -> Facts<'a> {
    Facts {
        name: "n1",
        node,
        lease: crate::rules::Fact::Found(None),
        alive: alive.map(str::to_string),
        fences,
        pods,
    }
}

#[test]
fn a_deleted_node_with_and_without_a_record() {
    let p = pods();
    let rec = [incident(Phase::Detected, true)];
    let e = build(&facts(None, &rec, &p, None));
    assert!(!e.exists);
    assert!(
        e.next.contains("release recorded in nodefence n1-1"),
        "{}",
        e.next
    );
    assert_eq!(e.incidents[0].phase, "Recorded");
    let e = build(&facts(None, &[], &p, None));
    assert!(
        e.next.contains("nothing records") && e.next.contains("kubectl volguard fence confirm n1"),
        "{}",
        e.next
    );
    let t = table(&e);
    assert!(
        t.contains("exists:       no (deleted)") && t.contains("shop/db-0 (Running): data-db-0"),
        "{t}"
    );
}

/// As the guards read a record: a Lease renewed after it, or not read, and it proves nothing.
#[test]
fn a_deleted_node_s_record_counts_as_the_guards_count_it() {
    use crate::rules::Fact;
    let p = pods();
    let mut record = incident(Phase::Detected, true);
    let made: jiff::Timestamp = "2026-11-23T12:00:00Z".parse().expect("time");
    record.metadata.creation_timestamp = Some(made);
    let rec = [record];
    let with = |lease| {
        let mut f = facts(None, &rec, &p, None);
        f.lease = lease;
        build(&f).next
    };
    let before = with(Fact::Found(Some(
        made - jiff::SignedDuration::from_secs(60),
    )));
    assert!(
        before.contains("release recorded in nodefence n1-1"),
        "{before}"
    );
    let after = with(Fact::Found(Some(
        made + jiff::SignedDuration::from_secs(60),
    )));
    assert!(after.contains("nothing records"), "{after}");
    let unread = with(Fact::Unknown(crate::rules::decision::ReadError::Timeout {
        what: "the Lease".into(),
    }));
    assert!(unread.contains("nothing records"), "{unread}");
}

#[test]
fn an_incident_says_what_holds_the_node() {
    let n = testing::node("n1");
    let p = pods();
    for (phase, want) in [
        (Phase::Fencing, "is fencing it"),
        (Phase::Released, "repair the machine"),
        (Phase::Recovering, "holds the taint: the message"),
    ] {
        let f = [incident(phase, false)];
        let e = build(&facts(Some(&n), &f, &p, None));
        assert!(e.next.contains(want), "{phase:?}: {}", e.next);
    }
    let mut held = incident(Phase::Fenced, false);
    held.status.uncovered = vec!["nfs volumes".into()];
    let e = build(&facts(Some(&n), &[held], &p, None));
    assert!(e.next.contains("holds: the message"), "{}", e.next);
    let e = build(&facts(
        Some(&n),
        &[incident(Phase::Failed, false)],
        &p,
        None,
    ));
    assert!(
        e.next.contains("failed") && e.next.contains("kubectl delete nodefence n1-1"),
        "{}",
        e.next
    );
}

#[test]
fn a_healthy_node_says_so_and_a_taint_names_its_proof() {
    let n = testing::node("n1");
    let p = pods();
    let e = build(&facts(Some(&n), &[], &p, Some("it reports Ready")));
    assert_eq!(e.next, "healthy (it reports Ready): nothing to do");
    let mut t = testing::node("n1").out_of_service();
    t.metadata.annotations = Some(
        [
            (
                crate::rules::proof::Key::ConfirmNodeDown
                    .annotation()
                    .to_string(),
                "true".to_string(),
            ),
            (
                crate::rules::proof::CONFIRMED_BY.to_string(),
                "alice".to_string(),
            ),
        ]
        .into(),
    );
    let e = build(&facts(Some(&t), &[], &p, None));
    assert_eq!(
        e.tainted_on.as_deref(),
        Some("a person's confirmation (alice)")
    );
    assert!(e.next.starts_with("out of service"), "{}", e.next);
}
