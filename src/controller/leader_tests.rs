//! Unit tests of `src/controller/leader.rs`.

use super::*;

fn spec(holder: &str, renewed: i64, duration: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(holder.into()),
        lease_duration_seconds: Some(duration),
        renew_time: Some(MicroTime(Timestamp::from_second(renewed).expect("ts"))),
        ..Default::default()
    }
}

#[test]
fn acquisition_rules() {
    let now = Timestamp::from_second(1_000).expect("ts");
    assert!(can_acquire(None, "me", now), "no lease");
    assert!(can_acquire(Some(&spec("me", 999, 15)), "me", now), "ours");
    assert!(
        !can_acquire(Some(&spec("other", 990, 15)), "me", now),
        "held and fresh"
    );
    assert!(
        can_acquire(Some(&spec("other", 980, 15)), "me", now),
        "expired"
    );
    assert!(can_acquire(Some(&spec("", 999, 15)), "me", now), "released");
}
