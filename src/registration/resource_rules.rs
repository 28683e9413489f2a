//! `rules[]` of a webhook entry (a policy's `resourceRules[]`), derived from the requests it sends:
//! each `On` declares its doors once (`rules::rule::Doors`), so what is registered is what routing
//! judges, and nothing restates a resource by hand.

use crate::rules::rule::On;
use serde_json::{Value, json};

/// One item of `rules[]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRule {
    pub group: &'static str,
    pub versions: &'static str,
    pub operations: Vec<&'static str>,
    pub resources: Vec<&'static str>,
    pub scope: &'static str,
}

/// The order operations are listed in.
const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/// The items that send exactly `requests`, and no other: each door with every operation it is
/// sent for; doors of one group sent for the same operations share an item (scope `*` when their
/// scopes differ). Items and resources in the order `requests` first names them.
pub fn resource_rules(requests: &[On]) -> Vec<ResourceRule> {
    // Each door (group, versions, resource, scope) with its operations.
    let mut doors: Vec<(
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        Vec<&str>,
    )> = Vec::new();
    for on in requests {
        let d = on.doors();
        for r in d.resources {
            let at = doors
                .iter()
                .position(|(g, v, res, _, _)| *g == d.group && *v == d.versions && res == r);
            let at = at.unwrap_or_else(|| {
                doors.push((d.group, d.versions, *r, d.scope.as_str(), Vec::new()));
                doors.len() - 1
            });
            let ops = &mut doors[at].4;
            if !ops.contains(&d.operation) {
                ops.push(d.operation);
            }
        }
    }
    let mut out: Vec<ResourceRule> = Vec::new();
    for (group, versions, resource, scope, mut ops) in doors {
        ops.sort_by_key(|o| OPERATIONS.iter().position(|k| k == o));
        match out
            .iter_mut()
            .find(|i| i.group == group && i.versions == versions && i.operations == ops)
        {
            Some(item) => {
                item.resources.push(resource);
                if item.scope != scope {
                    item.scope = "*";
                }
            }
            None => out.push(ResourceRule {
                group,
                versions,
                operations: ops,
                resources: vec![resource],
                scope,
            }),
        }
    }
    out
}

impl ResourceRule {
    /// As the apiserver stores it.
    pub fn object(&self) -> Value {
        json!({
            "apiGroups": [self.group],
            "apiVersions": [self.versions],
            "operations": self.operations,
            "resources": self.resources,
            "scope": self.scope,
        })
    }
}

#[cfg(test)]
#[path = "resource_rules_tests.rs"]
mod tests;
