//! Unit tests of `src/controller/leader.rs`.

use super::*;
use std::time::Instant;

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
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert!(can_acquire(None, "me", t0), "no lease");
    let ours = Observed::observe(None, &spec("me", 999, 15), t0);
    assert!(can_acquire(Some(&ours), "me", t0), "ours");
    let other = Observed::observe(None, &spec("other", 990, 15), t0);
    assert!(!can_acquire(Some(&other), "me", at(10)), "held and fresh");
    assert!(
        can_acquire(Some(&other), "me", at(16)),
        "unchanged for longer than its duration"
    );
    let released = Observed::observe(None, &spec("", 999, 15), t0);
    assert!(can_acquire(Some(&released), "me", t0), "released");
}

#[test]
fn expiry_ignores_the_holders_clock() {
    let t0 = Instant::now();
    // Another holder whose clock runs an hour behind ours writes a renewTime that looks long
    // expired by our wall clock. What counts is that the record keeps changing.
    let skewed = |renewed: i64| spec("other", renewed, 15);
    let mut seen = Observed::observe(None, &skewed(-3600), t0);
    for i in 1..=10u64 {
        let now = t0 + Duration::from_secs(i * 10);
        seen = Observed::observe(Some(seen), &skewed(-3600 + (i as i64) * 10), now);
        assert!(
            !can_acquire(Some(&seen), "me", now),
            "renewing holder at {i}"
        );
    }
    // The same record seen again does not restart the clock: it expires 15 s after it last changed.
    let last = t0 + Duration::from_secs(100);
    let again = Observed::observe(
        Some(seen),
        &skewed(-3600 + 100),
        last + Duration::from_secs(14),
    );
    assert!(!can_acquire(
        Some(&again),
        "me",
        last + Duration::from_secs(14)
    ));
    assert!(can_acquire(
        Some(&again),
        "me",
        last + Duration::from_secs(16)
    ));
    // A renewTime far in the future (clock ahead) does not keep a dead holder alive either.
    let ahead = Observed::observe(None, &spec("other", i64::from(i32::MAX), 15), t0);
    assert!(can_acquire(
        Some(&ahead),
        "me",
        t0 + Duration::from_secs(16)
    ));
}

#[test]
fn renew_deadline_sits_between_retry_and_duration() {
    let cfg = |retry, deadline, duration| LeaseConfig {
        name: "l".into(),
        namespace: "ns".into(),
        identity: "me".into(),
        duration: Duration::from_secs(duration),
        retry: Duration::from_secs(retry),
        renew_deadline: Duration::from_secs(deadline),
    };
    assert!(cfg(2, 10, 15).validate().is_ok());
    assert!(cfg(2, 15, 15).validate().is_err(), "deadline = duration");
    assert!(cfg(10, 10, 15).validate().is_err(), "retry = deadline");
}

/// SPEC 4: a renewal that hangs (an apiserver that accepts the connection and never answers;
/// kube's own read timeout is minutes) ends leadership at the renew deadline, well before the
/// lease could expire in a follower's eyes. Time is paused: the deadline, not the machine's
/// speed, decides when `hold` returns.
#[tokio::test(start_paused = true)]
async fn a_hanging_renewal_ends_leadership_at_the_deadline() {
    // A socket that accepts and never answers: no API server, just silence.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let _keep = std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    let config = kube::Config::new(format!("http://{addr}").parse().expect("uri"));
    let client = kube::Client::try_from(config).expect("client");
    let cfg = LeaseConfig {
        name: "l".into(),
        namespace: "ns".into(),
        identity: "me".into(),
        duration: Duration::from_secs(15),
        retry: Duration::from_secs(2),
        renew_deadline: Duration::from_secs(10),
    };
    let view =
        crate::state::View::from_store(client, Default::default(), crate::state::Needs::default());
    let writer = view.writer("volguard-controller", "me".into());
    let elector = Elector::new(view, writer, cfg);
    let start = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(14), elector.hold())
        .await
        .expect("hold() must give up before the lease (15 s) expires");
    let held_for = start.elapsed();
    assert!(
        held_for >= Duration::from_secs(10) && held_for < Duration::from_secs(11),
        "gave up after {held_for:?}, want at the 10 s renew deadline"
    );
}
