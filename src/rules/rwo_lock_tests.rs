//! Unit tests of `src/rules/rwo_lock.rs`: take, share, deny, each kind of take-over.

use super::*;
use crate::model::testing;
use crate::rules::decision::ReadError;

fn ts(s: &str) -> jiff::Timestamp {
    s.parse().expect("timestamp")
}

const NOW: &str = "2026-11-23T10:00:00Z";

fn pod(name: &str, uid: &str, node: Option<&str>, phase: &str) -> Pod {
    testing::pod("ns", name)
        .with_uid(uid)
        .on(node)
        .in_phase(phase)
}

fn node(out_of_service: bool) -> Node {
    let n = testing::node("n1");
    if out_of_service {
        n.out_of_service()
    } else {
        n
    }
}

/// The lock of pod "old" (uid u-old) on n1, taken at `at`.
fn lock(at: &str) -> RwoLock {
    RwoLock {
        node: "n1".into(),
        pod: "old".into(),
        uid: "u-old".into(),
        at: ts(at),
    }
}

fn me() -> Pod {
    pod("new", "u-new", None, "Pending")
}

fn step_with(current: Option<&RwoLock>, holder: Option<&LockHolder<'_>>, node: &str) -> LockStep {
    step(&me(), node, current, holder, ts(NOW))
}

#[test]
fn free_claim_is_taken() {
    let s = step_with(None, None, "n2");
    assert_eq!(
        s,
        LockStep::Write {
            lock: RwoLock::new(&me(), "n2", ts(NOW)),
            took_over: None
        }
    );
}

#[test]
fn lock_round_trips_through_the_annotation() {
    let l = lock("2026-11-23T09:59:00Z");
    let raw = l.encode();
    assert!(
        raw.contains("\"node\":\"n1\"") && raw.contains("\"pod\":\"old\""),
        "{raw}"
    );
    assert_eq!(RwoLock::parse(&raw), Some(l));
    assert_eq!(RwoLock::parse("not json"), None);
}

#[test]
fn same_node_shares_and_records_the_newest_pod() {
    let l = lock("2026-11-23T09:00:00Z");
    match step_with(Some(&l), None, "n1") {
        LockStep::Write { lock, took_over } => {
            assert_eq!((lock.node.as_str(), lock.pod.as_str()), ("n1", "new"));
            assert_eq!(took_over, None);
        }
        other => panic!("expected the lock to move to the newest pod on n1, got {other:?}"),
    }
}

#[test]
fn own_lock_is_kept_without_a_write() {
    let mine = RwoLock::new(&me(), "n1", ts("2026-11-23T09:00:00Z"));
    assert_eq!(step_with(Some(&mine), None, "n1"), LockStep::Keep);
}

#[test]
fn live_holder_on_other_node_denies() {
    let l = lock("2026-11-23T09:00:00Z");
    let old = pod("old", "u-old", Some("n1"), "Running");
    let n = node(false);
    let h = LockHolder {
        pod: Fact::Found(&old),
        node: Fact::Found(&n),
    };
    assert_eq!(
        step_with(Some(&l), Some(&h), "n2"),
        LockStep::Held(l.clone())
    );
    let msg = held_message(&me(), "n2", "data", &l);
    assert!(
        msg.contains("locked to node \"n1\" by pod \"old\""),
        "{msg}"
    );
}

#[test]
fn holder_not_yet_bound_denies_within_the_grace() {
    // The race the lock exists for: the winner's bind is still in flight.
    let l = lock("2026-11-23T09:59:59Z");
    let old = pod("old", "u-old", None, "Pending");
    let n = node(false);
    let h = LockHolder {
        pod: Fact::Found(&old),
        node: Fact::Found(&n),
    };
    assert_eq!(step_with(Some(&l), Some(&h), "n2"), LockStep::Held(l));
}

#[test]
fn unsure_holder_or_node_denies() {
    let l = lock("2026-11-23T09:00:00Z");
    let old = pod("old", "u-old", Some("n1"), "Running");
    let n = node(false);
    for h in [
        LockHolder {
            pod: Fact::Unknown(ReadError::Late),
            node: Fact::Found(&n),
        },
        LockHolder {
            pod: Fact::Found(&old),
            node: Fact::Unknown(ReadError::Late),
        },
    ] {
        assert_eq!(
            step_with(Some(&l), Some(&h), "n2"),
            LockStep::Held(l.clone())
        );
    }
}

#[test]
fn every_stale_kind_is_taken_over() {
    let long_ago = "2026-11-23T09:00:00Z";
    let n = node(false);
    let oos = node(true);
    let ended = pod("old", "u-old", Some("n1"), "Succeeded");
    let replaced = pod("old", "u-other", Some("n1"), "Running");
    let elsewhere = pod("old", "u-old", Some("n3"), "Running");
    let unbound = pod("old", "u-old", None, "Pending");
    let running = pod("old", "u-old", Some("n1"), "Running");
    let cases: Vec<(&str, LockHolder<'_>)> = vec![
        (
            "holder deleted",
            LockHolder {
                pod: Fact::Missing,
                node: Fact::Found(&n),
            },
        ),
        (
            "holder ended",
            LockHolder {
                pod: Fact::Found(&ended),
                node: Fact::Found(&n),
            },
        ),
        (
            "holder replaced",
            LockHolder {
                pod: Fact::Found(&replaced),
                node: Fact::Found(&n),
            },
        ),
        (
            "holder on another node",
            LockHolder {
                pod: Fact::Found(&elsewhere),
                node: Fact::Found(&n),
            },
        ),
        (
            "holder never bound",
            LockHolder {
                pod: Fact::Found(&unbound),
                node: Fact::Found(&n),
            },
        ),
        (
            "node gone",
            LockHolder {
                pod: Fact::Found(&running),
                node: Fact::Missing,
            },
        ),
        (
            "node out of service",
            LockHolder {
                pod: Fact::Found(&running),
                node: Fact::Found(&oos),
            },
        ),
    ];
    for (why, h) in cases {
        let l = lock(long_ago);
        match step_with(Some(&l), Some(&h), "n2") {
            LockStep::Write { lock, took_over } => {
                assert_eq!(took_over, Some(why));
                assert_eq!(lock.node, "n2");
            }
            other => panic!("{why}: expected a take-over, got {other:?}"),
        }
        assert_eq!(clearable(&l, &h, ts(NOW)), Some(why));
    }
}
