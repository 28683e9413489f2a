//! Unit tests of `src/runtime/seen.rs`.

use super::*;

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn a_value_held_ages_and_a_new_value_starts_again() {
    let seen: Seen<&str, u32> = Seen::default();
    let first = seen.observe("k", 1, Duration::ZERO);
    assert!(first.held < Duration::from_secs(1));
    let again = seen.observe("k", 1, Duration::ZERO);
    assert!(again.held >= first.held);
    assert_eq!(again.wall, first.wall, "the same origin");
    let changed = seen.observe("k", 2, Duration::ZERO);
    assert!(changed.held < Duration::from_secs(1));
    assert!(changed.wall >= first.wall);
}

#[test]
fn first_sight_may_be_backdated_and_the_wall_time_follows() {
    let seen: Seen<&str, ()> = Seen::default();
    let s = seen.observe("snapshot", (), HOUR);
    assert!(s.held >= HOUR);
    let age = jiff::Timestamp::now().duration_since(s.wall);
    assert!(age >= jiff::SignedDuration::from_secs(3599), "{age:?}");
    // Only the first sight: a later look measures from the same origin.
    assert!(seen.observe("snapshot", (), Duration::ZERO).held >= HOUR);
}

#[test]
fn forgotten_keys_are_new_again() {
    let seen: Seen<String, ()> = Seen::default();
    seen.observe("a".into(), (), HOUR);
    seen.observe("b".into(), (), HOUR);
    seen.forget(&"a".to_string());
    seen.retain(|k| k != "b");
    assert!(seen.is_empty());
    assert!(seen.observe("a".into(), (), Duration::ZERO).held < HOUR);
}

#[test]
fn without_an_idle_time_nothing_is_pruned() {
    let seen: Seen<usize, ()> = Seen::default();
    seen.observe(0, (), HOUR);
    seen.unlooked_for(HOUR);
    for i in 1..=PRUNE_ABOVE {
        seen.observe(i, (), Duration::ZERO);
    }
    assert!(seen.contains(&0));
    assert_eq!(seen.len(), PRUNE_ABOVE + 1);
}
