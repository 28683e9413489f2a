//! The webhook calls a churn made, by webhook entry, and how many of them volguard answered from
//! the request alone ("allowed", no patch, no warning, nothing read: a `matchCondition` could have
//! kept the call from being made). Calls are the apiserver's count
//! (`apiserver_admission_webhook_admission_duration_seconds_count{name}`); the answers are
//! serve's (`volguard_admission_unread_answers_total{endpoint,kind,operation}`), attributed to
//! entries by the registered configurations themselves (each entry's path, resources and
//! operations), so no entry is listed here by hand.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhookConfiguration,
};
use kube::api::{Api, ListParams};
use std::collections::{BTreeMap, BTreeSet};

/// What one call is, as serve counts it: its path's rule, the object's kind, the operation.
type Key = (String, String, String);

/// One webhook entry of volguard's, and the calls it can make.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    keys: BTreeSet<Key>,
}

/// Volguard's registered entries (`*.volguard.io`), read from the apiserver.
pub async fn entries(c: &kube::Client) -> Vec<Entry> {
    let lp = ListParams::default();
    // Both kinds of configuration as (name, client config, rules): the same fields, two types.
    let mut all = Vec::new();
    for m in Api::<MutatingWebhookConfiguration>::all(c.clone())
        .list(&lp)
        .await
        .expect("list mutating webhook configurations")
    {
        for w in m.webhooks.into_iter().flatten() {
            all.push((w.name, w.client_config, w.rules));
        }
    }
    for v in Api::<ValidatingWebhookConfiguration>::all(c.clone())
        .list(&lp)
        .await
        .expect("list validating webhook configurations")
    {
        for w in v.webhooks.into_iter().flatten() {
            all.push((w.name, w.client_config, w.rules));
        }
    }
    let mut out: Vec<Entry> = all
        .into_iter()
        .map(|(name, config, rules)| {
            let path = config.service.and_then(|s| s.path);
            entry(&name, path, config.url.as_deref(), rules.as_deref())
        })
        .collect();
    out.retain(|e| e.name.ends_with(".volguard.io"));
    out
}

fn entry(
    name: &str,
    service_path: Option<String>,
    url: Option<&str>,
    rules: Option<&[RuleWithOperations]>,
) -> Entry {
    let path = service_path
        .or_else(|| {
            url.and_then(|u| u.split_once("://"))
                .and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].to_string()))
        })
        .unwrap_or_default();
    let endpoint = path.rsplit('/').next().unwrap_or_default().to_string();
    let mut keys = BTreeSet::new();
    for r in rules.into_iter().flatten() {
        for resource in r.resources.iter().flatten() {
            let Some(kind) = kind_of(resource) else {
                continue;
            };
            for op in r.operations.iter().flatten() {
                let ops = match op.as_str() {
                    "*" => vec!["CREATE", "UPDATE", "DELETE", "CONNECT"],
                    one => vec![one],
                };
                for op in ops {
                    keys.insert((endpoint.clone(), kind.to_string(), op.to_string()));
                }
            }
        }
    }
    Entry {
        name: name.to_string(),
        keys,
    }
}

/// The kind an AdmissionReview carries for a resource (and subresource) a rule names.
fn kind_of(resource: &str) -> Option<&'static str> {
    Some(match resource.split('/').collect::<Vec<_>>()[..] {
        ["pods", "binding"] | ["bindings"] => "Binding",
        ["pods", "eviction"] => "Eviction",
        ["pods", ..] => "Pod",
        ["persistentvolumeclaims", ..] => "PersistentVolumeClaim",
        ["persistentvolumes", ..] => "PersistentVolume",
        ["nodes", ..] => "Node",
        ["namespaces", ..] => "Namespace",
        ["nodefences", ..] => "NodeFence",
        _ => return None,
    })
}

/// Serve's unread answers by call, from its metrics text.
pub fn unread(text: &str) -> BTreeMap<Key, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("volguard_admission_unread_answers_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let get = |k: &str| {
            super::load::label(labels, k)
                .unwrap_or_default()
                .to_string()
        };
        let v: f64 = value.trim().parse().unwrap_or(0.0);
        *out.entry((get("endpoint"), get("kind"), get("operation")))
            .or_insert(0.0) += v;
    }
    out
}

/// The apiserver's calls to each `*.volguard.io` entry, from its metrics text.
pub fn apiserver_calls(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) =
            line.strip_prefix("apiserver_admission_webhook_admission_duration_seconds_count{")
        else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Some(name) = super::load::label(labels, "name").filter(|n| n.ends_with(".volguard.io"))
        else {
            continue;
        };
        *out.entry(name.to_string()).or_insert(0.0) += value.trim().parse::<f64>().unwrap_or(0.0);
    }
    out
}

/// Calls and unread answers per entry, per 1,000 churned pods. Entries whose calls serve cannot
/// tell apart (one path, kind and operation registered by two entries) are reported together,
/// under their names joined by `+`.
pub fn per_1000_pods(
    entries: &[Entry],
    calls: (&BTreeMap<String, f64>, &BTreeMap<String, f64>),
    unread: (&BTreeMap<Key, f64>, &BTreeMap<Key, f64>),
    pods: usize,
) -> BTreeMap<String, (f64, f64)> {
    // Group entries that share a key.
    let mut groups: Vec<(Vec<&Entry>, BTreeSet<Key>)> = Vec::new();
    for e in entries {
        let mut merged = (vec![e], e.keys.clone());
        groups.retain(|(members, keys)| {
            if keys.is_disjoint(&merged.1) {
                return true;
            }
            merged.0.extend(members.iter().copied());
            merged.1.extend(keys.iter().cloned());
            false
        });
        groups.push(merged);
    }
    let per = 1000.0 / (pods.max(1) as f64);
    let delta = |m: (&BTreeMap<String, f64>, &BTreeMap<String, f64>), k: &str| {
        m.1.get(k).copied().unwrap_or(0.0) - m.0.get(k).copied().unwrap_or(0.0)
    };
    groups
        .into_iter()
        .map(|(members, keys)| {
            let mut names: Vec<&str> = members.iter().map(|e| e.name.as_str()).collect();
            names.sort();
            let made: f64 = names.iter().map(|n| delta(calls, n)).sum();
            let noop: f64 = keys
                .iter()
                .map(|k| {
                    unread.1.get(k).copied().unwrap_or(0.0)
                        - unread.0.get(k).copied().unwrap_or(0.0)
                })
                .sum();
            (names.join("+"), (made * per, noop * per))
        })
        .collect()
}
