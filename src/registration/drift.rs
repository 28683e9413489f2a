//! Is the live registration the one volguard needs? Pure: compares the webhook entries the
//! apiserver holds with `webhooks::expected` and names each difference (rules.md §9
//! "The registration, watched"). cert-manager's cainjector before 1.12 rewrote both
//! configurations without their matchConditions: a Fail entry then sends every pod DELETE to
//! volguard, and every delete in the cluster fails while volguard is not serving. So volguard's
//! configurations no longer carry cainjector's annotation: the controller keeps their `caBundle`
//! from the serving certificate's CA itself (`with_ca`, `repaired`), whatever cert-manager's version.

use super::webhooks::{Entry, FailureMode};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The fields compared, as the metric's `field` label names them.
pub const FIELDS: &[&str] = &[
    "missing",
    "matchConditions",
    "failurePolicy",
    "rules",
    "caBundle",
    "path",
    "failureMode",
];

/// One difference: `webhook` (entry name), `field` (one of `FIELDS`), what was found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Drift {
    pub webhook: String,
    pub field: &'static str,
    pub detail: String,
}

impl Drift {
    /// Whether `--repair-registration` puts this field back (an absent entry is not volguard's
    /// to invent: the chart owns it). `caBundle` is not among them: it is kept whatever the flag
    /// says, when the serving certificate's CA is known (`repaired`), because without it the
    /// apiserver cannot call volguard at all.
    pub fn repairable(&self) -> bool {
        matches!(self.field, "matchConditions" | "failurePolicy" | "rules")
    }
}

/// Whitespace does not change a CEL expression's meaning; the stored text keeps what was sent.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn conditions(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                squash(c["expression"].as_str().unwrap_or_default()),
            )
        })
        .collect()
}

/// What an entry's `rules[]` send, as the apiserver matches them: each (group, version,
/// resource, operation, scope) once, whatever the items' order or grouping (the apiserver stores
/// `scope` defaulted to "*").
fn rules(v: &Value) -> BTreeSet<[String; 5]> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|s| s.as_str().unwrap_or_default().to_string())
            .collect()
    };
    let mut out = BTreeSet::new();
    for r in v.as_array().into_iter().flatten() {
        let scope = r["scope"].as_str().unwrap_or("*").to_string();
        for g in strings(&r["apiGroups"]) {
            for version in strings(&r["apiVersions"]) {
                for resource in strings(&r["resources"]) {
                    for op in strings(&r["operations"]) {
                        out.insert([
                            g.clone(),
                            version.clone(),
                            resource.clone(),
                            op,
                            scope.clone(),
                        ]);
                    }
                }
            }
        }
    }
    out
}

/// Compare `live` (every `webhooks[]` entry of both live configurations, as JSON) with
/// `expected` (`webhooks::expected`). An entry volguard may leave out (`optional`: the RWO
/// entries when the guard is off) is drift only when some but not all of them are present.
pub fn compare(live: &[Value], expected: &[(&str, Value)], optional: &[&str]) -> Vec<Drift> {
    let find = |name: &str| live.iter().find(|e| e["name"] == name);
    let optional_present = optional.iter().filter(|n| find(n).is_some()).count();
    let mut out = Vec::new();
    for (name, want) in expected {
        let drift = |field: &'static str, detail: String| Drift {
            webhook: name.to_string(),
            field,
            detail,
        };
        let Some(have) = find(name) else {
            if !(optional.contains(name) && optional_present == 0) {
                out.push(drift("missing", "no such entry".into()));
            }
            continue;
        };
        let (hc, wc) = (
            conditions(&have["matchConditions"]),
            conditions(&want["matchConditions"]),
        );
        if hc != wc {
            let names: Vec<&str> = hc.iter().map(|(n, _)| n.as_str()).collect();
            out.push(drift(
                "matchConditions",
                if hc.is_empty() {
                    "none (erased: every request of its rules reaches volguard)".into()
                } else {
                    format!("{names:?} differ from volguard's")
                },
            ));
        }
        if have["failurePolicy"] != want["failurePolicy"] {
            out.push(drift(
                "failurePolicy",
                format!(
                    "{} (volguard's: {})",
                    have["failurePolicy"].as_str().unwrap_or("unset"),
                    want["failurePolicy"].as_str().unwrap_or_default()
                ),
            ));
        }
        if rules(&have["rules"]) != rules(&want["rules"]) {
            out.push(drift("rules", "the resources or operations differ".into()));
        }
        let cc = &have["clientConfig"];
        let have_ca = cc["caBundle"].as_str().unwrap_or_default();
        if have_ca.is_empty() {
            out.push(drift(
                "caBundle",
                "empty: the apiserver cannot verify volguard's certificate".into(),
            ));
        } else if want["caBundle"].as_str().is_some_and(|ca| ca != have_ca) {
            // A CA the serving certificate was not signed by: every call fails TLS (a stale
            // copy after the CA was reissued, or someone else's injection).
            out.push(drift(
                "caBundle",
                "not the CA of volguard's serving certificate (its Secret's ca.crt)".into(),
            ));
        }
        // A URL registration (out-of-cluster) names its own path.
        let path = cc["service"]["path"].as_str().or_else(|| {
            cc["url"]
                .as_str()
                .and_then(|u| u.split_once("://"))
                .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        });
        if path != want["path"].as_str() {
            out.push(drift(
                "path",
                format!(
                    "{} (volguard's: {})",
                    path.unwrap_or("none"),
                    want["path"].as_str().unwrap_or_default()
                ),
            ));
        }
    }
    out
}

/// Whether configuration `name` (its entries `entries`) is to be checked against `mine`, by its
/// `FAILURE_MODE_ANNOTATION` (`rendered`). `Ok(None)`: check it (no annotation, or one giving
/// every entry the failure policy `mine` gives). `Ok(Some(_))`: check it, the annotation is
/// unreadable. `Err(_)`: leave it alone, it was rendered for another mode: a rollout in progress
/// (the old controller must not undo the new chart), or this controller's flags are not the chart's.
pub fn rendered_for(
    name: &str,
    rendered: Option<&str>,
    mine: &FailureMode,
    entries: &[Entry],
) -> Result<Option<Drift>, Drift> {
    let Some(rendered) = rendered else {
        return Ok(None);
    };
    let drift = |detail: String| Drift {
        webhook: name.to_string(),
        field: "failureMode",
        detail,
    };
    match FailureMode::from_annotation(rendered) {
        Err(e) => Ok(Some(drift(format!(
            "annotation {:?} unreadable ({e}): checked against this controller's flags",
            super::webhooks::FAILURE_MODE_ANNOTATION
        )))),
        Ok(theirs) if theirs.same_policies(mine, entries) => Ok(None),
        Ok(_) => Err(drift(format!(
            "rendered for {rendered:?}, which gives its entries other failure policies than this \
             controller's --enforcement, --policies-installed and --force-failure-policy-ignore: \
             left alone (a rollout in progress, or the controller's flags differ from the chart's)"
        ))),
    }
}

/// Whether configuration `name` is to be checked against this controller's allow-list `mine`, by
/// its `ALLOW_ANNOTATION` (`rendered`, absent: nobody). `Err(_)`: leave it alone, it was rendered
/// for another allow-list (a rollout in progress, or the controller's flags are not the chart's);
/// repairing it would put back or take out identities the apiserver lets past volguard.
/// `Ok(Some(_))`: unreadable, checked against `mine`.
pub fn allow_rendered_for(
    name: &str,
    rendered: Option<&str>,
    mine: &super::webhooks::AllowList,
) -> Result<Option<Drift>, Drift> {
    let drift = |detail: String| Drift {
        webhook: name.to_string(),
        field: "failureMode",
        detail,
    };
    match super::webhooks::AllowList::from_annotation(rendered) {
        Err(e) => Ok(Some(drift(format!(
            "annotation {:?} unreadable ({e}): checked against this controller's flags",
            super::webhooks::ALLOW_ANNOTATION
        )))),
        Ok(theirs) if theirs == *mine => Ok(None),
        Ok(theirs) => Err(drift(format!(
            "its force-delete entries were rendered for the allow-list {theirs:?}, this controller's \
             --force-delete-allow-user/--force-delete-allow-group say {mine:?}: left alone (a rollout \
             in progress, or the controller's flags differ from the chart's forceDeleteAllow)"
        ))),
    }
}

/// `expected` with each entry's `caBundle`: `ca_pem`, the serving certificate's CA, as the
/// apiserver stores it (base64 of the PEM). `compare` then reports a different CA as drift and
/// `repaired` fills it.
pub fn with_ca(expected: &mut [(&str, Value)], ca_pem: &[u8]) {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    for (_, want) in expected {
        want["caBundle"] = json!(ca);
    }
}

/// `live` with its drift put back from `expected`, entry by entry: the `caBundle` whenever
/// `expected` knows the CA (`with_ca`), and with `repair` (`--repair-registration`) every
/// `repairable` field too; `None` when there is nothing to write.
pub fn repaired(
    live: &Value,
    expected: &[(&str, Value)],
    drifts: &[Drift],
    repair: bool,
) -> Option<Value> {
    let mut out = live.clone();
    let mut changed = false;
    for w in out["webhooks"].as_array_mut().into_iter().flatten() {
        let Some(name) = w["name"].as_str().map(str::to_string) else {
            continue;
        };
        let Some((_, want)) = expected.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        for d in drifts.iter().filter(|d| d.webhook == name) {
            if d.field == "caBundle" {
                if let Some(ca) = want.get("caBundle").filter(|c| c.is_string()) {
                    w["clientConfig"]["caBundle"] = ca.clone();
                    changed = true;
                }
            } else if repair && d.repairable() {
                w[d.field] = want[d.field].clone();
                changed = true;
            }
        }
    }
    changed.then_some(out)
}

/// One line for logs, Events and `/readyz`: entries with the same difference together (an
/// Event's message holds at most 1024 characters; cainjector's erase touches every entry).
pub fn summary(drifts: &[Drift]) -> String {
    let mut groups: Vec<((&str, &str), Vec<&str>)> = Vec::new();
    for d in drifts {
        let key = (d.field, d.detail.as_str());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, names)) => names.push(&d.webhook),
            None => groups.push((key, vec![&d.webhook])),
        }
    }
    let line = groups
        .iter()
        .map(|((field, detail), names)| format!("{} {field}: {detail}", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ");
    clip(&line, 700)
}

/// At most `max` bytes, cut on a character boundary, marked when cut.
fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
#[path = "drift_tests.rs"]
mod tests;
