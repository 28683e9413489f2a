//! What a client costs the apiserver: requests per client from the apiserver's own metrics
//! (priority and fairness, one FlowSchema per client, `apiserver_flowcontrol_dispatched_requests_
//! total`), and bytes the apiserver sent it counted on the wire by a relay of its own
//! (`harness::meter`): the apiserver's response-size metrics carry no client label, and their
//! difference between a window with a client and a baseline without it was swamped by everyone
//! else's traffic (negative at 5,000 nodes). What the apiserver served for the collections volguard
//! caches, everyone together (`Served`), is still read from its metrics.

use crate::support::apiserver::apiserver_metrics;
use crate::support::harness::ControlPlane;
use crate::support::harness::meter::Meter;
use kube::api::{Api, PostParams};
use serde_json::json;
use std::time::{Duration, Instant};

/// The collections volguard caches.
const RESOURCES: [&str; 4] = [
    "pods",
    "persistentvolumeclaims",
    "persistentvolumes",
    "nodes",
];

/// The clients measured, each its own FlowSchema (`bench-NAME`).
pub const SERVE: &str = "volguard-serve";
pub const CONTROLLER: &str = "volguard-controller";
pub const KCM_PROTECTION: &str = "kcm-protection";
/// The writing no-op of a churn window (`Who::WritingNoop`): a user of its own, outside
/// `system:masters` (whose requests APF exempts), queued as volguard's are.
pub const WRITER: &str = "floor-writer-window";
pub const KCM_PVC_PROTECTION_SA: &str = "kcm-pvc-protection-sa";

/// One FlowSchema per measured client (precedence 500: after `exempt` and the system schemas,
/// before `service-accounts`); and cluster-admin for `kcm-protection`. The controller shares
/// `workload-high` with kcm's protection controllers it is compared with. Serve's lock writes match
/// the shipped `volguard-admission-writes` first (precedence 300). Serve's reads stay in
/// `workload-low`, where a default install's service account lands (`service-accounts`): in
/// `workload-high` they queued behind the scheduler's binds, which hold their seats there while
/// they wait for serve's answer (at 5,000 nodes, in the window of take-overs, 6,725 LISTs and
/// 4,044 GETs timed out and 1,975 reads were rejected).
pub async fn install(c: &kube::Client) {
    use k8s_openapi::api::flowcontrol::v1::FlowSchema;
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    let sa = |ns: &str, name: &str| json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": ns, "name": name}});
    let schemas = [
        (
            SERVE,
            sa("volguard-system", "volguard-webhook"),
            "workload-low",
        ),
        (
            CONTROLLER,
            sa("volguard-system", "volguard-controller"),
            "workload-high",
        ),
        (
            KCM_PROTECTION,
            json!({"kind": "User", "user": {"name": "kcm-protection"}}),
            "workload-high",
        ),
        (
            KCM_PVC_PROTECTION_SA,
            sa("kube-system", "pvc-protection-controller"),
            "workload-high",
        ),
        (
            WRITER,
            json!({"kind": "User", "user": {"name": WRITER}}),
            "workload-low",
        ),
    ];
    let api = Api::<FlowSchema>::all(c.clone());
    for (name, subject, level) in schemas {
        let fs: FlowSchema = serde_json::from_value(json!({
            "metadata": {"name": format!("bench-{name}")},
            "spec": {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": 500,
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [subject],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                   "clusterScope": true, "namespaces": ["*"]}],
                                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}
        }))
        .expect("flowschema");
        api.create(&PostParams::default(), &fs)
            .await
            .expect("create flowschema");
    }
    // The writing no-op's claim writes where serve's lock writes go (the shipped
    // `volguard-admission`, installed with the manifests), its reads in `workload-low` as serve's.
    let writes: FlowSchema = serde_json::from_value(json!({
        "metadata": {"name": format!("bench-{WRITER}-writes")},
        "spec": {"priorityLevelConfiguration": {"name": "volguard-admission"}, "matchingPrecedence": 300,
                 "distinguisherMethod": {"type": "ByNamespace"},
                 "rules": [{"subjects": [{"kind": "User", "user": {"name": WRITER}}],
                            "resourceRules": [{"verbs": ["patch"], "apiGroups": [""],
                                               "resources": ["persistentvolumeclaims"], "namespaces": ["*"]}]}]}
    }))
    .expect("flowschema");
    api.create(&PostParams::default(), &writes)
        .await
        .expect("create flowschema");
    for user in [KCM_PROTECTION, WRITER] {
        let crb: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": format!("bench-{user}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
        }))
        .expect("crb");
        Api::<ClusterRoleBinding>::all(c.clone())
            .create(&PostParams::default(), &crb)
            .await
            .expect("create crb");
    }
}

/// Each measured client's relay, by client name (`SERVE`, `CONTROLLER`, `KCM_PROTECTION`).
static METERS: std::sync::OnceLock<Vec<(&'static str, Meter)>> = std::sync::OnceLock::new();

/// Put each measured client behind a relay that counts what the apiserver sends it; before any
/// of them starts (their kubeconfigs are written as they start).
pub fn meter(cp: &mut ControlPlane) {
    let meters = [
        (
            SERVE,
            "system:serviceaccount:volguard-system:volguard-webhook",
        ),
        (
            CONTROLLER,
            "system:serviceaccount:volguard-system:volguard-controller",
        ),
        (KCM_PROTECTION, "kcm-protection"),
        (WRITER, WRITER),
    ]
    .map(|(name, identity)| (name, cp.meter(identity)))
    .to_vec();
    let _ = METERS.set(meters);
}

/// The apiserver's metrics, and the bytes each measured client was sent, at one moment.
pub struct Sample {
    pub text: String,
    sent: Vec<(&'static str, u64)>,
    at: Instant,
}

pub async fn sample(c: &kube::Client) -> Sample {
    Sample {
        text: apiserver_metrics(c).await,
        sent: METERS
            .get()
            .into_iter()
            .flatten()
            .map(|(name, m)| (*name, m.sent()))
            .collect(),
        at: Instant::now(),
    }
}

/// Bytes the apiserver sent client `who` between two samples (`NaN` if it was not metered).
pub fn sent(a: &Sample, b: &Sample, who: &str) -> f64 {
    let at = |s: &Sample| s.sent.iter().find(|(n, _)| *n == who).map(|(_, v)| *v);
    match (at(a), at(b)) {
        (Some(x), Some(y)) => y.saturating_sub(x) as f64,
        _ => f64::NAN,
    }
}

pub fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    let start = labels.find(&format!("{key}=\""))? + key.len() + 2;
    let end = labels[start..].find('"')? + start;
    Some(&labels[start..end])
}

/// The sum of metric `name`'s series whose labels pass `keep`.
fn sum(text: &str, name: &str, keep: impl Fn(&str) -> bool) -> f64 {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix('{')?;
            let (labels, value) = rest.rsplit_once("} ")?;
            keep(labels).then(|| value.trim().parse::<f64>().ok())?
        })
        .sum()
}

fn cached(labels: &str) -> bool {
    label(labels, "resource").is_some_and(|r| RESOURCES.contains(&r))
        && label(labels, "subresource").unwrap_or("").is_empty()
}

/// What the apiserver served between two samples, for the collections volguard caches.
#[derive(Clone, Copy, Default, Debug)]
pub struct Served {
    pub seconds: f64,
    pub lists: f64,
    pub list_bytes: f64,
    pub watch_bytes: f64,
}

impl Served {
    pub fn between(a: &Sample, b: &Sample) -> Served {
        let d = |name: &str, keep: &dyn Fn(&str) -> bool| {
            sum(&b.text, name, keep) - sum(&a.text, name, keep)
        };
        let verb = |v: &'static str| move |l: &str| cached(l) && label(l, "verb") == Some(v);
        Served {
            seconds: b.at.duration_since(a.at).as_secs_f64(),
            lists: d("apiserver_request_total", &verb("LIST")),
            list_bytes: d("apiserver_response_sizes_sum", &verb("LIST")),
            watch_bytes: d("apiserver_watch_events_sizes_sum", &cached),
        }
    }
}

/// Whether a metric's labels name one of the FlowSchemas that hold client `who`'s requests: its
/// own (`bench-NAME`) and, for serve, the shipped one its lock writes match first
/// (manifests/base/flowschema.yaml).
fn client(who: &str) -> impl Fn(&str) -> bool + Copy + '_ {
    move |l: &str| {
        label(l, "flow_schema").is_some_and(|s| {
            s.strip_prefix("bench-") == Some(who)
                || (who == SERVE && s == "volguard-admission-writes")
        })
    }
}

/// Requests the apiserver dispatched for client `who` (its FlowSchemas) between two samples.
pub fn requests(a: &Sample, b: &Sample, who: &str) -> f64 {
    let keep = client(who);
    let name = "apiserver_flowcontrol_dispatched_requests_total";
    sum(&b.text, name, keep) - sum(&a.text, name, keep)
}

/// How API Priority and Fairness treated client `who` between two samples: the seats it
/// estimated per request on average, and the requests it rejected (429). A take-over's LIST is
/// charged by its page size, not by what the node index leaves (`state::NODE_PAGE`).
pub fn apf(a: &Sample, b: &Sample, who: &str) -> (f64, f64) {
    let keep = client(who);
    let d = |name: &str| sum(&b.text, name, keep) - sum(&a.text, name, keep);
    let seats = d("apiserver_flowcontrol_work_estimated_seats_sum");
    let estimated = d("apiserver_flowcontrol_work_estimated_seats_count");
    (
        seats / estimated.max(1.0),
        d("apiserver_flowcontrol_rejected_requests_total"),
    )
}

/// Admission calls the apiserver made to webhooks named `*.volguard.io` between two samples.
pub fn admission_calls(a: &Sample, b: &Sample) -> f64 {
    let name = "apiserver_admission_webhook_admission_duration_seconds_count";
    let keep = |l: &str| label(l, "name").is_some_and(|n| n.ends_with(".volguard.io"));
    sum(&b.text, name, keep) - sum(&a.text, name, keep)
}

/// A client's cost in one window: requests per second (its own FlowSchema) and bytes per second
/// the apiserver sent it (its relay).
#[derive(Clone, Copy, Default, Debug)]
pub struct Cost {
    pub requests_per_second: f64,
    pub bytes_per_second: f64,
}

pub fn cost(requests: f64, bytes: f64, seconds: f64) -> Cost {
    Cost {
        requests_per_second: requests / seconds.max(1e-9),
        bytes_per_second: bytes / seconds.max(1e-9),
    }
}

/// Who runs beside the cluster's own components in a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// Neither: the no-op webhook answers, nothing else watches.
    Baseline,
    /// `volguard serve` (answering the webhooks) and `volguard controller`.
    Volguard,
    /// The no-op webhook, and a kube-controller-manager with only its pvc-protection and
    /// pv-protection controllers.
    KcmProtection,
    /// As `Volguard`, with the placement hint unregistered (its pods are created as they come):
    /// what the hint costs the cluster, in a window of its own when asked for
    /// (`VOLGUARD_SCALE_WINDOWS`).
    VolguardNoHint,
    /// The writing no-op answers (one compare-and-swap write onto the claim per placement, its
    /// facts from reflectors of pods and claims): what a lock costs at least, the floor under
    /// volguard's window.
    WritingNoop,
}

impl Who {
    /// `baseline`, `volguard`, `volguard-no-hint`, `writing-noop`, `kcm`.
    pub fn parse(name: &str) -> Option<Who> {
        Some(match name.trim() {
            "baseline" => Who::Baseline,
            "volguard" => Who::Volguard,
            "volguard-no-hint" => Who::VolguardNoHint,
            "writing-noop" => Who::WritingNoop,
            "kcm" => Who::KcmProtection,
            _ => return None,
        })
    }

    /// volguard's serve and controller run in this window.
    pub fn runs_volguard(self) -> bool {
        matches!(self, Who::Volguard | Who::VolguardNoHint)
    }
}

/// A window's figures: what the apiserver served at steady state (`STEADY`) and during the churn.
pub struct Window {
    pub steady: Served,
    pub churn: Served,
    pub steady_requests: f64,
    pub churn_requests: f64,
    /// Bytes the apiserver sent the window's clients, steady and during the churn.
    pub steady_bytes: f64,
    pub churn_bytes: f64,
    /// volguard only: CPU seconds of serve and controller during the churn, the admission calls
    /// the churn made, and serve's requests and lock writes during it.
    pub churn_cpu_seconds: f64,
    pub admission_calls: f64,
    pub serve_requests: f64,
    pub lock_writes: f64,
    /// kube-apiserver's CPU seconds during the churn.
    pub apiserver_cpu_seconds: f64,
    /// volguard only: the churn's webhook calls and unread answers per entry, per 1,000 pods.
    pub calls: std::collections::BTreeMap<String, (f64, f64)>,
    /// volguard only: its requests by kind (audit log), steady and during the churn.
    pub requests: [Vec<String>; 2],
    /// volguard only: the controller's catch-up before the steady state.
    pub catch_up: Option<CatchUp>,
    /// volguard only: serve's live reads during the churn by read, kind and result
    /// (`volguard_live_reads_total`), the ones that happened.
    pub live_reads: Vec<(String, f64)>,
    /// volguard only: serve's mean APF seats per request and its requests APF rejected, during
    /// the churn.
    pub serve_apf: (f64, f64),
    /// Where the churn's time went, from the cluster's side.
    pub pace: crate::pace::Pace,
    /// From the churn's first delete to its last pod's own `Ready` (the window's churn time).
    pub ready_seconds: f64,
}

/// A window taken again because the fleet's kwok played its pods again: who, its churn seconds,
/// and the pod status patches per churned pod that gave it away.
#[derive(Debug, Clone)]
pub struct Replayed {
    pub who: String,
    pub seconds: f64,
    pub status_patches_per_pod: f64,
}

/// One window as the report prints it.
#[derive(Clone, Debug)]
pub struct WindowLine {
    pub who: String,
    /// To the last pod's `Ready` (`Window::ready_seconds`); `polled_seconds` to the count that
    /// saw every pod running.
    pub seconds: f64,
    pub polled_seconds: f64,
    pub apiserver_cpu_seconds: f64,
    pub live_reads: Vec<(String, f64)>,
    pub serve_apf: (f64, f64),
    pub pace: crate::pace::Pace,
}

/// How many of serve's live reads each series counted between two scrapes of its metrics
/// (`read kind result`; `cache read` for those its own cache answered), the series that moved
/// only: whether a window's refusals unsure came from the apiserver's throttling or from the
/// reads' deadline.
pub fn live_reads(before: &str, after: &str) -> Vec<(String, f64)> {
    let series = |text: &str| -> std::collections::BTreeMap<String, f64> {
        text.lines()
            .filter_map(|l| {
                // The reads volguard's own cache answered are named as such.
                let (prefix, l) = match l.strip_prefix("volguard_live_reads_total{") {
                    Some(rest) => ("", rest),
                    None => (
                        "cache ",
                        l.strip_prefix("volguard_cache_since_reads_total{")?,
                    ),
                };
                let (labels, value) = l.split_once("} ")?;
                let key = labels
                    .split(',')
                    .filter_map(|kv| Some(kv.split_once('=')?.1.trim_matches('"')))
                    .collect::<Vec<_>>()
                    .join(" ");
                Some((format!("{prefix}{key}"), value.trim().parse::<f64>().ok()?))
            })
            .collect()
    };
    let (a, b) = (series(before), series(after));
    b.into_iter()
        .map(|(k, v)| {
            let d = v - a.get(&k).copied().unwrap_or(0.0);
            (k, d)
        })
        .filter(|(_, d)| *d > 0.0)
        .collect()
}

/// What a controller started after the baseline's churn (which ran with volguard stopped, as an
/// outage would) did before it settled: the locks it cleared, its requests, and the bytes the
/// apiserver served for the cached collections meanwhile (everyone's: the cluster is idle).
#[derive(Clone, Copy, Default, Debug)]
pub struct CatchUp {
    pub seconds: f64,
    pub locks_cleared: f64,
    pub requests: f64,
    pub bytes: f64,
}

pub const STEADY: Duration = Duration::from_secs(60);

/// The requests a window's clients made (volguard's two, or kcm-protection).
pub fn window_requests(who: Who, a: &Sample, b: &Sample) -> f64 {
    match who {
        Who::Baseline => 0.0,
        Who::Volguard | Who::VolguardNoHint => requests(a, b, SERVE) + requests(a, b, CONTROLLER),
        Who::KcmProtection => requests(a, b, KCM_PROTECTION),
        Who::WritingNoop => requests(a, b, WRITER),
    }
}

/// The bytes the apiserver sent a window's clients.
/// Bytes sent so far to the window's clients (0 when none is metered).
fn sent_now(who: Who) -> u64 {
    let names: &[&str] = match who {
        Who::Baseline => &[],
        Who::Volguard | Who::VolguardNoHint => &[SERVE, CONTROLLER],
        Who::KcmProtection => &[KCM_PROTECTION],
        Who::WritingNoop => &[WRITER],
    };
    METERS
        .get()
        .into_iter()
        .flatten()
        .filter(|(name, _)| names.contains(name))
        .map(|(_, m)| m.sent())
        .sum()
}

/// Wait until the window's clients have read their initial lists: until what they are sent in
/// 5 s falls below 1 MiB (at least `least`, at most 180 s). A fixed 20 s was short of kcm's
/// lists at 5,000 nodes and 64,063 pods: its "steady" 2.1 MB/s was their tail.
pub async fn quiet(who: Who, least: Duration) -> Duration {
    let started = Instant::now();
    tokio::time::sleep(least).await;
    let mut before = sent_now(who);
    loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let now = sent_now(who);
        if now.saturating_sub(before) < 1 << 20 || started.elapsed() > Duration::from_secs(180) {
            return started.elapsed();
        }
        before = now;
    }
}

pub fn window_bytes(who: Who, a: &Sample, b: &Sample) -> f64 {
    match who {
        Who::Baseline => 0.0,
        Who::Volguard | Who::VolguardNoHint => sent(a, b, SERVE) + sent(a, b, CONTROLLER),
        Who::KcmProtection => sent(a, b, KCM_PROTECTION),
        Who::WritingNoop => sent(a, b, WRITER),
    }
}
