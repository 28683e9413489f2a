//! Unit tests of `src/server/listener.rs`.

use super::*;

#[test]
fn a_connection_earns_time_by_requests_not_bytes() {
    let limits = Limits {
        first_request_timeout: Duration::from_millis(0),
        idle_timeout: Duration::from_secs(3600),
        ..Limits::default()
    };
    let a = Activity::new();
    assert_eq!(a.expired(&limits), Some("no_request"));
    a.in_flight.fetch_add(1, Ordering::AcqRel);
    a.requests.fetch_add(1, Ordering::AcqRel);
    assert_eq!(a.expired(&limits), None, "a request in flight");
    drop(InFlight(a.clone()));
    assert_eq!(a.expired(&limits), None, "served one: idle timeout applies");
    let quick = Limits {
        idle_timeout: Duration::from_millis(0),
        ..limits
    };
    assert_eq!(a.expired(&quick), Some("idle"));
}

#[test]
fn a_peer_holds_at_most_its_share_of_slots() {
    let peers = Arc::new(Peers::default());
    let ip: IpAddr = [10, 0, 0, 1].into();
    let a = peers.take(ip, 2).expect("first");
    let _b = peers.take(ip, 2).expect("second");
    assert!(peers.take(ip, 2).is_none(), "third refused");
    assert!(
        peers.take([10, 0, 0, 2].into(), 2).is_some(),
        "another peer"
    );
    drop(a);
    assert!(peers.take(ip, 2).is_some(), "a slot given back");
}
