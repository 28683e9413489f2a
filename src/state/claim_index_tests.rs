//! Unit tests of `src/state/claim_index.rs`.

use super::*;
use crate::model::testing;

#[test]
fn add_remove_rebuild() {
    let p = testing::pod("ns", "a").mounting("data");
    let idx = ClaimIndex::default();
    idx.add(&p);
    assert_eq!(idx.pods_naming("ns", "data"), vec!["a".to_string()]);
    assert!(idx.pods_naming("other", "data").is_empty());
    idx.remove(&p);
    assert!(idx.pods_naming("ns", "data").is_empty());
    idx.rebuild([&p]);
    assert_eq!(idx.pods_naming("ns", "data").len(), 1);
}

#[test]
fn a_namespace_goes_with_its_last_claim() {
    let pod = |name: &str, claim: &str| testing::pod("ns", name).mounting(claim);
    let (a, b) = (pod("a", "one"), pod("b", "two"));
    let idx = ClaimIndex::default();
    idx.add(&a);
    idx.add(&b);
    idx.add(&Pod::default()); // no claims: indexes nothing
    idx.remove(&a);
    assert!(idx.pods_naming("ns", "one").is_empty());
    assert_eq!(idx.pods_naming("ns", "two"), vec!["b".to_string()]);
    idx.remove(&b);
    assert!(idx.lock().is_empty(), "empty namespaces are dropped");
}

#[test]
fn a_claim_named_by_several_pods_keeps_each_until_it_goes() {
    let pod = |name: &str| testing::pod("ns", name).mounting("shared");
    let (a, b, c) = (pod("a"), pod("b"), pod("c"));
    let idx = ClaimIndex::default();
    for p in [&a, &b, &c, &b] {
        idx.add(p);
    }
    let mut names = idx.pods_naming("ns", "shared");
    names.sort();
    assert_eq!(names, ["a", "b", "c"], "each pod once, whatever the adds");
    idx.remove(&b);
    idx.remove(&a);
    assert_eq!(idx.pods_naming("ns", "shared"), ["c"]);
    idx.remove(&a); // gone already: nothing changes
    assert_eq!(idx.pods_naming("ns", "shared"), ["c"]);
    idx.add(&a);
    idx.remove(&c);
    assert_eq!(idx.pods_naming("ns", "shared"), ["a"]);
    idx.remove(&a);
    assert!(
        idx.lock().is_empty(),
        "the claim and its namespace go with the last pod"
    );
}
