//! The checker: a verdict over a recorded history, never assertions in the run (etcd's
//! robustness tests and Jepsen work the same way). Pure: the history is data, written to
//! `target/robustness/SEED/history.json`, and `check` can be run on it again.

use super::support::records;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Every time is in seconds of the machine's uptime (`/proc/uptime`): the writers' clock, shared
/// by every real node (one kernel), and the run's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct History {
    pub seed: u64,
    pub with_volguard: bool,
    pub started_at: f64,
    pub ended_at: f64,
    /// When the last fault healed: liveness is judged from here.
    pub last_heal_at: f64,
    pub faults: Vec<FaultRun>,
    pub workloads: Vec<Workload>,
    /// Every release seen by the watches: a node given the out-of-service taint, a pod removed
    /// from the API while its node was not Ready (a force delete, PodGC's or anyone's).
    pub releases: Vec<Release>,
    /// Every NodeFence incident at the end of the run.
    pub incidents: Vec<Incident>,
    /// Each time a node was seen turning NotReady (kcm's detection).
    #[serde(default)]
    pub not_ready: Vec<NotReady>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NotReady {
    pub at: f64,
    pub node: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultRun {
    pub kind: String,
    pub target: String,
    pub start: f64,
    pub end: f64,
    /// What the fault's action met (allowed, refused and why, skipped).
    #[serde(default)]
    pub outcome: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    /// The claim is ReadWriteOnce: two nodes writing it at once is a violation.
    pub rwo: bool,
    /// The volume's log as it is at the end (`None`: gone).
    pub log: Option<String>,
    /// Every (writer, seq) an earlier read of the log found.
    pub seen: Vec<(String, u64)>,
    /// After the last fault heals, it must write again within this.
    pub limit_seconds: f64,
    /// From the creation of its first pod to that pod's first record, on healthy nodes (part of a
    /// recovery's limit).
    pub start_seconds: f64,
    /// Its pods' toleration of an unreachable node, which volguard waits out before it fences.
    #[serde(default)]
    pub forgive_seconds: f64,
    /// Its owner replaces a released pod at once (StatefulSet, Deployment), so its recovery is
    /// measured against the limit. A Job's controller backs off a failed pod's replacement (10 s,
    /// doubling): upstream's policy, reported but not counted in the ratios.
    #[serde(default = "yes")]
    pub recovers: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Release {
    pub at: f64,
    pub node: String,
    /// `taint` or `pod NAMESPACE/NAME`.
    pub what: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Incident {
    pub name: String,
    pub node: String,
    pub phase: String,
    /// The node's last heartbeat the incident saw.
    pub heartbeat: Option<f64>,
    pub detected: Option<f64>,
    pub fence_requested: Option<f64>,
    pub fenced: Option<f64>,
    pub released: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub lost: usize,
    pub corrupted: usize,
    /// Records written by a writer on one node after a writer of the same RWO claim on another
    /// node had begun, while that one was still writing.
    pub overlaps: usize,
    pub releases_without_record: usize,
    /// Workloads that did not write again within their limit after the last fault healed.
    pub not_live: Vec<String>,
    /// Per workload, the fraction of the run it was writing (a record within the last 2 s).
    pub availability: BTreeMap<String, f64>,
    /// Per incident that released: seconds from the node's last heartbeat to the first record of
    /// a writer elsewhere, and its physical limit (kcm's grace + the fence + a pod start).
    pub recovery: Vec<Recovery>,
    /// One line per violation, for the report.
    pub violations: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Recovery {
    pub incident: String,
    pub workload: String,
    pub total_seconds: f64,
    /// kcm's node-monitor grace + the fence agent's time + a pod start.
    pub limit_seconds: f64,
    /// The same with kcm's detection as it happened (its grace sampled every node-monitor
    /// period) and the pods' forgiveness, both waited out by rule.
    pub cluster_limit_seconds: Option<f64>,
    /// Where the seconds went: heartbeat → incident (kcm's grace, its monitor period, the pods'
    /// forgiveness), incident → fenced, fenced → released, released → the first record elsewhere.
    pub phases: BTreeMap<String, f64>,
    /// What the faults the incident met added to both limits, by fault: a leader killed before
    /// the release (its Lease runs out before a follower takes over), the control plane down.
    #[serde(default)]
    pub waits: BTreeMap<String, f64>,
}

/// kube-controller-manager's node-monitor grace in the real-node cluster.
pub const NODE_MONITOR_GRACE: f64 = 16.0;
/// The rig's controller `--lease-duration`: a follower takes over at most this long after a
/// killed leader's last renewal.
pub const LEADER_LEASE: f64 = 6.0;
/// A writer appends every 100 ms: no record for this long is "not writing".
const WRITING_GAP: f64 = 2.0;

pub fn check(h: &History) -> Verdict {
    let mut v = Verdict::default();
    for w in &h.workloads {
        let seen: BTreeSet<(String, u64)> = w.seen.iter().cloned().collect();
        let r = records::check(w.log.as_deref(), &seen);
        if r.lost > 0 {
            v.violations
                .push(format!("{}: {} records lost", w.name, r.lost));
        }
        if r.corrupted > 0 {
            v.violations
                .push(format!("{}: {} records corrupted", w.name, r.corrupted));
        }
        v.lost += r.lost;
        v.corrupted += r.corrupted;
        let recs: Vec<records::Record> = w
            .log
            .as_deref()
            .unwrap_or("")
            .lines()
            .filter_map(records::parse)
            .collect();
        if w.rwo {
            let o = overlaps(&recs);
            if o > 0 {
                v.violations.push(format!(
                    "{}: {o} records written while a writer on another node was writing",
                    w.name
                ));
            }
            v.overlaps += o;
        }
        let mut times: Vec<f64> = recs.iter().map(|r| r.at).collect();
        times.sort_by(f64::total_cmp);
        v.availability.insert(
            w.name.clone(),
            availability(&times, h.started_at, h.ended_at),
        );
        let again = times
            .iter()
            .find(|t| **t > h.last_heal_at)
            .is_some_and(|t| *t <= h.last_heal_at + w.limit_seconds);
        if !again {
            v.not_live.push(w.name.clone());
            v.violations.push(format!(
                "{}: no record within {:.0} s of the last fault's heal",
                w.name, w.limit_seconds
            ));
        }
        for i in h.incidents.iter().filter(|_| w.recovers) {
            if let Some(r) = recovery(i, w, &recs, &h.not_ready, &h.faults) {
                v.recovery.push(r);
            }
        }
    }
    for r in &h.releases {
        if !recorded(r, &h.incidents) {
            v.releases_without_record += 1;
            v.violations.push(format!(
                "release without a record: {} of node {} at {:.1}",
                r.what, r.node, r.at
            ));
        }
    }
    v
}

/// Records of one RWO claim written while a writer on another node was writing: each writer's
/// span runs from its first to its last record, and a record inside the span of a writer on
/// another node is one overlap (both writers' records in the common time count).
pub fn overlaps(recs: &[records::Record]) -> usize {
    let mut spans: BTreeMap<&str, (&str, f64, f64)> = BTreeMap::new();
    for r in recs {
        let e = spans.entry(&r.writer).or_insert((&r.node, r.at, r.at));
        e.1 = e.1.min(r.at);
        e.2 = e.2.max(r.at);
    }
    recs.iter()
        .filter(|r| {
            spans.iter().any(|(w, (node, first, last))| {
                *w != r.writer && *node != r.node && *first <= r.at && r.at <= *last
            })
        })
        .count()
}

/// The fraction of [from, to] in which the workload had written within `WRITING_GAP`.
pub fn availability(times: &[f64], from: f64, to: f64) -> f64 {
    if to <= from {
        return 0.0;
    }
    let mut covered = 0.0;
    let mut prev: Option<f64> = None;
    for t in times.iter().copied().filter(|t| *t >= from && *t <= to) {
        if let Some(p) = prev {
            let gap = t - p;
            if gap <= WRITING_GAP {
                covered += gap;
            }
        }
        prev = Some(t);
    }
    (covered / (to - from)).clamp(0.0, 1.0)
}

/// A release is recorded when an incident of its node was fenced before it (a proven fence, or a
/// confirmed one: `fenced` is stamped only then).
fn recorded(r: &Release, incidents: &[Incident]) -> bool {
    incidents
        .iter()
        .any(|i| i.node == r.node && i.fenced.is_some_and(|f| f <= r.at + 0.5))
}

/// The incident's recovery for workload `w`: the first record of a writer on another node after
/// the release, when `w` was writing on the incident's node before it.
fn recovery(
    i: &Incident,
    w: &Workload,
    recs: &[records::Record],
    not_ready: &[NotReady],
    faults: &[FaultRun],
) -> Option<Recovery> {
    let released = i.released?;
    let heartbeat = i.heartbeat?;
    let before = recs
        .iter()
        .rfind(|r| r.at <= released)
        .filter(|r| r.node == i.node)?;
    let first = recs
        .iter()
        .find(|r| r.at > released && r.node != i.node && r.writer != before.writer)?;
    let agent = match (i.fence_requested, i.fenced) {
        (Some(a), Some(b)) => (b - a).max(0.0),
        _ => 0.0,
    };
    let span = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
    let phases = [
        ("detection", span(Some(heartbeat), i.detected)),
        ("fence", span(i.detected, i.fenced)),
        ("release", span(i.fenced, Some(released))),
        ("start", span(Some(released), Some(first.at))),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), v?)))
    .collect();
    let kcm = not_ready
        .iter()
        .filter(|n| n.node == i.node && n.at >= heartbeat && n.at <= released)
        .map(|n| n.at - heartbeat)
        .next_back();
    let waits = waits(faults, heartbeat, released, (i.fence_requested, i.fenced));
    let waited: f64 = waits.values().sum();
    Some(Recovery {
        incident: i.name.clone(),
        workload: w.name.clone(),
        total_seconds: first.at - heartbeat,
        limit_seconds: NODE_MONITOR_GRACE + w.forgive_seconds + agent + w.start_seconds + waited,
        cluster_limit_seconds: kcm
            .map(|k| k + w.forgive_seconds + agent + w.start_seconds + waited),
        phases,
        waits,
    })
}

/// What physics adds to an incident's limit for the faults it met between the node's last
/// heartbeat and the release: a controller leader killed (the lease a follower waits out), and
/// the control plane down (nothing moves). What happened while the backend was fencing is
/// already in the limit: the fence's time is measured from its request to its proof.
pub fn waits(
    faults: &[FaultRun],
    from: f64,
    to: f64,
    fencing: (Option<f64>, Option<f64>),
) -> BTreeMap<String, f64> {
    let in_fence = |t: f64| matches!(fencing, (Some(a), Some(b)) if a <= t && t <= b);
    let mut out = BTreeMap::new();
    for f in faults {
        let w = match f.kind.as_str() {
            "leader-kill"
                if f.outcome.contains("killed")
                    && (from..=to).contains(&f.start)
                    && !in_fence(f.start) =>
            {
                LEADER_LEASE.min(to - f.start)
            }
            // The part inside the fence is already in the fence's own time.
            "apiserver-restart" | "etcd-restart" => {
                let overlap = |a: f64, b: f64| (f.end.min(b) - f.start.max(a)).max(0.0);
                let fenced = match fencing {
                    (Some(a), Some(b)) => overlap(a.max(from), b.min(to)),
                    _ => 0.0,
                };
                overlap(from, to) - fenced
            }
            _ => 0.0,
        };
        if w > 0.0 {
            *out.entry(f.kind.clone()).or_default() += w;
        }
    }
    out
}

/// The p-th quantile (0..=1) of `xs` (nearest rank).
pub fn quantile(xs: &[f64], p: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    Some(v[i])
}

#[cfg(test)]
#[path = "checker_tests.rs"]
mod tests;
