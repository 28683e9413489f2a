//! Unit tests of `src/state/claim_index.rs`.

use super::*;
use crate::model::{ClaimSource, Volume};

#[test]
fn add_remove_rebuild() {
    let mut p = Pod::default();
    p.metadata.namespace = "ns".into();
    p.metadata.name = "a".into();
    p.spec.volumes.push(Volume {
        name: "v".into(),
        persistent_volume_claim: Some(ClaimSource {
            claim_name: "data".into(),
        }),
        ..Default::default()
    });
    let idx = ClaimIndex::default();
    idx.add(&p);
    assert_eq!(idx.pods_naming("ns", "data"), vec!["a".to_string()]);
    assert!(idx.pods_naming("other", "data").is_empty());
    idx.remove(&p);
    assert!(idx.pods_naming("ns", "data").is_empty());
    idx.rebuild([&p]);
    assert_eq!(idx.pods_naming("ns", "data").len(), 1);
}
