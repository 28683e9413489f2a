//! Unit tests of `src/state/lock_clock.rs`.

use super::*;

#[test]
fn a_new_lock_is_young_a_state_files_is_old_and_a_changed_lock_or_a_use_starts_again() {
    let live = LockClock::live();
    assert!(live.quiet_for("ns", "c", "a", false) < BIND_GRACE);
    assert!(live.quiet_for("ns", "c", "a", false) < BIND_GRACE);
    let offline = LockClock::offline([("ns", "c", "a")]);
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
