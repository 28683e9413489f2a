//! Unit tests of `src/rules/upstream/mod.rs`.

use super::*;

#[test]
fn the_table_names_each_predicate_once_and_a_go_file() {
    let mut names: Vec<_> = UPSTREAM.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), UPSTREAM.len());
    for (name, upstream) in UPSTREAM {
        assert!(upstream.starts_with("pkg/"), "{name}: {upstream}");
        assert!(upstream.contains(".go: func "), "{name}: {upstream}");
    }
}
