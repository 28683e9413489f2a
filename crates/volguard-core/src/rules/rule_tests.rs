//! Unit tests of `src/rules/rule.rs`.

use super::*;

#[test]
fn names_round_trip_and_paths_are_distinct() {
    let mut paths = std::collections::HashSet::new();
    for r in Rule::ALL {
        assert_eq!(Rule::from_name(r.name()), Some(r));
        // Paths are derived from the names (`row!`): distinct names, distinct paths.
        assert!(paths.insert(r.path()), "{r} shares a path");
    }
    assert_eq!(Rule::from_name("nope"), None);
}

#[test]
fn routes_are_the_tables() {
    for (i, on) in On::ALL.into_iter().enumerate() {
        assert_eq!(on as usize, i);
        let want: Vec<Rule> = TABLE
            .iter()
            .filter(|d| d.on.contains(&on))
            .map(|d| d.rule)
            .collect();
        assert_eq!(on.rules(), want.as_slice(), "{on:?}");
        assert!(!want.is_empty(), "no rule judges {on:?}");
    }
    assert_eq!(
        On::PodCreate.rules(),
        [
            Rule::PodOnTerminatingClaim,
            Rule::RwoSingleNode,
            Rule::RwoPlacementHint,
            Rule::ConfirmationStamp,
            Rule::Proof,
        ]
    );
}

#[test]
fn table_rows_are_in_rule_order() {
    for (i, d) in TABLE.iter().enumerate() {
        assert_eq!(d.rule as usize, i, "{} is out of place", d.name);
        assert!(!d.webhooks.is_empty(), "{} has no webhook entry", d.name);
        assert!(!d.on.is_empty(), "{} judges no request", d.name);
    }
}
