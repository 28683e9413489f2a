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
