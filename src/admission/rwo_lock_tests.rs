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
