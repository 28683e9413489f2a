//! Unit tests of `src/rules/rwo_lock.rs`: take, share, deny, each kind of take-over.

use super::*;
use crate::model::testing;
use crate::rules::decision::ReadError;
use std::time::Duration;

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

/// The lock of pod "old" (uid u-old) on n1, placed by a bind at `at`.
fn lock(at: &str) -> RwoLock {
    RwoLock {
        node: "n1".into(),
        pod: "old".into(),
        uid: "u-old".into(),
        via: Some(Via::Bind),
        grace_seconds: None,
        at: ts(at),
    }
}

fn me() -> Pod {
    pod("new", "u-new", None, "Pending")
}

fn step_with(current: Option<&RwoLock>, holder: Option<&NodeHold<'_>>, node: &str) -> LockStep {
    step(&me(), node, Via::Bind, current, holder, None, ts(NOW))
}

/// A placement on the lock's own node n1, the lock's placement known as `named`.
fn step_here(current: &RwoLock, named: Option<&Named<'_>>) -> LockStep {
    step(&me(), "n1", Via::Bind, Some(current), None, named, ts(NOW))
}

#[test]
fn free_claim_is_taken() {
    let s = step_with(None, None, "n2");
    assert_eq!(
        s,
        LockStep::Write {
            lock: RwoLock::new(&me(), "n2", Via::Bind, ts(NOW)),
            took_over: None
        }
    );
}

#[test]
fn lock_round_trips_through_the_annotation() {
    let l = lock("2026-11-23T09:59:00Z");
    let raw = l.encode();
    assert!(
        raw.contains("\"node\":\"n1\"") && raw.contains("\"via\":\"bind\""),
        "{raw}"
    );
    assert_eq!(RwoLock::parse(&raw), Some(l));
    assert_eq!(RwoLock::parse("not json"), None);
    // A lock written before `via` existed still parses (and is judged as a create).
    let old = RwoLock::parse(r#"{"node":"n1","pod":"a","at":"2026-11-23T09:59:00Z"}"#);
    assert_eq!(old.map(|l| l.via), Some(None));
}

const OLD: Duration = DEFAULT_GRACE;
const YOUNG: Duration = Duration::from_secs(1);

fn hold<'a>(
    users: Fact<&'a [Pod]>,
    writer: Fact<&'a Pod>,
    node: Fact<&'a Node>,
    observed: Duration,
) -> NodeHold<'a> {
    NodeHold {
        claim: "data",
        users,
        writer: writer.into(),
        node,
        gone_recorded: false,
        observed: LockAge::quiet(observed),
        writer_stored: false,
    }
}

/// `h` with the node's deletion recorded on proof.
fn recorded(h: NodeHold<'_>) -> NodeHold<'_> {
    NodeHold {
        gone_recorded: true,
        ..h
    }
}

#[test]
fn a_placement_on_the_locks_node_writes_only_when_the_lock_names_another_settled_placement() {
    // The lock must name every placement in flight on its node (a take-over reads it); which
    // pod it names never moves the lock off a node that still uses the claim.
    let mine = RwoLock::new(&me(), "n1", Via::Bind, ts("2026-11-23T09:00:00Z"));
    // This very placement again (its first attempt lost): written afresh.
    assert_eq!(
        step_here(&mine, None),
        LockStep::Write {
            lock: RwoLock::new(&me(), "n1", Via::Bind, ts(NOW)),
            took_over: None
        }
    );
    let l = lock("2026-11-23T09:00:00Z");
    let renamed = LockStep::Write {
        lock: RwoLock::new(&me(), "n1", Via::Bind, ts(NOW)),
        took_over: None,
    };
    let landed = pod("old", "u-old", Some("n1"), "Running").mounting("data");
    let replaced = pod("old", "u-other", None, "Pending");
    let ended = pod("old", "u-old", None, "Failed");
    for (what, writer) in [
        ("landed", Fact::Found(&landed)),
        ("replaced", Fact::Found(&replaced)),
        ("ended", Fact::Found(&ended)),
        ("deleted after its bind", Fact::Missing),
    ] {
        let n = Named {
            writer: writer.into(),
            observed: LockAge::quiet(YOUNG),
            writer_stored: false,
        };
        assert_eq!(step_here(&l, Some(&n)), renamed, "{what}");
    }
}

#[test]
fn a_placement_on_the_locks_node_waits_while_the_named_one_is_in_flight() {
    // The model's counterexample: renamed away while its bind was in flight, the first
    // placement was invisible to a take-over judging only the renamed pod.
    let l = lock("2026-11-23T09:00:00Z");
    let unbound = pod("old", "u-old", None, "Pending");
    let err = ReadError::Api {
        what: "pod".into(),
        message: "timeout".into(),
    };
    for (what, writer) in [
        ("not bound yet", Fact::Found(&unbound)),
        ("unread", Fact::Unknown(err)),
    ] {
        let n = Named {
            writer: writer.into(),
            observed: LockAge::quiet(YOUNG),
            writer_stored: false,
        };
        assert_eq!(step_here(&l, Some(&n)), LockStep::Busy(l.clone()), "{what}");
    }
    assert_eq!(
        step_here(&l, None),
        LockStep::Busy(l.clone()),
        "not read in time"
    );
    // Past the grace on this process's clock, no request is still in flight.
    let n = Named {
        writer: Fact::Found(&unbound).into(),
        observed: LockAge::quiet(OLD),
        writer_stored: false,
    };
    assert!(matches!(step_here(&l, Some(&n)), LockStep::Write { .. }));
    // A created pod not stored yet may still be: in flight until the grace.
    let created = RwoLock {
        via: Some(Via::Create),
        ..lock("2026-11-23T09:00:00Z")
    };
    let n = Named {
        writer: Fact::Missing.into(),
        observed: LockAge::quiet(YOUNG),
        writer_stored: false,
    };
    assert!(matches!(step_here(&created, Some(&n)), LockStep::Busy(_)));
    // Unless this process saw that very pod stored: its create landed, a missing pod was deleted.
    let n = Named {
        writer: Fact::Missing.into(),
        observed: LockAge::quiet(YOUNG),
        writer_stored: true,
    };
    assert!(matches!(
        step_here(&created, Some(&n)),
        LockStep::Write { .. }
    ));
    let msg = busy_message(&me(), "n1", "data", &l);
    assert!(msg.contains("for pod \"old\" right now"), "{msg}");
}

#[test]
fn the_locks_pod_bound_between_the_two_reads_is_a_user() {
    // The e2e race: the users were read before the named pod's bind landed, the named pod
    // after. On the lock's node, naming the claim, it holds.
    let l = lock("2026-11-23T09:00:00Z");
    let landed = pod("old", "u-old", Some("n1"), "Running").mounting("data");
    let n = node(false);
    let h = hold(Fact::Found(&[]), Fact::Found(&landed), Fact::Found(&n), OLD);
    assert_eq!(
        step_with(Some(&l), Some(&h), "n2"),
        LockStep::Held(l.clone(), "in use on its node")
    );
    assert_eq!(clearable(&l, &h), None);
    // Bound there without naming the claim: it does not use it.
    let other = pod("old", "u-old", Some("n1"), "Running").mounting("logs");
    let h = hold(
        Fact::Found(&[]),
        Fact::Found(&other),
        Fact::Found(&n),
        YOUNG,
    );
    assert_eq!(clearable(&l, &h), Some("its pod does not use the claim"));
}

#[test]
fn a_pod_using_the_claim_on_the_locks_node_denies_whatever_the_named_pod_did() {
    // Point 5 of the trust review: the lock named a pod that never materialised (or is gone);
    // another pod on n1 still uses the claim, so the lock holds.
    let l = lock("2026-11-23T09:00:00Z");
    let users = [pod("younger", "u-y", Some("n1"), "Running").mounting("data")];
    let n = node(false);
    let h = hold(Fact::Found(&users), Fact::Missing, Fact::Found(&n), OLD);
    assert_eq!(
        step_with(Some(&l), Some(&h), "n2"),
        LockStep::Held(l.clone(), "in use on its node")
    );
    assert_eq!(clearable(&l, &h), None);
    let msg = held_message(&me(), "n2", "data", &l, "in use on its node");
    assert!(
        msg.contains("locked to node \"n1\" (first placed there by pod \"old\""),
        "{msg}"
    );
    assert!(msg.contains("; it holds: in use on its node)"), "{msg}");
}

#[test]
fn a_placement_that_may_still_land_holds_for_the_grace_on_this_process_clock() {
    // The race the lock exists for: the winner's bind is not stored yet (its pod is unbound), or
    // its pod CREATE is not stored yet (missing). The lock's `at` plays no part: a year ahead or
    // an hour back, only this process's observation counts.
    let n = node(false);
    let unbound = pod("old", "u-old", None, "Pending");
    for at in ["2027-11-23T10:00:00Z", "2026-11-23T09:00:00Z"] {
        let mut created = lock(at);
        created.via = Some(Via::Create);
        for (l, writer) in [(lock(at), Fact::Found(&unbound)), (created, Fact::Missing)] {
            let young = hold(Fact::Found(&[]), writer.clone(), Fact::Found(&n), YOUNG);
            assert_eq!(
                step_with(Some(&l), Some(&young), "n2"),
                LockStep::Held(l.clone(), "placement in progress")
            );
            let old = hold(Fact::Found(&[]), writer, Fact::Found(&n), OLD);
            assert!(matches!(
                step_with(Some(&l), Some(&old), "n2"),
                LockStep::Write {
                    took_over: Some("nobody on its node uses it"),
                    ..
                }
            ));
        }
    }
}

#[test]
fn unsure_use_or_node_denies() {
    let l = lock("2026-11-23T09:00:00Z");
    let n = node(false);
    for (h, why) in [
        hold(
            Fact::Unknown(ReadError::Timeout {
                what: "pods".into(),
            }),
            Fact::Missing,
            Fact::Found(&n),
            OLD,
        ),
        hold(
            Fact::Unknown(ReadError::Timeout {
                what: "pods".into(),
            }),
            Fact::Missing,
            Fact::Unknown(ReadError::Timeout {
                what: "pods".into(),
            }),
            OLD,
        ),
        // Nobody there, the writer could not be read and the grace has not passed.
        hold(
            Fact::Found(&[]),
            Fact::Unknown(ReadError::Timeout {
                what: "pods".into(),
            }),
            Fact::Found(&n),
            YOUNG,
        ),
    ]
    .into_iter()
    .zip([
        "its node's use could not be read",
        "its node's use could not be read",
        "placement in progress",
    ]) {
        assert_eq!(
            step_with(Some(&l), Some(&h), "n2"),
            LockStep::Held(l.clone(), why)
        );
    }
    // No hold read at all (the caller could not ask): the lock holds, and says it was not read.
    assert_eq!(
        step_with(Some(&l), None, "n2"),
        LockStep::Held(l.clone(), NOT_READ)
    );
}

#[test]
fn every_stale_kind_is_taken_over_at_once() {
    // A StatefulSet's successor (same name, new UID) on another node takes the claim without
    // waiting: the placement the lock was written for can no longer land.
    let n = node(false);
    let oos = node(true);
    let users = [pod("old", "u-old", Some("n1"), "Running").mounting("data")];
    let replaced = pod("old", "u-other", None, "Pending");
    let ended = pod("old", "u-old", Some("n1"), "Succeeded");
    let elsewhere = pod("old", "u-old", Some("n3"), "Running");
    let cases: Vec<(&str, NodeHold<'_>)> = vec![
        (
            "its pod was deleted",
            hold(Fact::Found(&[]), Fact::Missing, Fact::Found(&n), YOUNG),
        ),
        (
            "its pod was replaced",
            hold(
                Fact::Found(&[]),
                Fact::Found(&replaced),
                Fact::Found(&n),
                YOUNG,
            ),
        ),
        (
            "its pod ended",
            hold(
                Fact::Found(&[]),
                Fact::Found(&ended),
                Fact::Found(&n),
                YOUNG,
            ),
        ),
        (
            "its pod runs on another node",
            hold(
                Fact::Found(&[]),
                Fact::Found(&elsewhere),
                Fact::Found(&n),
                YOUNG,
            ),
        ),
        (
            "nobody on its node uses it",
            hold(
                Fact::Found(&[]),
                Fact::Unknown(ReadError::Timeout {
                    what: "pods".into(),
                }),
                Fact::Found(&n),
                OLD,
            ),
        ),
        (
            "node gone",
            recorded(hold(
                Fact::Found(&users),
                Fact::Missing,
                Fact::Missing,
                YOUNG,
            )),
        ),
        (
            "node out of service",
            hold(Fact::Found(&users), Fact::Missing, Fact::Found(&oos), YOUNG),
        ),
    ];
    for (why, h) in cases {
        let l = lock("2026-11-23T09:00:00Z");
        match step_with(Some(&l), Some(&h), "n2") {
            LockStep::Write { lock, took_over } => {
                assert_eq!(took_over, Some(why));
                assert_eq!(lock.node, "n2");
            }
            other => panic!("{why}: expected a take-over, got {other:?}"),
        }
        assert_eq!(clearable(&l, &h), Some(why));
    }
}

#[test]
fn a_missing_pod_a_create_placed_is_not_stale_within_the_grace() {
    // A created pod that is missing may not be stored yet: it waits for the grace.
    let n = node(false);
    let mut created = lock("2026-11-23T09:00:00Z");
    created.via = Some(Via::Create);
    let h = hold(Fact::Found(&[]), Fact::Missing, Fact::Found(&n), YOUNG);
    assert_eq!(clearable(&created, &h), None);
}

/// Issue 40 point 6: a Node deleted without a record of proof may still run its pods on the
/// machine; the lock then stands on its users like any other node's.
#[test]
fn a_node_gone_without_a_record_is_not_a_take_over() {
    let users = [pod("a", "u", Some("n1"), "Running").mounting("data")];
    let l = lock("2026-11-23T09:00:00Z");
    let h = hold(Fact::Found(&users), Fact::Missing, Fact::Missing, OLD);
    assert!(matches!(
        step_with(Some(&l), Some(&h), "n2"),
        LockStep::Held(..)
    ));
    assert_eq!(clearable(&l, &h), None);
    // Nobody there any more, the grace passed: stale as on any node (past the grace the lock's
    // pod may not have been read, so the reason names what was).
    let h = hold(Fact::Found(&[]), Fact::Missing, Fact::Missing, OLD);
    assert_eq!(clearable(&l, &h), Some("nobody on its node uses it"));
}

#[test]
fn uses_on_is_a_non_terminal_pod_of_that_node_naming_the_claim() {
    let running = pod("a", "u", Some("n1"), "Running").mounting("data");
    assert!(uses_on(&running, "ns", "data", "n1"));
    assert!(!uses_on(&running, "ns", "data", "n2"), "another node");
    assert!(
        !uses_on(&running, "other", "data", "n1"),
        "another namespace"
    );
    assert!(!uses_on(&running, "ns", "logs", "n1"), "another claim");
    let ended = pod("a", "u", Some("n1"), "Succeeded").mounting("data");
    assert!(!uses_on(&ended, "ns", "data", "n1"), "ended");
    let pending = pod("a", "u", None, "Pending").mounting("data");
    assert!(!uses_on(&pending, "ns", "data", "n1"), "not placed");
}

/// A lock written for a pod create (its grace is `DEFAULT_GRACE`).
fn cached(in_use: bool, node: Option<&Node>) -> CachedHold<'_> {
    CachedHold {
        in_use,
        node,
        via: Some(Via::Create),
    }
}

#[test]
fn cleanup_cached_keeps_a_lock_in_use_on_a_node_in_service() {
    let n = node(false);
    let c = cached(true, Some(&n));
    // The clock is told it is in use (it restarts, and answers zero).
    assert!(c.seen_in_use());
    assert_eq!(
        cleanup_cached(&c, LockAge::quiet(Duration::ZERO)),
        Cleanup::Keep
    );
}

#[test]
fn cleanup_cached_looks_again_when_the_grace_ends_on_a_node_in_service() {
    let n = node(false);
    let c = cached(false, Some(&n));
    assert!(!c.seen_in_use());
    assert_eq!(
        cleanup_cached(&c, LockAge::quiet(Duration::from_secs(20))),
        Cleanup::LookAgainAfter(Duration::from_secs(41))
    );
    assert_eq!(
        cleanup_cached(&c, LockAge::quiet(Duration::ZERO)),
        Cleanup::LookAgainAfter(DEFAULT_GRACE + Duration::from_secs(1))
    );
    assert_eq!(
        cleanup_cached(&c, LockAge::quiet(DEFAULT_GRACE - Duration::from_millis(1))),
        Cleanup::LookAgainAfter(Duration::from_millis(1001))
    );
}

/// A lock written for a bind is left for `BIND_LOCK_TIDY` on a node in service (the next
/// placement takes it over or renames it by itself); one written before `via` keeps the grace.
#[test]
fn cleanup_cached_leaves_a_binds_lock_until_its_tidy_time() {
    let (n, oos) = (node(false), node(true));
    let bind = |node| CachedHold {
        in_use: false,
        node,
        via: Some(Via::Bind),
    };
    assert_eq!(
        cleanup_cached(&bind(Some(&n)), LockAge::quiet(DEFAULT_GRACE)),
        Cleanup::LookAgainAfter(BIND_LOCK_TIDY - DEFAULT_GRACE + Duration::from_secs(1))
    );
    assert_eq!(
        cleanup_cached(&bind(Some(&n)), LockAge::quiet(BIND_LOCK_TIDY)),
        Cleanup::ReadLive
    );
    // A released node is read at once, whatever wrote the lock.
    for (what, c) in [
        ("out of service", bind(Some(&oos))),
        ("not in the cache", bind(None)),
    ] {
        assert_eq!(
            cleanup_cached(&c, LockAge::quiet(YOUNG)),
            Cleanup::ReadLive,
            "{what}"
        );
    }
    let unknown = CachedHold {
        in_use: false,
        node: Some(&n),
        via: None,
    };
    assert_eq!(
        cleanup_cached(&unknown, LockAge::quiet(OLD)),
        Cleanup::ReadLive
    );
}

#[test]
fn cleanup_cached_reads_live_past_the_grace_or_on_a_released_node() {
    let n = node(false);
    let oos = node(true);
    assert_eq!(
        cleanup_cached(&cached(false, Some(&n)), LockAge::quiet(OLD)),
        Cleanup::ReadLive
    );
    // A node the cache shows out of service or gone is read at once, even in use per the cache
    // (and then the clock is not told it is in use).
    for (what, c) in [
        ("out of service", cached(false, Some(&oos))),
        ("out of service, in use", cached(true, Some(&oos))),
        ("not in the cache", cached(false, None)),
        ("not in the cache, in use", cached(true, None)),
    ] {
        assert!(!c.seen_in_use(), "{what}");
        assert_eq!(
            cleanup_cached(&c, LockAge::quiet(YOUNG)),
            Cleanup::ReadLive,
            "{what}"
        );
    }
}

#[test]
fn cleanup_live_keeps_a_lock_in_use_on_a_node_not_released() {
    let l = lock("2026-11-23T09:00:00Z");
    let n = node(false);
    let users = [pod("old", "u-old", Some("n1"), "Running").mounting("data")];
    fn unread<T>() -> Fact<T> {
        Fact::Unknown(ReadError::Timeout {
            what: "pods".into(),
        })
    }
    for (what, h) in [
        (
            "a user",
            hold(Fact::Found(&users), Fact::Missing, Fact::Found(&n), OLD),
        ),
        // Unsure counts as in use.
        (
            "users unread",
            hold(unread(), Fact::Missing, Fact::Found(&n), OLD),
        ),
        (
            "node unread",
            hold(Fact::Found(&users), Fact::Missing, unread(), OLD),
        ),
        // Gone without a record: its machine may still run the pods.
        (
            "node gone without a record",
            hold(Fact::Found(&users), Fact::Missing, Fact::Missing, OLD),
        ),
    ] {
        assert!(h.seen_in_use(), "{what}");
        assert_eq!(cleanup_live(&l, &h), Cleanup::Keep, "{what}");
    }
}

#[test]
fn cleanup_live_looks_again_within_the_grace_when_the_node_is_not_released() {
    // Even a lock whose pod was deleted waits: clearing it first would be a second write per
    // StatefulSet restart, and a take-over never waits for the controller.
    let l = lock("2026-11-23T09:00:00Z");
    let n = node(false);
    let h = hold(
        Fact::Found(&[]),
        Fact::Missing,
        Fact::Found(&n),
        Duration::from_secs(20),
    );
    assert!(!h.seen_in_use());
    assert_eq!(clearable(&l, &h), Some("its pod was deleted"));
    assert_eq!(
        cleanup_live(&l, &h),
        Cleanup::LookAgainAfter(Duration::from_secs(41))
    );
    let gone = hold(Fact::Found(&[]), Fact::Missing, Fact::Missing, YOUNG);
    assert_eq!(
        cleanup_live(&l, &gone),
        Cleanup::LookAgainAfter(Duration::from_secs(60))
    );
}

#[test]
fn cleanup_live_clears_a_released_node_even_within_the_grace() {
    let l = lock("2026-11-23T09:00:00Z");
    let oos = node(true);
    let users = [pod("old", "u-old", Some("n1"), "Running").mounting("data")];
    for users in [Fact::Found(&users[..]), Fact::Found(&[][..])] {
        let h = hold(users.clone(), Fact::Missing, Fact::Found(&oos), YOUNG);
        assert_eq!(cleanup_live(&l, &h), Cleanup::Clear("node out of service"));
        let h = recorded(hold(users, Fact::Missing, Fact::Missing, YOUNG));
        assert_eq!(cleanup_live(&l, &h), Cleanup::Clear("node gone"));
    }
}

#[test]
fn cleanup_live_past_the_grace_clears_what_clearable_says() {
    let l = lock("2026-11-23T09:00:00Z");
    let n = node(false);
    let h = hold(Fact::Found(&[]), Fact::Missing, Fact::Found(&n), OLD);
    assert_eq!(
        cleanup_live(&l, &h),
        Cleanup::Clear("nobody on its node uses it")
    );
    let unbound = pod("old", "u-old", None, "Pending");
    let h = hold(
        Fact::Found(&[]),
        Fact::Found(&unbound),
        Fact::Found(&n),
        OLD,
    );
    assert_eq!(
        cleanup_live(&l, &h),
        Cleanup::Clear("nobody on its node uses it")
    );
    // Its pod bound between the two reads: a user, kept.
    let landed = pod("old", "u-old", Some("n1"), "Running").mounting("data");
    let h = hold(Fact::Found(&[]), Fact::Found(&landed), Fact::Found(&n), OLD);
    assert_eq!(cleanup_live(&l, &h), Cleanup::Keep);
}

#[test]
fn a_created_placement_seen_stored_and_now_missing_was_deleted() {
    // A lock written for a pod created with spec.nodeName: missing proves nothing while its
    // create may be in flight, but once this process saw that UID stored, it landed, and a UID
    // is never created twice: a quorum read that misses it shows it deleted, within the grace.
    let created = RwoLock {
        via: Some(Via::Create),
        ..lock("2026-11-23T09:00:00Z")
    };
    let none: [Pod; 0] = [];
    let h = hold(
        Fact::Found(&none),
        Fact::Missing,
        Fact::Missing,
        Duration::ZERO,
    );
    assert_eq!(
        standing(&created, &h),
        Standing::Holds("placement in progress")
    );
    let seen = NodeHold {
        writer_stored: true,
        ..hold(
            Fact::Found(&none),
            Fact::Missing,
            Fact::Missing,
            Duration::ZERO,
        )
    };
    assert_eq!(
        standing(&created, &seen),
        Standing::Stale("its pod was deleted")
    );
    // A lock without a UID names no one pod: nothing seen stored can be matched to it.
    let anonymous = RwoLock {
        uid: String::new(),
        ..created.clone()
    };
    assert_eq!(
        standing(&anonymous, &seen),
        Standing::Holds("placement in progress")
    );
    // Seen stored, but a user on the lock's node still holds it.
    let user = pod("web-0", "u-web-0", Some("n1"), "Running");
    let users = [user];
    let held = NodeHold {
        writer_stored: true,
        ..hold(
            Fact::Found(&users),
            Fact::Missing,
            Fact::Missing,
            Duration::ZERO,
        )
    };
    assert_eq!(
        standing(&created, &held),
        Standing::Holds("in use on its node")
    );
}

/// Nobody on n1 uses the claim, seen for less than the grace; the lock's pod as `writer` says.
fn nobody_there<'a>(none: &'a [Pod], n: &'a Node, writer: LockPod<&'a Pod>) -> NodeHold<'a> {
    NodeHold {
        writer,
        ..hold(Fact::Found(none), Fact::Missing, Fact::Found(n), YOUNG)
    }
}

#[test]
fn a_lock_pod_not_read_is_never_taken_as_deleted() {
    // After a bind, a pod read missing was deleted; a pod not read says nothing, whatever
    // the reason it was not read, except a UID this process saw deleted.
    let bound = lock("2026-11-23T09:00:00Z");
    let (n, none): (Node, [Pod; 0]) = (node(false), []);
    assert_eq!(
        standing(&bound, &nobody_there(&none, &n, Fact::Missing.into())),
        Standing::Stale("its pod was deleted")
    );
    for (what, unread) in [
        ("past the grace", LockPod::PastGrace),
        ("in use", LockPod::InUse),
    ] {
        assert_eq!(
            standing(&bound, &nobody_there(&none, &n, unread)),
            Standing::Holds("placement in progress"),
            "{what}: judged before the grace passed"
        );
    }
    assert_eq!(
        standing(&bound, &nobody_there(&none, &n, LockPod::SeenGone)),
        Standing::Stale("its pod was deleted")
    );
    // A created pod's too, though this process had not seen it stored when it began to read:
    // its UID was stored to be deleted, and is never created again.
    let created = RwoLock {
        via: Some(Via::Create),
        ..bound.clone()
    };
    assert_eq!(
        standing(&created, &nobody_there(&none, &n, LockPod::SeenGone)),
        Standing::Stale("its pod was deleted")
    );
    assert_eq!(
        standing(&created, &nobody_there(&none, &n, Fact::Missing.into())),
        Standing::Holds("placement in progress"),
        "read missing, never seen stored: its create may still land"
    );
    // A rename alike: a pod not read settles nothing before the grace.
    let named = |writer| Named {
        writer,
        observed: LockAge::quiet(YOUNG),
        writer_stored: false,
    };
    assert!(!placement_settled(&bound, &named(LockPod::PastGrace)));
    assert!(placement_settled(&bound, &named(LockPod::SeenGone)));
    assert!(placement_settled(&bound, &named(Fact::Missing.into())));
}

/// A cluster whose apiserver waits longer on a request (`--request-timeout` 2m) gives the lock
/// that grace: a lock quiet for 90 s still holds and the controller looks again when 2 minutes
/// are up, where the default minute would have let it go; a bind's lock is tidied no sooner than
/// the grace either.
#[test]
fn a_configured_grace_holds_a_lock_for_the_apiservers_whole_request_timeout() {
    let long = |quiet: u64| LockAge {
        quiet: Duration::from_secs(quiet),
        grace: Duration::from_secs(120),
    };
    let l = lock("2026-11-23T09:00:00Z");
    let n = node(false);
    let unbound = pod("old", "u-old", None, "Pending");
    let none: [Pod; 0] = [];
    let at = |age: LockAge| NodeHold {
        observed: age,
        ..hold(
            Fact::Found(&none),
            Fact::Found(&unbound),
            Fact::Found(&n),
            Duration::ZERO,
        )
    };
    let default_past = at(LockAge::quiet(Duration::from_secs(90)));
    assert_eq!(
        standing(&l, &default_past),
        Standing::Stale("nobody on its node uses it")
    );
    assert_eq!(
        standing(&l, &at(long(90))),
        Standing::Holds("placement in progress")
    );
    assert_eq!(
        cleanup_live(&l, &at(long(90))),
        Cleanup::LookAgainAfter(Duration::from_secs(31))
    );
    assert_eq!(
        standing(&l, &at(long(120))),
        Standing::Stale("nobody on its node uses it")
    );
    let named = |age: LockAge| Named {
        writer: LockPod::Read(Fact::Found(&unbound)),
        observed: age,
        writer_stored: false,
    };
    assert!(placement_settled(
        &l,
        &named(LockAge::quiet(Duration::from_secs(90)))
    ));
    assert!(!placement_settled(&l, &named(long(90))));
    let c = cached(false, Some(&n));
    assert_eq!(
        cleanup_cached(&c, long(90)),
        Cleanup::LookAgainAfter(Duration::from_secs(31))
    );
    let bind = CachedHold {
        in_use: false,
        node: Some(&n),
        via: Some(Via::Bind),
    };
    let hour = LockAge {
        quiet: Duration::from_secs(700),
        grace: Duration::from_secs(3600),
    };
    assert_eq!(
        cleanup_cached(&bind, hour),
        Cleanup::LookAgainAfter(Duration::from_secs(2901))
    );
}

/// A lock carries its writer's grace when that is longer than the default, and every reader
/// waits at least that long whatever its own (a controller not given the flag); a default lock
/// reads and writes as before; what a lock asks is cut at a day.
#[test]
fn a_lock_carries_its_writers_longer_grace_to_every_reader() {
    let plain = lock("2026-11-23T09:00:00Z");
    assert_eq!(plain.clone().with_grace(DEFAULT_GRACE), plain);
    assert!(!plain.encode().contains("grace"));
    assert_eq!(plain.grace(), DEFAULT_GRACE);
    let long = plain.clone().with_grace(Duration::from_secs(180));
    let raw = long.encode();
    assert!(raw.contains("\"grace\":180"), "{raw}");
    let read = RwoLock::parse(&raw).expect("parses");
    assert_eq!(read.grace(), Duration::from_secs(180));
    // Written before the field existed, or shorter than the default: the default.
    let old = r#"{"node":"n1","pod":"old","uid":"u-old","via":"bind","at":"2026-11-23T09:00:00Z"}"#;
    assert_eq!(RwoLock::parse(old).expect("old").grace(), DEFAULT_GRACE);
    let short = r#"{"node":"n1","pod":"old","grace":5,"at":"2026-11-23T09:00:00Z"}"#;
    assert_eq!(RwoLock::parse(short).expect("short").grace(), DEFAULT_GRACE);
    let huge = format!(
        r#"{{"node":"n1","pod":"old","grace":{},"at":"2026-11-23T09:00:00Z"}}"#,
        u64::MAX
    );
    assert_eq!(
        RwoLock::parse(&huge).expect("huge").grace(),
        Duration::from_secs(86_400)
    );
    assert_eq!(
        plain.with_grace(Duration::from_secs(1_000_000)).grace(),
        Duration::from_secs(86_400)
    );
}
