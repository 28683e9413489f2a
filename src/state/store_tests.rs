//! Unit tests of `src/state/store.rs`.

use super::*;

#[test]
fn namespaces_scope_names() {
    let m: ObjectMap<Pvc> = ObjectMap::default();
    let a = crate::model::testing::pvc("a", "data");
    let mut b = a.clone();
    b.metadata.namespace = "b".into();
    m.apply(a);
    m.apply(b);
    assert_eq!(m.len(), 2);
    assert!(m.get("a", "data").is_some());
    assert!(m.get("c", "data").is_none());
    assert!(m.delete("a", "data").is_some());
    assert!(m.get("a", "data").is_none());
    assert_eq!(m.in_namespace("b").len(), 1);
}

/// The cache keeps when it first held a claim's lock value while the value stays, and starts
/// again for a new one (a placement judges the lock's age by it: rules.md §2f). Whole seconds
/// rounded up, so the test waits two.
#[test]
fn a_claims_lock_keeps_the_time_the_cache_first_held_it_until_it_changes() {
    let locked = |lock: &str| {
        let mut pvc = crate::model::testing::pvc("ns", "data");
        pvc.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(crate::rules::rwo_lock::RWO_LOCK, lock);
        pvc
    };
    let map: ObjectMap<Pvc> = ObjectMap::default();
    map.apply(locked("a"));
    let first = map.get("ns", "data").expect("cached");
    assert!(first.lock_seen().is_seen());
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let held = |map: &ObjectMap<Pvc>| {
        map.get("ns", "data")
            .and_then(|p| p.lock_seen().ago())
            .expect("seen")
    };
    map.apply(locked("a"));
    assert!(
        held(&map) >= std::time::Duration::from_secs(1),
        "the same lock counts from its first sight: {:?}",
        held(&map)
    );
    map.replace(vec![locked("a")]);
    assert!(
        held(&map) >= std::time::Duration::from_secs(1),
        "a relist keeps it"
    );
    map.apply(locked("b"));
    assert!(
        held(&map) < std::time::Duration::from_secs(1),
        "a new lock counts from now"
    );
    map.replace(vec![locked("c")]);
    assert!(held(&map) < std::time::Duration::from_secs(1));
}

/// What the pod watch saw of a pod: by its UID, whatever its name now holds.
#[test]
fn a_pod_is_seen_stored_then_gone_by_its_uid() {
    let store = Store::default();
    let pod = crate::model::testing::pod("ns", "web-0").with_uid("u-1");
    store.pods.apply(pod);
    assert_eq!(store.pod_seen("ns", "web-0", "u-1"), PodSeen::Stored);
    // Another UID under that name, or no UID at all, was never seen.
    assert_eq!(store.pod_seen("ns", "web-0", "u-2"), PodSeen::Unseen);
    assert_eq!(store.pod_seen("ns", "web-0", ""), PodSeen::Unseen);
    store.pods.delete("ns", "web-0");
    store.gone_pods.note("u-1");
    assert_eq!(store.pod_seen("ns", "web-0", "u-1"), PodSeen::Gone);
    // Its name taken again by another UID: the first is still gone.
    store
        .pods
        .apply(crate::model::testing::pod("ns", "web-0").with_uid("u-3"));
    assert_eq!(store.pod_seen("ns", "web-0", "u-1"), PodSeen::Gone);
    assert_eq!(store.pod_seen("ns", "web-0", "u-3"), PodSeen::Stored);
}
