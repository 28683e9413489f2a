//! The whole admission surface against an adversary, model-checked (spec §10, issue 68 point 5).
//!
//! A pure simulated cluster — two nodes, a namespace, a ReadWriteOnce claim bound to a volume, a
//! pod on n1 using it and a second pod waiting for it, NodeFence records — where every write
//! goes through volguard's real decision path: each request becomes an AdmissionReview v1, the
//! mutating path's JSONPatch is applied to the object as the apiserver would, and the validating
//! path decides, over a `--state` file's `View` loaded from the model's state (one store per
//! request). Actors of every kind (a person without and with break glass, a service account,
//! another node's kubelet, the scheduler) issue any write through any door; the upstream
//! controllers (PodGC, attach/detach, the PV and protection controllers, the namespace
//! controller, the kubelets) react, their writes judged the same way.
//!
//! Invariants: (1) no data of an in-use or marked volume destroyed; (2) at most one node runs a
//! writer of the claim; (3) a pod that its node may still run is released (removed from the API,
//! made terminal, its volume detached) only on a proof: an out-of-service taint added on a
//! valid confirmation, a Node deletion that was proven and recorded, or a person's valid
//! confirmation on the pod; (4) a stored confirmation counts (`rules::proof::counts`) only when a
//! person with the break-glass verb set it. Explored exhaustively to a bounded depth (stateright
//! BFS) and by a seeded random walk; each invariant has a deliberately broken admission (one
//! rule skipped) that the checkers must catch.
//!
//! Simplifications (see the report in the test's output): the controllers settle to a fixpoint
//! after each adversary move (no race between two controllers), CEL matchConditions and the
//! ValidatingAdmissionPolicies are not modelled (every validating rule sees every request:
//! stricter than a cluster, never looser), offline volguard reads no Lease (heartbeat = Ready).

use serde_json::{Value, json};
use stateright::Model;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::hash::Hash;
use std::sync::Arc;
use std::thread::LocalKey;
use std::time::Duration;
use volguard::admission::{Admission, Endpoint};
use volguard::model::{
    Binding, ContainerStates, DELETE_PROTECTION, Meta, Node, OUT_OF_SERVICE_TAINT, PV_FINALIZER,
    PVC_FINALIZER, Pod, Pv, Pvc, from_json,
};
use volguard::rules::proof::{BreakGlass, CONFIRMED_AT, CONFIRMED_BY, Expiry, Key, Reader};

const CONFIRM_NODE_DOWN: &str = Key::ConfirmNodeDown.annotation();
const CONFIRM_FORCE_DELETE: &str = Key::ConfirmForceDelete.annotation();
const ALLOW_FINALIZER_REMOVAL: &str = Key::AllowFinalizerRemoval.annotation();
use volguard::rules::rule::Rule;
use volguard::rules::upstream::{self, Reclaim};
use volguard::state::{Store, View};

const NS: &str = "ns";
const CLAIM: &str = "data";
const VOLUME: &str = "pv1";
const NODES: [&str; 2] = ["n1", "n2"];
const PODS: [&str; 2] = ["p1", "p2"];
/// `--break-glass-expiry`: a confirmation counts for an hour after it was set.
const EXPIRY: Duration = Duration::from_secs(3600);
const OWN_CONTROLLER: &str = "system:serviceaccount:volguard-system:volguard-controller";

// ------------------------------------------------------------------------------------ actors

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
enum Who {
    /// A person granted break glass (offline volguard asks no authorizer: `system:masters`).
    Alice,
    /// A person without it (a namespace editor, or anyone RBAC lets write).
    Eve,
    Robot,
    Kubelet(u8),
    Scheduler,
    PodGc,
    PvBinder,
    PvcProtection,
    PvProtection,
    NsController,
    AttachDetach,
}

/// Who issues the adversary's writes. RBAC is assumed to let each write anything (volguard's
/// guarantees must not rest on it, except the break-glass verb); n2's kubelet is another node's.
const ADVERSARIES: [Who; 4] = [Who::Alice, Who::Eve, Who::Robot, Who::Kubelet(1)];

impl Who {
    fn username(self) -> String {
        match self {
            Who::Alice => "alice".into(),
            Who::Eve => "eve".into(),
            Who::Robot => "system:serviceaccount:ns:robot".into(),
            Who::Kubelet(n) => format!("system:node:{}", NODES[n as usize]),
            Who::Scheduler => "system:kube-scheduler".into(),
            Who::PodGc => "system:serviceaccount:kube-system:pod-garbage-collector".into(),
            Who::PvBinder => "system:serviceaccount:kube-system:persistent-volume-binder".into(),
            Who::PvcProtection => {
                "system:serviceaccount:kube-system:pvc-protection-controller".into()
            }
            Who::PvProtection => {
                "system:serviceaccount:kube-system:pv-protection-controller".into()
            }
            Who::NsController => "system:serviceaccount:kube-system:namespace-controller".into(),
            Who::AttachDetach => "system:serviceaccount:kube-system:attachdetach-controller".into(),
        }
    }

    fn user(self) -> Value {
        let groups: Vec<&str> = match self {
            Who::Alice => vec!["system:masters", "system:authenticated"],
            Who::Eve => vec!["system:authenticated"],
            Who::Kubelet(_) => vec!["system:nodes", "system:authenticated"],
            Who::Scheduler => vec!["system:authenticated"],
            _ => vec![
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
                "system:authenticated",
            ],
        };
        json!({"username": self.username(), "groups": groups})
    }

    fn from_username(name: &str) -> Option<Who> {
        let mut all = vec![
            Who::Alice,
            Who::Eve,
            Who::Robot,
            Who::Scheduler,
            Who::PodGc,
            Who::PvBinder,
            Who::PvcProtection,
            Who::PvProtection,
            Who::NsController,
            Who::AttachDetach,
        ];
        all.extend([Who::Kubelet(0), Who::Kubelet(1)]);
        all.into_iter().find(|w| w.username() == name)
    }
}

// ------------------------------------------------------------------------------------- state

/// When a confirmation's `confirmed-at` was stamped: within `EXPIRY`, or long before.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum At {
    Fresh,
    Old,
}

/// One object's confirmation (the key depends on the kind), its stamp, and (ghost) who set it.
#[derive(Clone, Copy, Debug, Default, Hash, PartialEq, Eq)]
struct Ann {
    confirm: bool,
    by: Option<Who>,
    at: Option<At>,
    /// Ghost: who wrote the confirmation now stored.
    setter: Option<Who>,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Phase {
    Pending,
    Running,
    /// (Succeeded is the same to every rule and reaction here.)
    Failed,
}

/// A container state as reported in the pod's status.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum C {
    Run,
    Wait,
    Term,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct PodS {
    exists: bool,
    node: Option<u8>,
    phase: Phase,
    /// The reported states of the app container and of a sidecar (an init container with
    /// `restartPolicy: Always`).
    main: C,
    init: C,
    /// deletionTimestamp set (a graceful delete in progress).
    deleting: bool,
    ann: Ann,
    /// Ghost: the node where its containers run (they outlive the API object on a machine that
    /// no longer hears the apiserver).
    proc_on: Option<u8>,
    /// Ghost: the app container crash-loops (waiting) while the sidecar runs and writes.
    crashloop: bool,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Machine {
    Up,
    /// Running, cut from the apiserver: NotReady, its kubelet acts on nothing.
    Cut,
    Off,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct NodeS {
    exists: bool,
    machine: Machine,
    oos: bool,
    ann: Ann,
    /// Ghost: the taint was added on a valid confirmation.
    oos_proven: bool,
    /// Ghost: the Node was deleted on a valid proof.
    deleted_proven: bool,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Policy {
    Retain,
    Delete,
    Recycle,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct PvcS {
    exists: bool,
    fin: bool,
    deleting: bool,
    mark: bool,
    ann: Ann,
    /// The RWO lock volguard wrote: (node, pod).
    lock: Option<(u8, u8)>,
    /// Ghost: deleted while it carried the mark.
    deleted_marked: bool,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct PvS {
    exists: bool,
    fin: bool,
    deleting: bool,
    released: bool,
    policy: Policy,
    /// claimRef's UID is the claim's.
    ref_ok: bool,
    mark: bool,
    ann: Ann,
    /// Ghost: the data is still there.
    data: bool,
}

/// A NodeFence release record: (node, a taint rather than a deletion).
type Rec = (u8, bool);

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct S {
    nodes: [NodeS; 2],
    pods: [PodS; 2],
    pvc: PvcS,
    pv: PvS,
    attached: [bool; 2],
    records: Vec<Rec>,
    ns_deleting: bool,
    /// Ghost: data destroyed while in use or marked (invariant 1).
    destroyed_bad: bool,
    /// Ghost: a release without a proof (invariant 3).
    release_bad: bool,
}

fn init_state(policy: Policy, pv_mark: bool, pvc_mark: bool) -> S {
    let node = NodeS {
        exists: true,
        machine: Machine::Up,
        oos: false,
        ann: Ann::default(),
        oos_proven: false,
        deleted_proven: false,
    };
    S {
        nodes: [node, node],
        pods: [
            PodS {
                exists: true,
                node: Some(0),
                phase: Phase::Running,
                main: C::Run,
                init: C::Run,
                deleting: false,
                ann: Ann::default(),
                proc_on: Some(0),
                crashloop: false,
            },
            PodS {
                exists: true,
                node: None,
                phase: Phase::Pending,
                main: C::Wait,
                init: C::Wait,
                deleting: false,
                ann: Ann::default(),
                proc_on: None,
                crashloop: false,
            },
        ],
        pvc: PvcS {
            exists: true,
            fin: true,
            deleting: false,
            mark: pvc_mark,
            ann: Ann::default(),
            lock: Some((0, 0)),
            deleted_marked: false,
        },
        pv: PvS {
            exists: true,
            fin: true,
            deleting: false,
            released: false,
            policy,
            ref_ok: true,
            mark: pv_mark,
            ann: Ann::default(),
            data: true,
        },
        attached: [true, false],
        records: Vec::new(),
        ns_deleting: false,
        destroyed_bad: false,
        release_bad: false,
    }
}

// -------------------------------------------------------------------- objects as JSON

const OLD_TIME: &str = "2000-01-01T00:00:00Z";

fn annotations(ann: &Ann, key: &str, extra: &[(&str, String)]) -> Value {
    let mut m = serde_json::Map::new();
    if ann.confirm {
        m.insert(key.into(), json!("true"));
    }
    if let Some(by) = ann.by {
        m.insert(CONFIRMED_BY.into(), json!(by.username()));
    }
    match ann.at {
        Some(At::Fresh) => {
            let t = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60);
            let t = t.round(jiff::Unit::Second).unwrap_or(t);
            m.insert(CONFIRMED_AT.into(), json!(t.to_string()));
        }
        Some(At::Old) => {
            m.insert(CONFIRMED_AT.into(), json!(OLD_TIME));
        }
        None => {}
    }
    for (k, v) in extra {
        m.insert((*k).into(), json!(v));
    }
    Value::Object(m)
}

/// The confirmation and stamp an object carries after the write (and the mutating patch).
fn ann_of(obj: &Value, key: &str, before: &Ann) -> Ann {
    let a = &obj["metadata"]["annotations"];
    let at = a[CONFIRMED_AT]
        .as_str()
        .map(|t| match t.parse::<jiff::Timestamp>() {
            Ok(t)
                if jiff::Timestamp::now().duration_since(t)
                    < jiff::SignedDuration::from_hours(1) =>
            {
                At::Fresh
            }
            _ => At::Old,
        });
    Ann {
        confirm: a[key].as_str() == Some("true"),
        by: a[CONFIRMED_BY].as_str().and_then(Who::from_username),
        at,
        setter: before.setter,
    }
}

fn state_c(c: C) -> Value {
    match c {
        C::Run => json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}}),
        C::Wait => json!({"waiting": {"reason": "CrashLoopBackOff"}}),
        C::Term => json!({"terminated": {"exitCode": 0, "finishedAt": "2026-01-01T01:00:00Z"}}),
    }
}

fn phase_str(p: Phase) -> &'static str {
    match p {
        Phase::Pending => "Pending",
        Phase::Running => "Running",
        Phase::Failed => "Failed",
    }
}

fn pod_json(i: usize, p: &PodS) -> Value {
    let mut meta = json!({
        "name": PODS[i], "namespace": NS, "uid": format!("uid-{}", PODS[i]),
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "annotations": annotations(&p.ann, CONFIRM_FORCE_DELETE, &[]),
    });
    if p.deleting {
        meta["deletionTimestamp"] = json!("2026-01-01T02:00:00Z");
        meta["deletionGracePeriodSeconds"] = json!(30);
    }
    let mut spec = json!({
        "terminationGracePeriodSeconds": 30,
        "initContainers": [{"name": "sidecar", "image": "sidecar", "restartPolicy": "Always"}],
        "containers": [{"name": "app", "image": "app"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": CLAIM}}],
    });
    if let Some(n) = p.node {
        spec["nodeName"] = json!(NODES[n as usize]);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
        "status": {
            "phase": phase_str(p.phase),
            "initContainerStatuses": [{"name": "sidecar", "ready": true, "restartCount": 0,
                "image": "sidecar", "imageID": "", "state": state_c(p.init)}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0,
                "image": "app", "imageID": "", "state": state_c(p.main)}],
        },
    })
}

fn node_json(i: usize, n: &NodeS) -> Value {
    let taints = match n.oos {
        true => {
            json!([{"key": OUT_OF_SERVICE_TAINT, "value": "nodeshutdown", "effect": "NoExecute"}])
        }
        false => json!([]),
    };
    let ready = match n.machine {
        Machine::Up => "True",
        Machine::Cut | Machine::Off => "Unknown",
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODES[i], "uid": format!("uid-{}", NODES[i]),
            "annotations": annotations(&n.ann, CONFIRM_NODE_DOWN, &[])},
        "spec": {"taints": taints},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    })
}

fn mark_ann(mark: bool) -> Vec<(&'static str, String)> {
    match mark {
        true => vec![(DELETE_PROTECTION, "true".into())],
        false => Vec::new(),
    }
}

fn pvc_json(c: &PvcS) -> Value {
    let mut extra = mark_ann(c.mark);
    if let Some((n, p)) = c.lock {
        let lock = json!({"node": NODES[n as usize], "pod": PODS[p as usize],
            "uid": format!("uid-{}", PODS[p as usize]), "via": "bind",
            "at": "2026-01-01T00:00:00Z"});
        extra.push(("volguard.io/rwo-lock", lock.to_string()));
    }
    let mut meta = json!({
        "name": CLAIM, "namespace": NS, "uid": "uid-data", "resourceVersion": "1",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "annotations": annotations(&c.ann, ALLOW_FINALIZER_REMOVAL, &extra),
        "finalizers": if c.fin { json!([PVC_FINALIZER]) } else { json!([]) },
    });
    if c.deleting {
        meta["deletionTimestamp"] = json!("2026-01-01T02:00:00Z");
    }
    json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": VOLUME,
            "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"]},
    })
}

fn pv_json(v: &PvS) -> Value {
    let mut meta = json!({
        "name": VOLUME, "uid": "uid-pv1", "resourceVersion": "1",
        "annotations": annotations(&v.ann, ALLOW_FINALIZER_REMOVAL, &mark_ann(v.mark)),
        "finalizers": if v.fin { json!([PV_FINALIZER]) } else { json!([]) },
    });
    if v.deleting {
        meta["deletionTimestamp"] = json!("2026-01-01T02:00:00Z");
    }
    let policy = match v.policy {
        Policy::Retain => "Retain",
        Policy::Delete => "Delete",
        Policy::Recycle => "Recycle",
    };
    json!({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta,
        "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
            "persistentVolumeReclaimPolicy": policy,
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": NS, "name": CLAIM,
                "uid": if v.ref_ok { "uid-data" } else { "uid-other" }},
            "csi": {"driver": "csi.example.com", "volumeHandle": "vol-1"}},
        "status": {"phase": if v.released { "Released" } else { "Bound" }},
    })
}

fn record_json(i: usize, r: &Rec) -> Value {
    json!({
        "apiVersion": "volguard.io/v1alpha1", "kind": "NodeFence",
        "metadata": {"name": format!("{}-recorded-{}", NODES[r.0 as usize], i + 1)},
        "spec": {"node": NODES[r.0 as usize], "backends": [],
            "release": {"action": if r.1 { "Taint" } else { "NodeDelete" }, "by": "someone",
                "proof": "recorded"}},
    })
}

fn namespace_json(s: &S) -> Value {
    let mut m = json!({"name": NS, "uid": "uid-ns"});
    if s.ns_deleting {
        m["deletionTimestamp"] = json!("2026-01-01T02:00:00Z");
    }
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": m})
}

/// The state as the `--state` file volguard would load.
fn state_list(s: &S) -> String {
    let mut items = Vec::new();
    for (i, n) in s.nodes.iter().enumerate() {
        if n.exists {
            items.push(node_json(i, n));
        }
    }
    for (i, p) in s.pods.iter().enumerate() {
        if p.exists {
            items.push(pod_json(i, p));
        }
    }
    if s.pvc.exists {
        items.push(pvc_json(&s.pvc));
    }
    if s.pv.exists {
        items.push(pv_json(&s.pv));
    }
    for (i, r) in s.records.iter().enumerate() {
        items.push(record_json(i, r));
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

// ------------------------------------------------------------------------------- admission

/// One write as the apiserver would send it to volguard.
struct Req {
    who: Who,
    group: &'static str,
    kind: &'static str,
    resource: &'static str,
    sub: Option<&'static str>,
    name: String,
    namespace: Option<&'static str>,
    op: &'static str,
    object: Value,
    old: Value,
    options: Value,
    /// volguard's mutating entry ran (it is `Ignore`: a request may pass without it).
    mutated: bool,
}

impl Req {
    /// The review in the apiserver's field order: `subResource` before the objects, which
    /// decides how volguard's one-pass decoder reads them (`serde_json::Map` would sort it).
    fn review(&self, object: &Value) -> Vec<u8> {
        let mut fields: Vec<(&str, Value)> = vec![
            ("uid", json!("00000000-0000-4000-8000-000000000001")),
            (
                "kind",
                json!({"group": self.group, "version": "v1", "kind": self.kind}),
            ),
            (
                "resource",
                json!({"group": self.group, "version": "v1", "resource": self.resource}),
            ),
        ];
        if let Some(s) = self.sub {
            fields.push(("subResource", json!(s)));
        }
        fields.push(("name", json!(self.name)));
        if let Some(ns) = self.namespace {
            fields.push(("namespace", json!(ns)));
        }
        fields.extend([
            ("operation", json!(self.op)),
            ("userInfo", self.who.user()),
            ("object", object.clone()),
            ("oldObject", self.old.clone()),
            ("dryRun", json!(false)),
            ("options", self.options.clone()),
        ]);
        let request: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("{}:{v}", json!(k)))
            .collect();
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{{}}}}}"#,
            request.join(",")
        )
        .into_bytes()
    }
}

/// What an admitted write leaves: the object as stored (after the mutating patch) and what
/// volguard itself wrote while deciding (the RWO lock, NodeFence records).
struct Admitted {
    object: Value,
    lock: Option<(u8, u8)>,
    records: Vec<Rec>,
}

/// Admission decisions asked, over every thread.
static DECISIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

thread_local! {
    static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
}

/// The validating rules (every rule but the mutating ones), for a broken admission that skips one.
fn validating_rules() -> Vec<Rule> {
    Rule::ALL
        .into_iter()
        .filter(|r| !r.def().mutating)
        .collect()
}

/// Ask volguard about `req` on a cluster in state `s`: `None` when refused. `skip`: the broken
/// admission that never asks one rule.
fn admit(s: &S, req: &Req, skip: Option<Rule>) -> Option<Admitted> {
    DECISIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let store = Store::default();
    volguard::state::loader::load_str(&state_list(s), &store).expect("state loads");
    let store = Arc::new(store);
    let admission = Admission::new(
        View::file(store.clone()),
        Default::default(),
        vec![OWN_CONTROLLER.to_string()],
    )
    .with_break_glass_expiry(EXPIRY);
    let budget = Duration::from_secs(5);
    let mut object = req.object.clone();
    RT.with(|rt| {
        if req.mutated && matches!(req.op, "CREATE" | "UPDATE") {
            let body = req.review(&object);
            let r = volguard::admission::decode(&body).expect("review decodes");
            let v = rt.block_on(admission.decide(Endpoint::Mutate, &r, budget));
            if !v.decision.allowed {
                return None;
            }
            if let Some(p) = &v.decision.patch {
                json_patch::patch(&mut object, &p.ops()).expect("patch applies");
            }
        }
        let body = req.review(&object);
        let r = volguard::admission::decode(&body).expect("review decodes");
        let allowed = match skip {
            None => {
                rt.block_on(admission.decide(Endpoint::Validate, &r, budget))
                    .decision
                    .allowed
            }
            Some(skip) => validating_rules()
                .into_iter()
                .filter(|x| *x != skip)
                .all(|x| {
                    rt.block_on(admission.decide(Endpoint::Rule(x), &r, budget))
                        .decision
                        .allowed
                }),
        };
        allowed.then_some(())
    })?;
    let lock = store
        .pvcs
        .get(NS, CLAIM)
        .and_then(|p| {
            p.metadata
                .annotation("volguard.io/rwo-lock")
                .map(str::to_string)
        })
        .and_then(|raw| {
            let l: Value = serde_json::from_str(&raw).ok()?;
            let n = NODES.iter().position(|n| l["node"] == *n)? as u8;
            let p = PODS.iter().position(|p| l["pod"] == *p)? as u8;
            Some((n, p))
        });
    let mut records: Vec<Rec> = View::file(store.clone())
        .sweep::<volguard::model::fence::NodeFence>(None)
        .iter()
        .filter_map(|f| {
            let r = f.spec.release.as_ref()?;
            let n = NODES.iter().position(|n| f.spec.node == *n)? as u8;
            Some((n, r.action == volguard::model::fence::ReleaseAction::Taint))
        })
        .collect();
    records.sort();
    records.dedup();
    Some(Admitted {
        object,
        lock,
        records,
    })
}

// ----------------------------------------------------------------------- requests by door

fn pod_req(s: &S, who: Who, i: usize, new: &PodS, sub: Option<&'static str>) -> Req {
    Req {
        who,
        group: "",
        kind: "Pod",
        resource: "pods",
        sub,
        name: PODS[i].into(),
        namespace: Some(NS),
        op: "UPDATE",
        object: pod_json(i, new),
        old: pod_json(i, &s.pods[i]),
        options: json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}),
        mutated: true,
    }
}

fn delete_options(grace: i64) -> Value {
    json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "gracePeriodSeconds": grace})
}

fn pod_delete_req(s: &S, who: Who, i: usize, grace: i64) -> Req {
    Req {
        who,
        group: "",
        kind: "Pod",
        resource: "pods",
        sub: None,
        name: PODS[i].into(),
        namespace: Some(NS),
        op: "DELETE",
        object: Value::Null,
        old: pod_json(i, &s.pods[i]),
        options: delete_options(grace),
        mutated: false,
    }
}

fn pvc_req(s: &S, who: Who, new: &PvcS, sub: Option<&'static str>, mutated: bool) -> Req {
    Req {
        who,
        group: "",
        kind: "PersistentVolumeClaim",
        resource: "persistentvolumeclaims",
        sub,
        name: CLAIM.into(),
        namespace: Some(NS),
        op: "UPDATE",
        object: pvc_json(new),
        old: pvc_json(&s.pvc),
        options: Value::Null,
        mutated,
    }
}

fn pv_req(s: &S, who: Who, new: &PvS, sub: Option<&'static str>, mutated: bool) -> Req {
    Req {
        who,
        group: "",
        kind: "PersistentVolume",
        resource: "persistentvolumes",
        sub,
        name: VOLUME.into(),
        namespace: None,
        op: "UPDATE",
        object: pv_json(new),
        old: pv_json(&s.pv),
        options: Value::Null,
        mutated,
    }
}

fn node_req(s: &S, who: Who, i: usize, new: &NodeS, mutated: bool) -> Req {
    Req {
        who,
        group: "",
        kind: "Node",
        resource: "nodes",
        sub: None,
        name: NODES[i].into(),
        namespace: None,
        op: "UPDATE",
        object: node_json(i, new),
        old: node_json(i, &s.nodes[i]),
        options: Value::Null,
        mutated,
    }
}

fn delete_req(
    who: Who,
    kind: &'static str,
    resource: &'static str,
    name: &str,
    namespace: Option<&'static str>,
    old: Value,
) -> Req {
    Req {
        who,
        group: "",
        kind,
        resource,
        sub: None,
        name: name.into(),
        namespace,
        op: "DELETE",
        object: Value::Null,
        old,
        options: delete_options(30),
        mutated: false,
    }
}

// --------------------------------------------------------------------------- the invariants

/// A confirmation counts now, as the guards read it.
fn counts(ann: &Ann, key: &str) -> bool {
    let meta: Meta = serde_json::from_value(json!({"name": "x",
        "annotations": annotations(ann, key, &[])}))
    .expect("meta");
    let key = Key::ALL
        .into_iter()
        .find(|k| k.annotation() == key)
        .expect("a proof key");
    let reader = Reader {
        mode: BreakGlass::Rbac,
        expiry: Some(Expiry {
            after: jiff::SignedDuration::try_from(EXPIRY).expect("expiry"),
            now: jiff::Timestamp::now(),
        }),
    };
    reader.valid(&meta, key).is_some()
}

/// A person with break glass set it, and it has not expired: what invariant 3 accepts.
fn valid(ann: &Ann) -> bool {
    ann.confirm
        && ann.setter == Some(Who::Alice)
        && ann.by == Some(Who::Alice)
        && ann.at == Some(At::Fresh)
}

fn writer_nodes(s: &S) -> usize {
    let mut on = [false; 2];
    for p in &s.pods {
        if let Some(n) = p.proc_on {
            on[n as usize] = true;
        }
    }
    on.iter().filter(|x| **x).count()
}

fn in_use(s: &S) -> bool {
    s.pods.iter().any(|p| p.proc_on.is_some())
}

fn proof_by_non_breakglass(s: &S) -> bool {
    let bad = |a: &Ann, key| counts(a, key) && a.setter != Some(Who::Alice);
    s.pods
        .iter()
        .any(|p| p.exists && bad(&p.ann, CONFIRM_FORCE_DELETE))
        || s.nodes
            .iter()
            .any(|n| n.exists && bad(&n.ann, CONFIRM_NODE_DOWN))
        || (s.pvc.exists && bad(&s.pvc.ann, ALLOW_FINALIZER_REMOVAL))
        || (s.pv.exists && bad(&s.pv.ann, ALLOW_FINALIZER_REMOVAL))
}

const INV_DATA: &str = "no data of an in-use or marked volume destroyed";
const INV_WRITER: &str = "at most one node runs a writer of the RWO claim";
const INV_RELEASE: &str = "no release without a proof of the kind it needs";
const INV_PROOF: &str = "a proof counts only from a person with break glass";
const INVARIANTS: [(&str, &str); 4] = [
    ("data", INV_DATA),
    ("one_writer", INV_WRITER),
    ("release_proof", INV_RELEASE),
    ("proof_by_break_glass", INV_PROOF),
];

/// The broken admission each invariant's checker must catch: one rule never asked.
fn broken_rule(invariant: &str) -> Rule {
    match invariant {
        "data" => Rule::FinalizerRemoval,
        "one_writer" => Rule::ForceDelete,
        "release_proof" => Rule::PodStatus,
        _ => Rule::Proof,
    }
}

fn holds(name: &str, s: &S) -> bool {
    match name {
        "data" => !s.destroyed_bad,
        "one_writer" => writer_nodes(s) <= 1,
        "release_proof" => !s.release_bad,
        _ => !proof_by_non_breakglass(s),
    }
}

// ------------------------------------------------------------------------ the state changes

impl S {
    /// Pod `i` is released from its node by `who` (removed from the API, made terminal, its
    /// volume detached): unless its own kubelet says so, or its machine is off, a proof must stand.
    fn release(&mut self, i: usize, who: Who) {
        let p = self.pods[i];
        let Some(n) = p.node else { return };
        let node = self.nodes[n as usize];
        if p.phase == Phase::Failed || who == Who::Kubelet(n) || node.machine == Machine::Off {
            return;
        }
        let proven = (node.exists && node.oos && node.oos_proven)
            || (!node.exists && node.deleted_proven && self.records.iter().any(|r| r.0 == n))
            || valid(&p.ann);
        if !proven {
            self.release_bad = true;
        }
    }

    fn destroy(&mut self) {
        if !self.pv.data {
            return;
        }
        if in_use(self)
            || self.pv.mark
            || (self.pvc.exists && self.pvc.mark)
            || self.pvc.deleted_marked
        {
            self.destroyed_bad = true;
        }
        self.pv.data = false;
    }

    fn remove_pod(&mut self, i: usize, who: Who) {
        self.release(i, who);
        self.pods[i].exists = false;
        self.pods[i].deleting = false;
    }
}

/// A model object as a controller's informer would hold it: decoded by the crate's own decoder
/// from the JSON the file's `View` loads, so the upstream ports read what volguard reads.
fn decode<T: for<'de> serde::Deserialize<'de>>(v: &Value) -> T {
    from_json(&v.to_string()).expect("model object decodes")
}

fn pod_obj(i: usize, p: &PodS) -> Pod {
    decode(&pod_json(i, p))
}

type Cache<K, V> = RefCell<HashMap<K, V>>;

thread_local! {
    static TERMINATED: Cache<(usize, PodS), bool> = Default::default();
    static PODGC: Cache<(usize, PodS, Option<NodeS>), bool> = Default::default();
    static VOLUME_FATE: Cache<(PvS, Option<PvcS>), (bool, Reclaim)> = Default::default();
}

/// The ports are pure, and decoding their objects on every settle round cost ~95k decodes, a
/// quarter of the default run: each answer is computed once per model value (~2k decodes). The
/// values are the keys whole, so a cached answer is the port's answer on the same object.
fn memo<K: Hash + Eq, V: Copy>(
    cache: &'static LocalKey<Cache<K, V>>,
    key: K,
    f: impl FnOnce() -> V,
) -> V {
    if let Some(v) = cache.with(|c| c.borrow().get(&key).copied()) {
        return v;
    }
    let v = f();
    cache.with(|c| c.borrow_mut().insert(key, v));
    v
}

/// The attach/detach controller's view: `upstream::is_pod_terminated` on pod `i`.
fn is_pod_terminated(i: usize, p: &PodS) -> bool {
    memo(&TERMINATED, (i, *p), || {
        let v = pod_json(i, p);
        upstream::is_pod_terminated(&decode(&v), &decode::<ContainerStates>(&v))
    })
}

/// PodGC deletes pod `i`: `gcTerminated` (its threshold taken as reached), or one of the passes
/// of `upstream::podgc_deletes`.
fn podgc_deletes(s: &S, i: usize) -> bool {
    let p = s.pods[i];
    let node = p.node.filter(|n| s.nodes[*n as usize].exists);
    memo(&PODGC, (i, p, node.map(|n| s.nodes[n as usize])), || {
        let pod = pod_obj(i, &p);
        let node: Option<Node> = node.map(|n| decode(&node_json(n as usize, &s.nodes[n as usize])));
        upstream::podgc_is_pod_terminated(&pod)
            || upstream::podgc_deletes(&pod, node.as_ref()).is_some()
    })
}

/// The PV controller's view of the volume and the claim its `claimRef` names:
/// (`upstream::is_volume_released`, `upstream::reclaim`).
fn volume_fate(s: &S) -> (bool, Reclaim) {
    let claim = s.pvc.exists.then_some(s.pvc);
    memo(&VOLUME_FATE, (s.pv, claim), || {
        let pv: Pv = decode(&pv_json(&s.pv));
        let claim: Option<Pvc> = claim.map(|c| decode(&pvc_json(&c)));
        (
            upstream::is_volume_released(&pv, claim.as_ref()),
            upstream::reclaim(&pv, claim.as_ref()),
        )
    })
}

fn terminal(p: &PodS) -> bool {
    p.phase == Phase::Failed
}

// ------------------------------------------------------------------------------- the doors

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum AnnOp {
    /// Set the confirmation; the mutating stamp runs (or, when it did not, the caller types
    /// its own name, as `proof-unstamped` asks).
    Set {
        mutated: bool,
    },
    /// Set it with a stamp typed as Alice's (the mutating stamp did not run).
    SetAsAlice,
    Remove,
}

const ANN_OPS: [AnnOp; 4] = [
    AnnOp::Set { mutated: true },
    AnnOp::Set { mutated: false },
    AnnOp::SetAsAlice,
    AnnOp::Remove,
];

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum StatusForge {
    Failed,
    AppTerminated,
    SidecarTerminated,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Door {
    DeletePod {
        p: u8,
        force: bool,
    },
    EvictPod {
        p: u8,
    },
    PodStatus {
        p: u8,
        to: StatusForge,
    },
    AnnotatePod {
        p: u8,
        op: AnnOp,
    },
    /// `pods/binding` (or the legacy `bindings`), carrying a confirmation and a stamp typed as
    /// Alice's in its metadata (the apiserver copies a Binding's annotations onto the pod).
    Bind {
        p: u8,
        node: u8,
        legacy: bool,
        carry: bool,
    },
    PvcStripFinalizer {
        status: bool,
    },
    PvcAnnotate {
        op: AnnOp,
    },
    PvcLiftMark,
    PvcDelete,
    PvPolicy(Policy),
    PvClaimRef,
    PvStripFinalizer,
    PvLiftMark,
    PvDelete,
    PvAnnotate {
        op: AnnOp,
    },
    NodeTaint {
        n: u8,
    },
    NodeAnnotate {
        n: u8,
        op: AnnOp,
    },
    NodeDelete {
        n: u8,
    },
    NamespaceDelete,
    /// A NodeFence carrying a release record, created by someone else than volguard.
    FenceRecord {
        n: u8,
    },
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Env {
    /// n1 is cut from the apiserver (NotReady; its containers keep running).
    Partition,
    /// n1's machine stops: its containers die.
    Crash,
    /// n1 is back (reconnected, or rebooted).
    Heal,
    /// p1's app container crash-loops (waiting) while its sidecar keeps writing.
    CrashLoop,
    /// More than `--break-glass-expiry` passes.
    Tick,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum A {
    Env(Env),
    Do(Who, Door),
}

fn describe(a: &A) -> String {
    match a {
        A::Env(e) => format!("world: {e:?}"),
        A::Do(who, d) => {
            let w = who.username();
            let what = match d {
                Door::DeletePod { p, force } => format!(
                    "DELETE pod {} (gracePeriodSeconds {})",
                    PODS[*p as usize],
                    if *force { 0 } else { 30 }
                ),
                Door::EvictPod { p } => format!(
                    "CREATE pods/eviction {} (deleteOptions.gracePeriodSeconds 0)",
                    PODS[*p as usize]
                ),
                Door::PodStatus { p, to } => format!(
                    "UPDATE pods/status {}: {}",
                    PODS[*p as usize],
                    match to {
                        StatusForge::Failed => "phase Failed",
                        StatusForge::AppTerminated => "containerStatuses[app] terminated",
                        StatusForge::SidecarTerminated =>
                            "initContainerStatuses[sidecar] terminated",
                    }
                ),
                Door::AnnotatePod { p, op } => format!(
                    "UPDATE pod {}: {}",
                    PODS[*p as usize],
                    ann_desc(*op, CONFIRM_FORCE_DELETE)
                ),
                Door::Bind {
                    p,
                    node,
                    legacy,
                    carry,
                } => format!(
                    "CREATE {} {} -> node {}{}",
                    if *legacy { "bindings" } else { "pods/binding" },
                    PODS[*p as usize],
                    NODES[*node as usize],
                    if *carry {
                        format!(
                            " with metadata.annotations {CONFIRM_FORCE_DELETE}=true, {CONFIRMED_BY}=alice, {CONFIRMED_AT}=<now>"
                        )
                    } else {
                        String::new()
                    }
                ),
                Door::PvcStripFinalizer { status } => format!(
                    "UPDATE persistentvolumeclaims{} {CLAIM}: finalizers [] ({PVC_FINALIZER} removed)",
                    if *status { "/status" } else { "" }
                ),
                Door::PvcAnnotate { op } => format!(
                    "UPDATE persistentvolumeclaim {CLAIM}: {}",
                    ann_desc(*op, ALLOW_FINALIZER_REMOVAL)
                ),
                Door::PvcLiftMark => {
                    format!("UPDATE persistentvolumeclaim {CLAIM}: {DELETE_PROTECTION} removed")
                }
                Door::PvcDelete => format!("DELETE persistentvolumeclaim {CLAIM}"),
                Door::PvPolicy(p) => format!(
                    "UPDATE persistentvolume {VOLUME}: spec.persistentVolumeReclaimPolicy {p:?}"
                ),
                Door::PvClaimRef => {
                    format!("UPDATE persistentvolume {VOLUME}: spec.claimRef.uid uid-other")
                }
                Door::PvStripFinalizer => format!(
                    "UPDATE persistentvolume {VOLUME}: finalizers [] ({PV_FINALIZER} removed)"
                ),
                Door::PvLiftMark => {
                    format!("UPDATE persistentvolume {VOLUME}: {DELETE_PROTECTION} removed")
                }
                Door::PvDelete => format!("DELETE persistentvolume {VOLUME}"),
                Door::PvAnnotate { op } => format!(
                    "UPDATE persistentvolume {VOLUME}: {}",
                    ann_desc(*op, ALLOW_FINALIZER_REMOVAL)
                ),
                Door::NodeTaint { n } => format!(
                    "UPDATE node {}: taint {OUT_OF_SERVICE_TAINT}=nodeshutdown:NoExecute added",
                    NODES[*n as usize]
                ),
                Door::NodeAnnotate { n, op } => format!(
                    "UPDATE node {}: {}",
                    NODES[*n as usize],
                    ann_desc(*op, CONFIRM_NODE_DOWN)
                ),
                Door::NodeDelete { n } => format!("DELETE node {}", NODES[*n as usize]),
                Door::NamespaceDelete => format!("DELETE namespace {NS}"),
                Door::FenceRecord { n } => format!(
                    "CREATE nodefence with spec.release (NodeDelete) for node {}",
                    NODES[*n as usize]
                ),
            };
            format!("{w}: {what}")
        }
    }
}

fn ann_desc(op: AnnOp, key: &str) -> String {
    match op {
        AnnOp::Set { mutated: true } => format!("{key}=true (volguard's mutating stamp runs)"),
        AnnOp::Set { mutated: false } => {
            format!("{key}=true, {CONFIRMED_BY}=<own name> typed (the mutating stamp did not run)")
        }
        AnnOp::SetAsAlice => {
            format!("{key}=true, {CONFIRMED_BY}=alice typed (the mutating stamp did not run)")
        }
        AnnOp::Remove => format!("{key} removed"),
    }
}

/// Apply `op` to `ann` as the client sends it (before any mutating patch).
fn write_ann(ann: &Ann, op: AnnOp, who: Who) -> (Ann, bool) {
    let mut a = *ann;
    let mutated = match op {
        AnnOp::Set { mutated } => {
            a.confirm = true;
            if !mutated {
                a.by = Some(who);
            }
            mutated
        }
        AnnOp::SetAsAlice => {
            a.confirm = true;
            a.by = Some(Who::Alice);
            false
        }
        AnnOp::Remove => {
            a.confirm = false;
            true
        }
    };
    (a, mutated)
}

/// The ghost setter after a write from `old` to `new` by `who`.
fn set_by(old: &Ann, mut new: Ann, who: Who) -> Ann {
    new.setter = match (old.confirm, new.confirm) {
        (_, false) => None,
        (false, true) => Some(who),
        (true, true) => old.setter,
    };
    new
}

// ------------------------------------------------------------------------------------ model

struct Adversary {
    /// The broken admission: this rule is never asked.
    skip: Option<Rule>,
    inits: Vec<S>,
}

impl Adversary {
    fn new(skip: Option<Rule>) -> Self {
        Adversary {
            skip,
            // Retain with a marked volume (a flipped policy), Delete with a marked claim,
            // Delete with nothing marked, and that with n1 already cut from the apiserver.
            inits: vec![
                init_state(Policy::Retain, true, false),
                init_state(Policy::Delete, false, true),
                init_state(Policy::Delete, false, false),
                {
                    let mut s = init_state(Policy::Delete, false, false);
                    s.nodes[0].machine = Machine::Cut;
                    s
                },
                // Cut, still carrying Alice's confirmation of an earlier outage, now expired,
                // with p1's app crash-looping while its sidecar writes.
                {
                    let mut s = init_state(Policy::Delete, false, false);
                    s.nodes[0].machine = Machine::Cut;
                    s.nodes[0].ann = Ann {
                        confirm: true,
                        by: Some(Who::Alice),
                        at: Some(At::Old),
                        setter: Some(Who::Alice),
                    };
                    s.pods[0].crashloop = true;
                    s.pods[0].main = C::Wait;
                    s
                },
            ],
        }
    }

    fn admit(&self, s: &S, req: &Req) -> Option<Admitted> {
        admit(s, req, self.skip)
    }

    /// Alice tells the truth: she confirms only what is so.
    fn honest(&self, s: &S, who: Who, d: &Door) -> bool {
        if who != Who::Alice {
            return true;
        }
        let sets = |op: &AnnOp| !matches!(op, AnnOp::Remove);
        match d {
            Door::NodeAnnotate { n, op } if sets(op) => {
                s.nodes[*n as usize].machine == Machine::Off
            }
            Door::AnnotatePod { p, op } if sets(op) => {
                let p = s.pods[*p as usize];
                p.proc_on.is_none()
                    || p.node
                        .is_some_and(|n| s.nodes[n as usize].machine == Machine::Off)
            }
            Door::PvcAnnotate { op } | Door::PvAnnotate { op } if sets(op) => !in_use(s),
            _ => true,
        }
    }

    /// One door, by one actor: the new state if volguard (and the apiserver) let it through.
    fn door(&self, s: &S, who: Who, d: Door) -> Option<S> {
        let mut t = s.clone();
        match d {
            Door::DeletePod { p, force } => {
                let i = p as usize;
                let pod = s.pods[i];
                if !pod.exists {
                    return None;
                }
                // The pod strategy: unscheduled and terminal pods are deleted at once.
                let now = force || pod.node.is_none() || terminal(&pod);
                if !now && pod.deleting {
                    return None;
                }
                let grace = if now { 0 } else { 30 };
                self.admit(s, &pod_delete_req(s, who, i, grace))?;
                match now {
                    true => t.remove_pod(i, who),
                    false => t.pods[i].deleting = true,
                }
            }
            Door::EvictPod { p } => {
                let i = p as usize;
                if !s.pods[i].exists {
                    return None;
                }
                let req = Req {
                    who,
                    group: "policy",
                    kind: "Eviction",
                    resource: "pods",
                    sub: Some("eviction"),
                    name: PODS[i].into(),
                    namespace: Some(NS),
                    op: "CREATE",
                    object: json!({"apiVersion": "policy/v1", "kind": "Eviction",
                        "metadata": {"name": PODS[i], "namespace": NS},
                        "deleteOptions": {"gracePeriodSeconds": 0}}),
                    old: Value::Null,
                    options: json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
                    mutated: true,
                };
                self.admit(s, &req)?;
                t.remove_pod(i, who);
            }
            Door::PodStatus { p, to } => {
                let i = p as usize;
                let mut new = s.pods[i];
                if !new.exists || new.node.is_none() {
                    return None;
                }
                match to {
                    StatusForge::Failed => new.phase = Phase::Failed,
                    StatusForge::AppTerminated => new.main = C::Term,
                    StatusForge::SidecarTerminated => new.init = C::Term,
                }
                if new == s.pods[i] {
                    return None;
                }
                self.admit(s, &pod_req(s, who, i, &new, Some("status")))?;
                if terminal(&new) && !terminal(&s.pods[i]) {
                    t.release(i, who);
                }
                t.pods[i] = new;
            }
            Door::AnnotatePod { p, op } => {
                let i = p as usize;
                if !s.pods[i].exists {
                    return None;
                }
                let (ann, mutated) = write_ann(&s.pods[i].ann, op, who);
                let mut new = s.pods[i];
                new.ann = ann;
                let mut req = pod_req(s, who, i, &new, None);
                req.mutated = mutated;
                let a = self.admit(s, &req)?;
                let ann = ann_of(&a.object, CONFIRM_FORCE_DELETE, &s.pods[i].ann);
                t.pods[i].ann = set_by(&s.pods[i].ann, ann, who);
            }
            Door::Bind {
                p,
                node,
                legacy,
                carry,
            } => {
                let i = p as usize;
                if !s.pods[i].exists {
                    return None;
                }
                let mut meta = json!({"name": PODS[i], "namespace": NS,
                    "uid": format!("uid-{}", PODS[i])});
                if carry {
                    let now = jiff::Timestamp::now()
                        .round(jiff::Unit::Second)
                        .unwrap_or_default();
                    meta["annotations"] = json!({CONFIRM_FORCE_DELETE: "true",
                        CONFIRMED_BY: "alice", CONFIRMED_AT: now.to_string()});
                }
                let req = Req {
                    who,
                    group: "",
                    kind: "Binding",
                    resource: if legacy { "bindings" } else { "pods" },
                    sub: if legacy { None } else { Some("binding") },
                    name: PODS[i].into(),
                    namespace: Some(NS),
                    op: "CREATE",
                    object: json!({"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                        "target": {"apiVersion": "v1", "kind": "Node",
                            "name": NODES[node as usize]}}),
                    old: Value::Null,
                    options: json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
                    mutated: true,
                };
                let a = self.admit(s, &req)?;
                // Then storage, with the Binding as admitted (after the mutating patch): it
                // refuses a deleted or assigned pod or a conflict, else merges the Binding's
                // metadata over the pod's.
                let pod = pod_obj(i, &s.pods[i]);
                let binding: Binding = decode(&a.object);
                if upstream::bind_refused(&pod, &binding).is_some() {
                    return None;
                }
                t.pvc.lock = a.lock;
                t.pods[i].node = Some(node);
                let merged = upstream::merge_binding(&pod.metadata, &binding);
                let stored = json!({"metadata": serde_json::to_value(&merged).expect("meta")});
                let ann = ann_of(&stored, CONFIRM_FORCE_DELETE, &s.pods[i].ann);
                t.pods[i].ann = set_by(&s.pods[i].ann, ann, who);
            }
            Door::PvcStripFinalizer { status } => {
                if !s.pvc.exists || !s.pvc.fin {
                    return None;
                }
                let mut new = s.pvc;
                new.fin = false;
                self.admit(s, &pvc_req(s, who, &new, status.then_some("status"), true))?;
                t.pvc.fin = false;
                if t.pvc.deleting {
                    t.pvc.exists = false;
                }
            }
            Door::PvcAnnotate { op } => {
                if !s.pvc.exists {
                    return None;
                }
                let (ann, mutated) = write_ann(&s.pvc.ann, op, who);
                let mut new = s.pvc;
                new.ann = ann;
                let a = self.admit(s, &pvc_req(s, who, &new, None, mutated))?;
                let ann = ann_of(&a.object, ALLOW_FINALIZER_REMOVAL, &s.pvc.ann);
                t.pvc.ann = set_by(&s.pvc.ann, ann, who);
            }
            Door::PvcLiftMark => {
                if !s.pvc.exists || !s.pvc.mark {
                    return None;
                }
                let mut new = s.pvc;
                new.mark = false;
                self.admit(s, &pvc_req(s, who, &new, None, true))?;
                t.pvc.mark = false;
            }
            Door::PvcDelete => {
                if !s.pvc.exists || s.pvc.deleting {
                    return None;
                }
                let old = pvc_json(&s.pvc);
                self.admit(
                    s,
                    &delete_req(
                        who,
                        "PersistentVolumeClaim",
                        "persistentvolumeclaims",
                        CLAIM,
                        Some(NS),
                        old,
                    ),
                )?;
                t.pvc_deleted(who);
            }
            Door::PvPolicy(policy) => {
                if !s.pv.exists || s.pv.policy == policy {
                    return None;
                }
                let mut new = s.pv;
                new.policy = policy;
                self.admit(s, &pv_req(s, who, &new, None, true))?;
                t.pv.policy = policy;
            }
            Door::PvClaimRef => {
                if !s.pv.exists || !s.pv.ref_ok {
                    return None;
                }
                let mut new = s.pv;
                new.ref_ok = false;
                self.admit(s, &pv_req(s, who, &new, None, true))?;
                t.pv.ref_ok = false;
            }
            Door::PvStripFinalizer => {
                if !s.pv.exists || !s.pv.fin {
                    return None;
                }
                let mut new = s.pv;
                new.fin = false;
                self.admit(s, &pv_req(s, who, &new, None, true))?;
                t.pv.fin = false;
                if t.pv.deleting {
                    t.pv.exists = false;
                }
            }
            Door::PvLiftMark => {
                if !s.pv.exists || !s.pv.mark {
                    return None;
                }
                let mut new = s.pv;
                new.mark = false;
                self.admit(s, &pv_req(s, who, &new, None, true))?;
                t.pv.mark = false;
            }
            Door::PvDelete => {
                if !s.pv.exists || s.pv.deleting {
                    return None;
                }
                let old = pv_json(&s.pv);
                self.admit(
                    s,
                    &delete_req(
                        who,
                        "PersistentVolume",
                        "persistentvolumes",
                        VOLUME,
                        None,
                        old,
                    ),
                )?;
                t.pv.deleting = true;
                if !t.pv.fin {
                    t.pv.exists = false;
                }
            }
            Door::PvAnnotate { op } => {
                if !s.pv.exists {
                    return None;
                }
                let (ann, mutated) = write_ann(&s.pv.ann, op, who);
                let mut new = s.pv;
                new.ann = ann;
                let a = self.admit(s, &pv_req(s, who, &new, None, mutated))?;
                let ann = ann_of(&a.object, ALLOW_FINALIZER_REMOVAL, &s.pv.ann);
                t.pv.ann = set_by(&s.pv.ann, ann, who);
            }
            Door::NodeTaint { n } => {
                let i = n as usize;
                if !s.nodes[i].exists || s.nodes[i].oos {
                    return None;
                }
                let mut new = s.nodes[i];
                new.oos = true;
                let a = self.admit(s, &node_req(s, who, i, &new, true))?;
                t.records = a.records;
                t.nodes[i].oos = true;
                t.nodes[i].oos_proven = valid(&s.nodes[i].ann);
            }
            Door::NodeAnnotate { n, op } => {
                let i = n as usize;
                if !s.nodes[i].exists {
                    return None;
                }
                let (ann, mutated) = write_ann(&s.nodes[i].ann, op, who);
                let mut new = s.nodes[i];
                new.ann = ann;
                let a = self.admit(s, &node_req(s, who, i, &new, mutated))?;
                let ann = ann_of(&a.object, CONFIRM_NODE_DOWN, &s.nodes[i].ann);
                t.nodes[i].ann = set_by(&s.nodes[i].ann, ann, who);
            }
            Door::NodeDelete { n } => {
                let i = n as usize;
                if !s.nodes[i].exists {
                    return None;
                }
                let old = node_json(i, &s.nodes[i]);
                let a = self.admit(s, &delete_req(who, "Node", "nodes", NODES[i], None, old))?;
                t.records = a.records;
                t.nodes[i].exists = false;
                t.nodes[i].deleted_proven = valid(&s.nodes[i].ann);
            }
            Door::NamespaceDelete => {
                if s.ns_deleting {
                    return None;
                }
                let req = delete_req(who, "Namespace", "namespaces", NS, None, namespace_json(s));
                self.admit(s, &req)?;
                t.ns_deleting = true;
            }
            Door::FenceRecord { n } => {
                let rec: Rec = (n, false);
                let req = Req {
                    who,
                    group: "volguard.io",
                    kind: "NodeFence",
                    resource: "nodefences",
                    sub: None,
                    name: "forged".into(),
                    namespace: None,
                    op: "CREATE",
                    object: record_json(99, &rec),
                    old: Value::Null,
                    options: Value::Null,
                    mutated: true,
                };
                self.admit(s, &req)?;
                if !t.records.contains(&rec) {
                    t.records.push(rec);
                    t.records.sort();
                }
            }
        }
        Some(t)
    }

    fn env(&self, s: &S, e: Env) -> Option<S> {
        let mut t = s.clone();
        let n1 = &mut t.nodes[0];
        match e {
            Env::Partition if n1.machine == Machine::Up => n1.machine = Machine::Cut,
            Env::Crash if n1.machine != Machine::Off => {
                n1.machine = Machine::Off;
                for p in &mut t.pods {
                    if p.proc_on == Some(0) {
                        p.proc_on = None;
                    }
                }
            }
            Env::Heal if n1.machine != Machine::Up => n1.machine = Machine::Up,
            Env::CrashLoop if s.pods[0].proc_on.is_some() && !s.pods[0].crashloop => {
                t.pods[0].crashloop = true
            }
            Env::Tick => {
                let mut any = false;
                let mut age = |a: &mut Ann| {
                    if a.at == Some(At::Fresh) {
                        a.at = Some(At::Old);
                        any = true;
                    }
                };
                for p in &mut t.pods {
                    age(&mut p.ann);
                }
                for n in &mut t.nodes {
                    age(&mut n.ann);
                }
                age(&mut t.pvc.ann);
                age(&mut t.pv.ann);
                if !any {
                    return None;
                }
            }
            _ => return None,
        }
        Some(t)
    }
}

impl S {
    fn pvc_deleted(&mut self, _who: Who) {
        if self.pvc.mark {
            self.pvc.deleted_marked = true;
        }
        self.pvc.deleting = true;
        if !self.pvc.fin {
            self.pvc.exists = false;
        }
    }
}

// ------------------------------------------------------------------ the upstream reactions
//
// Each names the Go function it follows (kubernetes/kubernetes); the writes go through admission
// like any other. Their decisions are upstream's own, ported in `volguard::rules::upstream` and
// held to the Go code by `tests/differential.rs`: which pods the attach/detach controller still
// counts (`is_pod_terminated`), which pods PodGC deletes (`podgc_deletes`,
// `podgc_is_pod_terminated`), when the PV controller releases and reclaims a volume
// (`is_volume_released`, `reclaim`), and the Binding's refusal and metadata merge
// (`bind_refused`, `merge_binding`, in the Bind door). Local, for want of a port: the kubelets,
// the namespace controller's sweep, pvc-protection's in-use check (`podUsesPVC`), pv-protection's
// (`isPVUsed`), the pod strategy's immediate deletes and the scheduler (an adversary here: it
// binds p2 to either node).

impl Adversary {
    /// `pkg/controller/volume/attachdetach/reconciler/reconciler.go: reconcile`, with
    /// `pkg/volume/util/util.go: IsPodTerminated` deciding which pods still need the volume and
    /// the RWO multi-attach check (`isMultiAttachAllowed`).
    fn attach_detach(&self, s: &mut S) {
        for n in 0..2u8 {
            let active = s
                .pods
                .iter()
                .enumerate()
                .any(|(i, p)| p.exists && p.node == Some(n) && !is_pod_terminated(i, p));
            if s.attached[n as usize] && !active {
                for i in 0..2 {
                    let p = s.pods[i];
                    if p.exists && p.node == Some(n) && !terminal(&p) {
                        s.release(i, Who::AttachDetach);
                    }
                }
                s.attached[n as usize] = false;
            }
            let other = s.attached[1 - n as usize];
            if !s.attached[n as usize] && active && s.nodes[n as usize].exists && !other {
                s.attached[n as usize] = true;
            }
        }
    }

    /// `pkg/controller/podgc/gc_controller.go`: `gcTerminated` (its threshold taken as
    /// reached), `gcTerminating`, `gcOrphaned`, `gcUnscheduledTerminating` (each through
    /// `markFailedAndDeletePod`: the status patched to Failed, then a DELETE with grace 0).
    fn podgc(&self, s: &mut S) {
        for i in 0..2 {
            let p = s.pods[i];
            if !p.exists {
                continue;
            }
            if !podgc_deletes(s, i) {
                continue;
            }
            let mut cur = s.clone();
            // `markFailedAndDeletePodWithCondition` patches any pod not yet Succeeded or Failed,
            // scheduled or not, and deletes nothing when the patch fails.
            if !terminal(&p) {
                let mut failed = p;
                failed.phase = Phase::Failed;
                if self
                    .admit(&cur, &pod_req(&cur, Who::PodGc, i, &failed, Some("status")))
                    .is_none()
                {
                    continue;
                }
                cur.release(i, Who::PodGc);
                cur.pods[i] = failed;
            }
            *s = cur;
            if self
                .admit(s, &pod_delete_req(s, Who::PodGc, i, 0))
                .is_some()
            {
                s.remove_pod(i, Who::PodGc);
            }
        }
    }

    /// `pkg/controller/volume/pvcprotection/pvc_protection_controller.go: processPVC`
    /// (`isBeingUsed`, `podUsesPVC`: a scheduled pod that has not finished uses it).
    fn pvc_protection(&self, s: &mut S) {
        if !(s.pvc.exists && s.pvc.deleting && s.pvc.fin) {
            return;
        }
        let used = s
            .pods
            .iter()
            .any(|p| p.exists && p.node.is_some() && !terminal(p));
        if used {
            return;
        }
        let mut new = s.pvc;
        new.fin = false;
        if self
            .admit(s, &pvc_req(s, Who::PvcProtection, &new, None, true))
            .is_some()
        {
            s.pvc.fin = false;
            s.pvc.exists = false;
        }
    }

    /// `pkg/controller/volume/persistentvolume/pv_controller.go`: `syncVolume` with
    /// `isVolumeReleased`, then `reclaimVolume` (`deleteVolumeOperation` deletes the storage,
    /// then the PV object; `recycleVolumeOperation` scrubs it). And
    /// `pkg/controller/volume/pvprotection/pv_protection_controller.go: processPV` (`isPVUsed`:
    /// phase Bound).
    fn pv_controller(&self, s: &mut S) {
        if !s.pv.exists {
            return;
        }
        let (released, reclaim) = volume_fate(s);
        if !s.pv.released && released {
            let mut new = s.pv;
            new.released = true;
            if self
                .admit(s, &pv_req(s, Who::PvBinder, &new, Some("status"), true))
                .is_none()
            {
                return;
            }
            s.pv.released = true;
        }
        // The status update goes first (refused: no reclaim); `reclaim` asks `isVolumeReleased`
        // again, as the delete and recycle operations do.
        if s.pv.data {
            match reclaim {
                Reclaim::Keep => {}
                Reclaim::Recycle => s.destroy(),
                Reclaim::Delete => {
                    s.destroy();
                    let old = pv_json(&s.pv);
                    let req = delete_req(
                        Who::PvBinder,
                        "PersistentVolume",
                        "persistentvolumes",
                        VOLUME,
                        None,
                        old,
                    );
                    if self.admit(s, &req).is_some() {
                        s.pv.deleting = true;
                    }
                }
            }
        }
        if s.pv.deleting && s.pv.fin && s.pv.released {
            let mut new = s.pv;
            new.fin = false;
            if self
                .admit(s, &pv_req(s, Who::PvProtection, &new, None, true))
                .is_some()
            {
                s.pv.fin = false;
            }
        }
        if s.pv.deleting && !s.pv.fin {
            s.pv.exists = false;
        }
    }

    /// `pkg/controller/namespace/deletion/namespaced_resources_deleter.go: deleteAllContent`
    /// (each pod and claim deleted with default options).
    fn namespace_controller(&self, s: &mut S) {
        if !s.ns_deleting {
            return;
        }
        for i in 0..2 {
            let p = s.pods[i];
            if !p.exists || p.deleting {
                continue;
            }
            let now = p.node.is_none() || terminal(&p);
            let grace = if now { 0 } else { 30 };
            if self
                .admit(s, &pod_delete_req(s, Who::NsController, i, grace))
                .is_some()
            {
                match now {
                    true => s.remove_pod(i, Who::NsController),
                    false => s.pods[i].deleting = true,
                }
            }
        }
        if s.pvc.exists && !s.pvc.deleting {
            let old = pvc_json(&s.pvc);
            let req = delete_req(
                Who::NsController,
                "PersistentVolumeClaim",
                "persistentvolumeclaims",
                CLAIM,
                Some(NS),
                old,
            );
            if self.admit(s, &req).is_some() {
                s.pvc_deleted(Who::NsController);
            }
        }
    }

    /// `pkg/kubelet/kubelet.go: syncPod` / `syncTerminatingPod`, `pkg/kubelet/status/
    /// status_manager.go: syncPod` (the kubelet reports what runs; it deletes a pod it stopped
    /// with grace 0): only a machine up and connected acts.
    fn kubelets(&self, s: &mut S) {
        for n in 0..2u8 {
            let node = s.nodes[n as usize];
            if node.machine != Machine::Up || !node.exists {
                continue;
            }
            let me = Who::Kubelet(n);
            for i in 0..2 {
                let p = s.pods[i];
                if p.proc_on == Some(n) && (!p.exists || p.node != Some(n)) {
                    s.pods[i].proc_on = None;
                    continue;
                }
                if !p.exists || p.node != Some(n) {
                    continue;
                }
                if p.deleting || terminal(&p) {
                    s.pods[i].proc_on = None;
                    let mut stopped = s.pods[i];
                    stopped.main = C::Term;
                    stopped.init = C::Term;
                    if stopped != p
                        && self
                            .admit(s, &pod_req(s, me, i, &stopped, Some("status")))
                            .is_some()
                    {
                        s.pods[i] = stopped;
                    }
                    if p.deleting && self.admit(s, &pod_delete_req(s, me, i, 0)).is_some() {
                        s.remove_pod(i, me);
                    }
                    continue;
                }
                if p.proc_on.is_none() && s.attached[n as usize] {
                    s.pods[i].proc_on = Some(n);
                }
                let cur = s.pods[i];
                if cur.proc_on == Some(n) {
                    let mut truth = cur;
                    truth.phase = Phase::Running;
                    truth.init = C::Run;
                    truth.main = if cur.crashloop { C::Wait } else { C::Run };
                    if truth != cur
                        && self
                            .admit(s, &pod_req(s, me, i, &truth, Some("status")))
                            .is_some()
                    {
                        s.pods[i] = truth;
                    }
                }
            }
        }
    }

    /// The controllers react until nothing changes.
    fn settle(&self, mut s: S) -> S {
        for _ in 0..12 {
            let before = s.clone();
            self.attach_detach(&mut s);
            self.podgc(&mut s);
            self.pvc_protection(&mut s);
            self.pv_controller(&mut s);
            self.namespace_controller(&mut s);
            self.kubelets(&mut s);
            if s == before {
                break;
            }
        }
        s
    }

    fn doors(&self, s: &S, out: &mut Vec<A>) {
        let mut doors = Vec::new();
        for p in 0..2u8 {
            if !s.pods[p as usize].exists {
                continue;
            }
            doors.push(Door::DeletePod { p, force: true });
            doors.push(Door::DeletePod { p, force: false });
            doors.push(Door::EvictPod { p });
            for to in [
                StatusForge::Failed,
                StatusForge::AppTerminated,
                StatusForge::SidecarTerminated,
            ] {
                doors.push(Door::PodStatus { p, to });
            }
        }
        for op in ANN_OPS {
            doors.push(Door::AnnotatePod { p: 0, op });
            doors.push(Door::PvcAnnotate { op });
            doors.push(Door::PvAnnotate { op });
            doors.push(Door::NodeAnnotate { n: 0, op });
        }
        doors.extend([
            Door::PvcStripFinalizer { status: false },
            Door::PvcStripFinalizer { status: true },
            Door::PvcLiftMark,
            Door::PvcDelete,
            Door::PvPolicy(Policy::Delete),
            Door::PvPolicy(Policy::Recycle),
            Door::PvClaimRef,
            Door::PvStripFinalizer,
            Door::PvLiftMark,
            Door::PvDelete,
            Door::NodeTaint { n: 0 },
            Door::NodeDelete { n: 0 },
            Door::NamespaceDelete,
            Door::FenceRecord { n: 0 },
        ]);
        for who in ADVERSARIES {
            for d in &doors {
                if self.honest(s, who, d) {
                    out.push(A::Do(who, *d));
                }
            }
        }
        if s.pods[1].exists && s.pods[1].node.is_none() {
            for node in 0..2u8 {
                for legacy in [false, true] {
                    out.push(A::Do(
                        Who::Scheduler,
                        Door::Bind {
                            p: 1,
                            node,
                            legacy,
                            carry: false,
                        },
                    ));
                }
                out.push(A::Do(
                    Who::Eve,
                    Door::Bind {
                        p: 1,
                        node,
                        legacy: false,
                        carry: true,
                    },
                ));
            }
        }
    }
}

impl Model for Adversary {
    type State = S;
    type Action = A;

    fn init_states(&self) -> Vec<S> {
        self.inits.clone()
    }

    fn actions(&self, s: &S, out: &mut Vec<A>) {
        for e in [
            Env::Partition,
            Env::Crash,
            Env::Heal,
            Env::CrashLoop,
            Env::Tick,
        ] {
            out.push(A::Env(e));
        }
        self.doors(s, out);
    }

    fn next_state(&self, s: &S, a: A) -> Option<S> {
        let t = match a {
            A::Env(e) => self.env(s, e)?,
            A::Do(who, d) => self.door(s, who, d)?,
        };
        let t = self.settle(t);
        (t != *s).then_some(t)
    }
}

// ---------------------------------------------------------------------------------- checking

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(default)
}

/// `VOLGUARD_ADVERSARY_INVARIANT=data` (or one_writer, release_proof, proof_by_break_glass):
/// check that one alone.
fn only() -> Option<String> {
    std::env::var("VOLGUARD_ADVERSARY_INVARIANT")
        .ok()
        .filter(|s| !s.is_empty())
}

fn describe_init(s: &S) -> String {
    let mut v = vec![format!("reclaim policy {:?}", s.pv.policy)];
    if s.pv.mark {
        v.push("the volume marked".into());
    }
    if s.pvc.mark {
        v.push("the claim marked".into());
    }
    if s.nodes[0].machine == Machine::Cut {
        v.push("n1 cut from the apiserver (NotReady), p1 still running there".into());
    }
    if s.nodes[0].ann.confirm {
        v.push("n1 carrying alice's expired confirm-node-down".into());
    }
    if s.pods[0].crashloop {
        v.push("p1's app crash-looping (waiting) while its sidecar runs".into());
    }
    v.join(", ")
}

fn path_text(init: &S, actions: &[A]) -> String {
    let mut out = format!("  from: {}\n", describe_init(init));
    for (i, a) in actions.iter().enumerate() {
        let _ = writeln!(out, "  {}. {}", i + 1, describe(a));
    }
    out
}

/// Counterexamples per invariant: the first path for each distinct last request (at most
/// `MAX_PATHS` an invariant), so that every door that breaks it is listed, not only the first.
struct Found(BTreeMap<&'static str, Vec<(String, String)>>);

const MAX_PATHS: usize = 12;

impl Found {
    fn new() -> Self {
        Found(BTreeMap::new())
    }

    fn add(&mut self, name: &'static str, last: A, path: impl FnOnce() -> String) {
        // The door, whoever used it.
        let key = describe(&last);
        let key = key
            .split_once(": ")
            .map_or(key.clone(), |(_, d)| d.to_string());
        let v = self.0.entry(name).or_default();
        if v.len() < MAX_PATHS && !v.iter().any(|(k, _)| *k == key) {
            v.push((key, path()));
        }
    }

    fn get(&self, name: &str) -> Option<&Vec<(String, String)>> {
        self.0.get(name).filter(|v| !v.is_empty())
    }

    fn merge(&mut self, other: Found) {
        for (name, v) in other.0 {
            let mine = self.0.entry(name).or_default();
            for (k, p) in v {
                if mine.len() < MAX_PATHS && !mine.iter().any(|(m, _)| *m == k) {
                    mine.push((k, p));
                }
            }
        }
    }
}

fn paths_text(v: &[(String, String)]) -> String {
    v.iter()
        .enumerate()
        .map(|(i, (_, p))| format!(" counterexample {}:\n{p}", i + 1))
        .collect()
}

/// Exhaustive to `depth` moves: the states seen and, per invariant, its shortest counterexample.
/// Breadth-first like stateright's `spawn_bfs`, but each state is checked when it is generated:
/// stateright checks a state only when it expands it, so reaching the last level would cost a
/// whole further level of admission calls. Each level's states are expanded on two threads.
fn bfs(model: &Adversary, depth: usize, one: Option<&str>) -> (usize, Found) {
    let wanted = one.map(str::to_string).or_else(only);
    let mut nodes: Vec<(S, Option<(usize, A)>)> = Vec::new();
    let mut seen: HashSet<S> = HashSet::new();
    let mut found = Found::new();
    let mut frontier: Vec<usize> = Vec::new();
    for s in model.init_states() {
        if seen.insert(s.clone()) {
            frontier.push(nodes.len());
            nodes.push((s, None));
        }
    }
    let path = |nodes: &[(S, Option<(usize, A)>)], mut i: usize| {
        let mut acts = Vec::new();
        while let Some((parent, a)) = nodes[i].1 {
            acts.push(a);
            i = parent;
        }
        acts.reverse();
        path_text(&nodes[i].0, &acts)
    };
    for _ in 0..depth {
        let expand = |chunk: &[usize]| -> Vec<(usize, A, S)> {
            let mut out = Vec::new();
            for &i in chunk {
                let s = &nodes[i].0;
                let mut acts = Vec::new();
                model.actions(s, &mut acts);
                for a in acts {
                    if let Some(t) = model.next_state(s, a) {
                        out.push((i, a, t));
                    }
                }
            }
            out
        };
        let half = frontier.len().div_ceil(2);
        let next: Vec<(usize, A, S)> = std::thread::scope(|sc| {
            let (x, y) = frontier.split_at(half);
            let h = sc.spawn(|| expand(y));
            let mut v = expand(x);
            v.extend(h.join().expect("expand"));
            v
        });
        frontier.clear();
        for (parent, a, t) in next {
            if !seen.insert(t.clone()) {
                continue;
            }
            let i = nodes.len();
            nodes.push((t, Some((parent, a))));
            frontier.push(i);
            for (name, _) in INVARIANTS {
                if wanted.as_deref().is_some_and(|w| w != name) {
                    continue;
                }
                // A state reached from a violating one violates too: only its first path counts.
                if !holds(name, &nodes[i].0) && holds(name, &nodes[parent].0) {
                    found.add(name, a, || path(&nodes, i));
                    if one.is_some() {
                        return (nodes.len(), found);
                    }
                }
            }
        }
    }
    (nodes.len(), found)
}

/// A seeded random walk of `steps` moves in walks of at most `len`: per invariant, the first
/// counterexample met.
fn walk(model: &Adversary, steps: usize, len: usize, seed: u64, one: Option<&str>) -> Found {
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let wanted = one.map(str::to_string).or_else(only);
    let mut found = Found::new();
    let mut done = 0;
    while done < steps {
        let init = model.inits[(next() % model.inits.len() as u64) as usize].clone();
        let mut s = init.clone();
        let mut path: Vec<A> = Vec::new();
        for _ in 0..len {
            let mut acts = Vec::new();
            model.actions(&s, &mut acts);
            let a = acts[(next() % acts.len() as u64) as usize];
            done += 1;
            let Some(t) = model.next_state(&s, a) else {
                continue;
            };
            path.push(a);
            for (name, _) in INVARIANTS {
                if wanted.as_deref().is_some_and(|w| w != name) {
                    continue;
                }
                if !holds(name, &t) && holds(name, &s) {
                    found.add(name, a, || path_text(&init, &path));
                    if one.is_some() {
                        return found;
                    }
                }
            }
            s = t;
            if done >= steps {
                break;
            }
        }
    }
    found
}

#[test]
fn model_adversary() {
    let depth = env_usize("VOLGUARD_ADVERSARY_DEPTH", 2);
    let steps = env_usize("VOLGUARD_ADVERSARY_STEPS", 3000);
    let wanted = only();
    let started = std::time::Instant::now();
    let (states, mut found) = bfs(&Adversary::new(None), depth, None);
    found.merge(walk(&Adversary::new(None), steps, 12, 0x5eed, None));
    let decisions = DECISIONS.load(std::sync::atomic::Ordering::Relaxed);
    let mut report = serde_json::Map::new();
    let mut failures = Vec::new();
    for (name, text) in INVARIANTS {
        if wanted.as_deref().is_some_and(|w| w != name) {
            continue;
        }
        // The broken admission must be caught by the same checkers (exhaustive first).
        let skip = broken_rule(name);
        let broken = Adversary::new(Some(skip));
        let caught = bfs(&broken, depth, Some(name))
            .1
            .get(name)
            .cloned()
            .or_else(|| {
                walk(&broken, steps, 12, 0xbad, Some(name))
                    .get(name)
                    .cloned()
            });
        match &caught {
            Some(p) => println!(
                "model adversary, broken admission ({} never asked): {text} fails\n{}",
                skip.name(),
                paths_text(p)
            ),
            None => failures.push(format!(
                "the broken admission ({} never asked) survived: the model checks nothing for {text:?}",
                skip.name()
            )),
        }
        let counter = found.get(name);
        if let Some(p) = counter {
            failures.push(format!("{text}:\n{}", paths_text(p)));
        }
        report.insert(
            name.into(),
            json!({"holds": counter.is_none(), "broken_variant_caught": caught.is_some()}),
        );
    }
    let out = json!({"depth": depth, "states": states, "random_walk_steps": steps,
        "invariants": report});
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/model");
    std::fs::create_dir_all(&dir).expect("target/model");
    std::fs::write(
        dir.join("adversary.json"),
        serde_json::to_string_pretty(&out).expect("json"),
    )
    .expect("adversary.json");
    println!(
        "model adversary: {states} states (depth {depth}) and {steps} random-walk steps, {decisions} admission decisions in {:.0?}: {}",
        started.elapsed(),
        match failures.is_empty() {
            true => "every invariant holds, every broken admission caught".to_string(),
            false => format!("{} failure(s)", failures.len()),
        }
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
