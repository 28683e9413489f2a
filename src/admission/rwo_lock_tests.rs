use super::reads_by;
use std::time::Duration;
use tokio::time::Instant;

#[test]
fn a_lock_steps_reads_get_two_thirds_of_what_is_left_and_the_write_the_rest() {
    let now = Instant::now();
    let until = now + Duration::from_millis(9_300);
    let by = reads_by(now, until);
    assert_eq!(by - now, Duration::from_millis(6_200));
    assert_eq!(until - by, Duration::from_millis(3_100));
    // Later in the same placement (a lost swap's second round), less is left for both.
    let later = now + Duration::from_millis(6_000);
    assert_eq!(reads_by(later, until) - later, Duration::from_millis(2_200));
}

#[test]
fn a_placement_past_its_deadline_gives_its_reads_no_time() {
    let now = Instant::now();
    let until = now - Duration::from_millis(1);
    assert_eq!(reads_by(now, until), now);
}

/// A lock write the apiserver refuses (here the claim is gone from the in-memory store, as a 404
/// would say) while the claim carries a lock refuses the placement: allowed without its write, the
/// lock would keep naming the placement before it (adversary review). Without a lock it allows,
/// unjudged, as if volguard were down.
#[tokio::test]
async fn a_refused_lock_write_refuses_the_placement_while_a_lock_stands() {
    use crate::model::testing;
    use crate::rules::rwo_lock::{RWO_LOCK, RwoLock, Via};
    use std::sync::Arc;
    let view = crate::state::View::file(Arc::new(crate::state::Store::default()));
    let locks = super::RwoLocks::new(
        view.clone(),
        view.writer("test", "test".into()),
        crate::rules::rwo_lock::DEFAULT_GRACE,
    );
    let until = Instant::now() + Duration::from_secs(5);
    let pod = testing::pod("ns", "new").with_uid("u-new");
    let old = testing::pod("ns", "old").with_uid("u-old");
    let mine = RwoLock::new(&pod, "n1", Via::Bind, jiff::Timestamp::now());
    let mut locked = testing::pvc("ns", "data").with_modes(&["ReadWriteOnce"]);
    locked
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            RWO_LOCK,
            &RwoLock::new(&old, "n1", Via::Bind, jiff::Timestamp::now()).encode(),
        );
    let bare = testing::pvc("ns", "data").with_modes(&["ReadWriteOnce"]);
    for (pvc, refused) in [(Arc::new(locked), true), (Arc::new(bare), false)] {
        let writes = vec![(0, &pvc, mine.clone(), None)];
        let super::Locked::Decided(d) = locks.write_locks(&pod, "n1", writes, until).await else {
            panic!("a refused write decides")
        };
        assert_eq!(!d.allowed, refused, "{d:?}");
        let row = if refused {
            "rwo-lock-unconfirmed"
        } else {
            "rwo-unknown"
        };
        assert_eq!(d.row, row);
    }
}

/// `--apiserver-request-timeout` reaches the lock clock the webhook judges every lock's age by.
#[test]
fn the_webhooks_lock_clock_judges_by_the_configured_request_timeout() {
    use std::sync::Arc;
    let view = crate::state::View::file(Arc::new(crate::state::Store::default()));
    let policy = crate::rules::force_delete::ForceDeletePolicy::default();
    let default = crate::admission::Admission::new(view.clone(), policy.clone(), Vec::new());
    assert_eq!(
        default.locks.holds.clock().grace(),
        crate::rules::rwo_lock::DEFAULT_GRACE
    );
    let long = crate::admission::Admission::new(view, policy, Vec::new())
        .with_apiserver_request_timeout(Duration::from_secs(150));
    assert_eq!(long.locks.holds.clock().grace(), Duration::from_secs(150));
}

/// The webhook writes its longer grace into each lock it writes, so every reader (a controller or
/// a replica not given the flag) waits as long; at the default the lock reads as before.
#[tokio::test]
async fn a_lock_written_by_a_webhook_with_a_longer_grace_carries_it() {
    use crate::model::testing;
    use crate::rules::rwo_lock::{RWO_LOCK, RwoLock, Via};
    use std::sync::Arc;
    for (timeout, carried) in [
        (Duration::from_secs(60), None),
        (Duration::from_secs(200), Some(200)),
    ] {
        let store = crate::state::Store::default();
        store
            .pvcs
            .apply(testing::pvc("ns", "data").with_modes(&["ReadWriteOnce"]));
        let view = crate::state::View::file(Arc::new(store));
        let mut locks = super::RwoLocks::new(
            view.clone(),
            view.writer("test", "test".into()),
            crate::rules::rwo_lock::DEFAULT_GRACE,
        );
        locks.set_request_timeout(timeout);
        let pod = testing::pod("ns", "new").with_uid("u-new");
        let lock = RwoLock::new(&pod, "n1", Via::Bind, jiff::Timestamp::now());
        let pvc = view
            .held::<crate::model::Pvc>("ns", "data")
            .expect("the claim");
        let until = Instant::now() + Duration::from_secs(5);
        let super::Locked::Decided(d) = locks
            .write_locks(&pod, "n1", vec![(0, &pvc, lock, None)], until)
            .await
        else {
            panic!("a written lock decides")
        };
        assert!(d.allowed, "{d:?}");
        let stored = view.held::<crate::model::Pvc>("ns", "data").expect("claim");
        let raw = stored.metadata.annotation(RWO_LOCK).expect("a lock");
        let written = RwoLock::parse(raw).expect("parses");
        assert_eq!(written.grace_seconds, carried, "{raw}");
        assert_eq!(written.grace(), timeout);
    }
}
