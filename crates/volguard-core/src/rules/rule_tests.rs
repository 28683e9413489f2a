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
        assert!(!d.on.is_empty(), "{} judges no request", d.name);
    }
}

#[test]
fn each_door_routes_to_its_request_and_to_no_other() {
    for on in On::ALL {
        let d = on.doors();
        assert!(!d.resources.is_empty(), "{on:?} has no door");
        for r in d.resources {
            let sub = r.split_once('/').map(|(_, s)| s);
            assert_eq!(
                Target::of(d.kind.0, d.kind.1, sub, d.operation),
                Target::On(on),
                "{on:?} by {r}"
            );
        }
    }
    // Bindings come by both doors; a pod's metadata by its update and two subresources.
    assert_eq!(
        Target::of("", "Binding", None, "CREATE"),
        Target::On(On::PodBinding)
    );
    assert_eq!(
        Target::of("", "Pod", Some("resize"), "UPDATE"),
        Target::On(On::PodUpdate)
    );
    // The Eviction's kind is policy's; the same kind in the core group is no request of ours.
    assert_eq!(
        Target::of("policy", "Eviction", Some("eviction"), "CREATE"),
        Target::On(On::PodEviction)
    );
    assert_eq!(
        Target::of("", "Eviction", Some("eviction"), "CREATE"),
        Target::Unknown
    );
}

#[test]
fn a_known_kind_by_another_door_is_no_rules_and_an_unknown_kind_a_mistake() {
    for (group, kind, sub, op) in [
        ("", "Pod", Some("exec"), "CONNECT"),
        ("", "Pod", Some("binding"), "UPDATE"),
        ("", "Node", Some("proxy"), "CONNECT"),
        ("", "PersistentVolumeClaim", Some("status"), "CREATE"),
        ("volguard.io", "NodeFence", None, "DELETE"),
        ("policy", "Eviction", None, "DELETE"),
    ] {
        assert_eq!(
            Target::of(group, kind, sub, op),
            Target::Other,
            "{kind} {sub:?} {op}"
        );
        assert!(Target::Other.rules().is_empty());
    }
    assert_eq!(
        Target::of("example.com", "Widget", None, "CREATE"),
        Target::Unknown
    );
    assert_eq!(Target::of("apps", "Pod", None, "CREATE"), Target::Unknown);
}
