//! Unit tests of `src/registration/resource_rules.rs`.

use super::*;

#[test]
fn a_door_sent_for_several_operations_is_one_resource_with_both() {
    let r = resource_rules(&[On::PvcDelete, On::PvDelete, On::PvcUpdate, On::PvUpdate]);
    assert_eq!(
        r,
        [ResourceRule {
            group: "",
            versions: "v1",
            operations: vec!["UPDATE", "DELETE"],
            resources: vec!["persistentvolumeclaims", "persistentvolumes"],
            scope: "*",
        }]
    );
}

#[test]
fn doors_sent_for_other_operations_or_groups_are_other_items() {
    let r = resource_rules(&[
        On::PodCreate,
        On::PodBinding,
        On::PodUpdate,
        On::NodeFenceCreate,
        On::NodeFenceStatusUpdate,
    ]);
    let items: Vec<(&str, Vec<&str>, Vec<&str>, &str)> = r
        .iter()
        .map(|i| (i.group, i.operations.clone(), i.resources.clone(), i.scope))
        .collect();
    assert_eq!(
        items,
        [
            ("", vec!["CREATE", "UPDATE"], vec!["pods"], "Namespaced"),
            (
                "",
                vec!["CREATE"],
                vec!["pods/binding", "bindings"],
                "Namespaced"
            ),
            (
                "",
                vec!["UPDATE"],
                vec!["pods/ephemeralcontainers", "pods/resize"],
                "Namespaced"
            ),
            ("volguard.io", vec!["CREATE"], vec!["nodefences"], "Cluster"),
            (
                "volguard.io",
                vec!["UPDATE"],
                vec!["nodefences/status"],
                "Cluster"
            ),
        ]
    );
    assert_eq!(r[3].versions, "*");
}

/// What is registered routes back to exactly the requests it was derived from: every
/// (resource, operation) of the items is a door of one of them, and each of their doors is there.
#[test]
fn the_items_send_the_requests_and_nothing_else() {
    for n in 1..=On::ALL.len() {
        let requests = &On::ALL[..n];
        let mut sent = Vec::new();
        for i in resource_rules(requests) {
            for r in &i.resources {
                for op in &i.operations {
                    sent.push((i.group, i.versions, *r, *op));
                }
            }
            // An item's scope is its resources' own, or `*` when they differ.
            let scopes: Vec<&str> = i
                .resources
                .iter()
                .map(|r| {
                    let on = requests.iter().find(|on| on.doors().resources.contains(r));
                    on.map_or("", |on| on.doors().scope.as_str())
                })
                .collect();
            let one = scopes.iter().all(|s| *s == scopes[0]);
            assert_eq!(i.scope, if one { scopes[0] } else { "*" }, "{i:?}");
        }
        let mut want: Vec<_> = requests
            .iter()
            .flat_map(|on| {
                let d = on.doors();
                d.resources
                    .iter()
                    .map(move |r| (d.group, d.versions, *r, d.operation))
            })
            .collect();
        sent.sort();
        want.sort();
        want.dedup();
        assert_eq!(sent, want, "{requests:?}");
    }
}
