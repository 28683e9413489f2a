//! rules.md §4-5: which claims are unused, since when, and what they hold. The query of
//! `report unused`, of the controller's unused gauges and of `explain`'s "unused since": pure
//! (objects + now → rows); reading the cluster and rendering sit around it.

use crate::model::quantity::parse_bytes;
use crate::model::selector::Selector;
use crate::model::{IGNORE_UNUSED, Pod, Pv, Pvc, UNUSED_SINCE};
use crate::rules::in_use::unused_for_since;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Where an "unused since" time came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SinceSource {
    /// Upstream condition `type: Unused` (KEP-5541), written by kube-controller-manager.
    Condition,
    /// volguard's `volguard.io/unused-since` annotation.
    Annotation,
    /// The claim's `creationTimestamp`: the mark predates the claim (restored or re-applied).
    Created,
    /// Not observed yet.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub namespace: String,
    pub name: String,
    pub unused_since: Option<String>,
    pub unused_since_source: SinceSource,
    pub idle_seconds: Option<i64>,
    pub requested: Option<String>,
    pub requested_bytes: Option<u128>,
    pub storage_class: String,
    pub volume: String,
    /// What deleting the claim does to the volume: Delete, Retain, Recycle, or "" when unknown.
    pub reclaim_policy: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Total {
    pub storage_class: String,
    pub count: usize,
    pub requested_bytes: u128,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub items: Vec<Row>,
    pub totals: Vec<Total>,
}

#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// None: all namespaces.
    pub namespace: Option<String>,
    pub selector: Option<Selector>,
    /// Only PVCs idle at least this long (PVCs with an unknown time are left out).
    pub older_than_seconds: Option<i64>,
}

/// KEP-5541: unused means Bound, not terminating, and no non-terminal pod references it.
/// Opted-out claims (`volguard.io/ignore-unused: "true"`) are never reported.
pub fn is_reportable_unused<'a>(pvc: &Pvc, pods: impl IntoIterator<Item = &'a Pod>) -> bool {
    pvc.is_bound()
        && !pvc.metadata.is_terminating()
        && !pvc.metadata.annotation_true(IGNORE_UNUSED)
        && unused_for_since(pvc, pods)
}

/// The time the claim became unused: the later of the upstream `Unused` condition (when True)
/// and volguard's annotation, since either may lag the truth but neither may be earlier than it
/// (rules.md §4); unknown when neither is there. A value that is not a time is not used. Nothing
/// is unused since before it existed: a mark older than `creationTimestamp` (a claim restored from
/// a backup or re-applied from `kubectl get -o yaml`) is clamped to it.
pub fn unused_since(pvc: &Pvc) -> (Option<String>, SinceSource) {
    let (since, source) = unused_since_unclamped(pvc);
    match (since, pvc.metadata.created_at()) {
        (Some(s), Some(created)) if s.parse::<jiff::Timestamp>().is_ok_and(|t| t < created) => {
            (Some(created.to_string()), SinceSource::Created)
        }
        (since, _) => (since, source),
    }
}

fn unused_since_unclamped(pvc: &Pvc) -> (Option<String>, SinceSource) {
    let parse = |t: &str| {
        t.parse::<jiff::Timestamp>()
            .ok()
            .map(|ts| (ts, t.to_string()))
    };
    let condition = pvc
        .condition("Unused")
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_deref())
        .and_then(parse);
    let annotation = pvc.metadata.annotation(UNUSED_SINCE).and_then(parse);
    match (condition, annotation) {
        (Some(c), Some(a)) if a.0 > c.0 => (Some(a.1), SinceSource::Annotation),
        (Some(c), _) => (Some(c.1), SinceSource::Condition),
        (None, Some(a)) => (Some(a.1), SinceSource::Annotation),
        (None, None) => (None, SinceSource::Unknown),
    }
}

pub fn build<P: AsRef<Pvc>, V: AsRef<Pv>, Q: AsRef<Pod>>(
    pvcs: &[P],
    pvs: &[V],
    pods: &[Q],
    filter: &Filter,
    now: jiff::Timestamp,
) -> Report {
    let pvs: HashMap<&str, &Pv> = pvs
        .iter()
        .map(|v| (v.as_ref().metadata.name.as_str(), v.as_ref()))
        .collect();
    // Each pod under every claim it names (one pass), so a claim looks only at its own pods:
    // scanning the namespace's pods for every claim cost the controller's gauges a third of a
    // core at 20,000 pods in one namespace (`make bench-scale`).
    let mut pods_by_claim: HashMap<(&str, String), Vec<&Pod>> = HashMap::new();
    for p in pods {
        let p = p.as_ref();
        for c in crate::rules::claims::claims_of(p) {
            pods_by_claim
                .entry((p.metadata.namespace.as_str(), c.name))
                .or_default()
                .push(p);
        }
    }
    let mut items: Vec<Row> = pvcs
        .iter()
        .filter_map(|pvc| {
            let pvc = pvc.as_ref();
            let m = &pvc.metadata;
            let claim_pods = pods_by_claim
                .get(&(m.namespace.as_str(), m.name.clone()))
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            row(pvc, claim_pods, &pvs, filter, now)
        })
        .collect();
    // Longest idle first; unknown times last; then by namespace/name for a stable order.
    items.sort_by(|a, b| {
        b.idle_seconds
            .unwrap_or(-1)
            .cmp(&a.idle_seconds.unwrap_or(-1))
            .then_with(|| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)))
    });
    let mut totals: BTreeMap<String, Total> = BTreeMap::new();
    for r in &items {
        let t = totals
            .entry(r.storage_class.clone())
            .or_insert_with(|| Total {
                storage_class: r.storage_class.clone(),
                count: 0,
                requested_bytes: 0,
            });
        t.count += 1;
        t.requested_bytes += r.requested_bytes.unwrap_or(0);
    }
    Report {
        items,
        totals: totals.into_values().collect(),
    }
}

/// The claim's row, if it passes the filter and is unused (`pods`: the pods that name it).
fn row(
    pvc: &Pvc,
    pods: &[&Pod],
    pvs: &HashMap<&str, &Pv>,
    filter: &Filter,
    now: jiff::Timestamp,
) -> Option<Row> {
    let m = &pvc.metadata;
    if filter
        .namespace
        .as_deref()
        .is_some_and(|ns| ns != m.namespace)
        || filter
            .selector
            .as_ref()
            .is_some_and(|s| !s.matches(m.labels.as_ref()))
        || !is_reportable_unused(pvc, pods.iter().copied())
    {
        return None;
    }
    let (since, source) = unused_since(pvc);
    let idle = since
        .as_deref()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| (now.as_second() - t.as_second()).max(0));
    if let Some(min) = filter.older_than_seconds
        && idle.is_none_or(|i| i < min)
    {
        return None;
    }
    let volume = pvc.volume_name().unwrap_or_default().to_string();
    let pv = pvs.get(volume.as_str());
    Some(Row {
        namespace: m.namespace.clone(),
        name: m.name.clone(),
        unused_since: since,
        unused_since_source: source,
        idle_seconds: idle,
        requested: pvc.requested_storage().map(str::to_string),
        requested_bytes: pvc.requested_storage().and_then(parse_bytes),
        storage_class: pvc
            .class_name()
            .or_else(|| pv.and_then(|v| v.spec.storage_class_name.as_deref()))
            .unwrap_or_default()
            .to_string(),
        reclaim_policy: pv
            .and_then(|v| v.spec.persistent_volume_reclaim_policy.as_deref())
            .unwrap_or_default()
            .to_string(),
        volume,
    })
}

impl AsRef<Pvc> for Pvc {
    fn as_ref(&self) -> &Pvc {
        self
    }
}
impl AsRef<Pv> for Pv {
    fn as_ref(&self) -> &Pv {
        self
    }
}

#[cfg(test)]
#[path = "unused_tests.rs"]
mod tests;
