//! Unit tests of `src/state/watch.rs`: what a watch's items do to its map's `Mark`.

use super::*;
use crate::model::Pod;

fn pod(name: &str, version: &str) -> Result<Event<Decoded<Pod>>, watcher::Error> {
    let d: Decoded<Pod> = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"),
                     "resourceVersion": version}
    }))
    .expect("pod");
    Ok(Event::Apply(d))
}

fn listed(name: &str, version: &str) -> Result<Event<Decoded<Pod>>, watcher::Error> {
    match pod(name, version) {
        Ok(Event::Apply(d)) => Ok(Event::InitApply(d)),
        other => other,
    }
}

/// A line of the watch that did not decode: kube's client reports it and reads on.
fn undecodable() -> Result<Event<Decoded<Pod>>, watcher::Error> {
    let e = serde_json::from_str::<u8>("not a pod").expect_err("bad json");
    Err(watcher::Error::WatchFailed(kube::Error::SerdeError(e)))
}

/// A watch that could not start: resumed from the last version received, nothing skipped.
fn not_started() -> Result<Event<Decoded<Pod>>, watcher::Error> {
    Err(watcher::Error::WatchStartFailed(
        kube::Error::LinesCodecMaxLineLengthExceeded,
    ))
}

#[test]
fn a_listing_vouches_for_its_newest_version_then_each_event_for_its_own() {
    let map = ObjectMap::<Pod>::default();
    let mut l = Listing::default();
    let mut changes = 0;
    let mut notify = |_: Change<Pod>| changes += 1;
    assert!(!l.on(Ok(Event::Init), &map, &mut notify));
    assert!(!l.on(listed("a", "30"), &map, &mut notify));
    assert!(!l.on(listed("b", "20"), &map, &mut notify));
    assert!(
        map.mark.at_least(1).is_none(),
        "nothing vouched for while buffering"
    );
    assert!(l.on(Ok(Event::InitDone), &map, &mut notify), "synced");
    assert!(map.mark.at_least(30).is_some() && map.mark.at_least(31).is_none());
    assert!(!l.on(pod("c", "45"), &map, &mut notify));
    assert!(map.mark.at_least(45).is_some());
    assert!(!l.on(not_started(), &map, &mut notify));
    assert!(
        map.mark.at_least(45).is_some(),
        "a watch resumed skips nothing"
    );
    assert_eq!(changes, 2, "the relist and the apply");
    assert_eq!(map.len(), 3);
}

/// A skipped event (adversary review): the map may lack a pod the mark would vouch for, so
/// nothing is vouched for until the next listing, whatever arrives meanwhile.
#[test]
fn a_skipped_event_vouches_for_nothing_until_the_next_listing() {
    let map = ObjectMap::<Pod>::default();
    let mut l = Listing::default();
    let mut notify = |_: Change<Pod>| {};
    for ev in [Ok(Event::Init), listed("a", "30"), Ok(Event::InitDone)] {
        l.on(ev, &map, &mut notify);
    }
    let before = map.mark.at_least(30).expect("vouched");
    l.on(undecodable(), &map, &mut notify);
    assert!(
        !map.mark.still(before),
        "a read sampled before the skip is not answered"
    );
    l.on(pod("c", "50"), &map, &mut notify);
    assert!(
        map.mark.at_least(1).is_none(),
        "after a skip: {:?}",
        map.mark
    );
    assert!(
        map.get("ns", "c").is_some(),
        "the cache still keeps what it reads"
    );
    // A listing with a skipped item vouches for nothing either.
    for ev in [
        Ok(Event::Init),
        listed("a", "60"),
        undecodable(),
        Ok(Event::InitDone),
    ] {
        l.on(ev, &map, &mut notify);
    }
    assert!(map.mark.at_least(1).is_none());
    // A whole listing does.
    for ev in [Ok(Event::Init), listed("a", "70"), Ok(Event::InitDone)] {
        l.on(ev, &map, &mut notify);
    }
    assert!(map.mark.at_least(70).is_some());
}
