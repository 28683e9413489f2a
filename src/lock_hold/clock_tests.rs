//! Unit tests of `src/lock_hold/clock.rs`.

use super::*;
use crate::rules::rwo_lock::DEFAULT_GRACE as BIND_GRACE;
use crate::runtime::seen::PRUNE_ABOVE;

#[test]
fn a_new_lock_is_young_a_state_files_is_old_and_a_changed_lock_or_a_use_starts_again() {
    let live = LockClock::live(BIND_GRACE);
    assert!(live.quiet_for("ns", "c", "a", false) < BIND_GRACE);
    assert!(live.quiet_for("ns", "c", "a", false) < BIND_GRACE);
    let offline = LockClock::offline([("ns", "c", "a")], BIND_GRACE);
    assert!(offline.quiet_for("ns", "c", "a", false) >= BIND_GRACE);
    assert!(
        offline.quiet_for("ns", "other", "a", false) < BIND_GRACE,
        "not in the file"
    );
    offline.wrote("ns", "c", "b");
    assert!(
        offline.quiet_for("ns", "c", "b", false) < BIND_GRACE,
        "written here: young"
    );
    assert!(
        offline.quiet_for("ns", "c", "a", false) < BIND_GRACE,
        "a value seen anew is young"
    );
    assert_eq!(
        offline.quiet_for("ns", "c", "a", true),
        Duration::ZERO,
        "a use"
    );
}

/// A lock watched while thousands of others come and go keeps its age: pruning went by first
/// sight, dropped every lock a grace old whenever more than 4,096 were watched, and so restarted
/// the very ones about to be judged (at 5,000 nodes, binds refused for minutes).
#[test]
fn a_lock_still_asked_about_keeps_its_age_while_thousands_of_others_are_watched() {
    let clock = LockClock::offline([("ns", "held", "a")], BIND_GRACE);
    for i in 0..PRUNE_ABOVE + 100 {
        clock.quiet_for("ns", &format!("c{i}"), "x", false);
    }
    assert!(
        clock.quiet_for("ns", "held", "a", false) >= BIND_GRACE,
        "the lock asked about a moment ago was dropped and counts as new"
    );
}

/// What nobody asked about for a grace is dropped once the table is large, and counts as new when
/// seen again (holds longer, never less).
#[test]
fn locks_nobody_asked_about_for_a_grace_are_dropped_and_young_when_seen_again() {
    let clock = LockClock::offline([("ns", "old", "a")], BIND_GRACE);
    clock.seen.unlooked_for(BIND_GRACE);
    for i in 0..PRUNE_ABOVE {
        clock.quiet_for("ns", &format!("c{i}"), "x", false);
    }
    assert!(!clock.seen.contains(&("ns".into(), "old".into())));
    assert_eq!(clock.seen.len(), PRUNE_ABOVE, "the young ones stay");
    assert!(clock.quiet_for("ns", "old", "a", false) < BIND_GRACE);
}

/// The controller's clock keeps a lock nobody asked about for a grace, and for a bind's tidy time
/// too: it looks at a quiet bind's lock again only then, and a lock dropped and seen again would
/// wait once more, every time.
#[test]
fn the_controllers_clock_keeps_a_lock_past_its_tidy_time_while_thousands_come_and_go() {
    use crate::rules::rwo_lock::BIND_LOCK_TIDY;
    let clock = LockClock::tidying(BIND_GRACE);
    // Seen quiet for the tidy time, last asked about more than a grace ago.
    clock.observe("ns", "old", "a", BIND_LOCK_TIDY);
    clock.seen.unlooked_for(BIND_LOCK_TIDY);
    for i in 0..PRUNE_ABOVE {
        clock.quiet_for("ns", &format!("c{i}"), "x", false);
    }
    assert!(
        clock.quiet_for("ns", "old", "a", false) >= BIND_LOCK_TIDY,
        "a lock waiting for its tidy time was dropped and counts as new"
    );
}

/// A longer `--apiserver-request-timeout` is the grace a state file's locks count as past and the
/// age a reader judges by; a shorter one keeps the default minute.
#[test]
fn the_clock_judges_ages_by_the_apiservers_request_timeout_never_under_a_minute() {
    let long = Duration::from_secs(180);
    let clock = LockClock::offline([("ns", "c", "a")], long);
    let quiet = clock.quiet_for("ns", "c", "a", false);
    assert!(quiet >= long, "a state file's lock is a whole grace old");
    let lock = plain_lock();
    assert!(clock.age(quiet, &lock).past_grace());
    assert!(!clock.age(Duration::from_secs(90), &lock).past_grace());
    assert_eq!(clock.grace(), long);
    // A flag beyond any apiserver's (here u64::MAX seconds) is cut to a day, and nothing
    // overflows building the controller's clock.
    let huge = LockClock::tidying(Duration::from_secs(u64::MAX));
    assert_eq!(huge.grace(), Duration::from_secs(86_400));
    let short = LockClock::live(Duration::from_secs(10));
    assert_eq!(short.age(Duration::ZERO, &lock).grace, BIND_GRACE);
    assert!(!short.age(Duration::from_secs(30), &lock).past_grace());
}

fn plain_lock() -> RwoLock {
    RwoLock::parse(r#"{"node":"n1","pod":"p","at":"2026-11-23T09:00:00Z"}"#).expect("lock")
}

/// A process not given `--apiserver-request-timeout` (the controller, or a replica rolled out
/// without it) judges a lock by the longer grace its writer wrote into it.
#[test]
fn a_clock_waits_the_longer_grace_a_lock_asks() {
    let default = LockClock::tidying(BIND_GRACE);
    let asked = plain_lock().with_grace(Duration::from_secs(300));
    let age = default.age(Duration::from_secs(120), &asked);
    assert_eq!(age.grace, Duration::from_secs(300));
    assert!(!age.past_grace());
    assert!(default.age(Duration::from_secs(300), &asked).past_grace());
    // A clock's own longer grace is not shortened by a lock that asks less.
    let long = LockClock::live(Duration::from_secs(240));
    assert_eq!(
        long.age(Duration::ZERO, &plain_lock()).grace,
        Duration::from_secs(240)
    );
}
