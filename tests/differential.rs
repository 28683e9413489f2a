//! The differential test (docs/testing.md, "Differential tests"): every port in
//! `volguard::rules::upstream` against upstream's own Go code on the same generated objects.
//!
//! A seeded generator writes thousands of cases per predicate, each a set of Kubernetes objects
//! in their JSON wire form. The Go program `e2e/differential` (path in `VOLGUARD_DIFFERENTIAL`)
//! answers each with the Kubernetes function it names, linked from k8s.io/kubernetes; this test
//! answers with the port, decoding the same JSON through the crate's model as the webhook does.
//! Any disagreement fails the test with the objects printed. The counts go to
//! target/e2e/differential.json. `make differential` builds the program and runs this.

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use volguard::model::{
    ANNOTATION_PREFIX, Binding, ContainerStates, MIGRATED_TO, Node, Pod, Pv, Pvc, SmallMap,
    from_json,
};
use volguard::rules::upstream::{self, UPSTREAM};

/// Cases per predicate.
const CASES: usize = 3_000;
const SEED: u64 = 0x5eed_2026_0137_0002;
const TIME: &str = "2026-01-01T00:00:00Z";

/// xorshift64*: deterministic, enough to spread choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Sets `key` to `value` in `obj`; `None` leaves the key out (absent, not null).
fn set(obj: &mut Value, key: &str, value: Option<Value>) {
    if let (Some(v), Some(o)) = (value, obj.as_object_mut()) {
        o.insert(key.into(), v);
    }
}

// ---------------------------------------------------------------- generators

fn deletion_timestamp(r: &mut Rng) -> Option<Value> {
    r.pick(&[
        None,
        Some(Value::Null),
        Some(json!(TIME)),
        Some(json!(TIME)),
    ])
}

/// A container status list: absent, null, empty, or statuses in every combination of states.
fn container_statuses(r: &mut Rng) -> Option<Value> {
    match r.below(6) {
        0 => None,
        1 => Some(Value::Null),
        2 => Some(json!([])),
        _ => {
            let states = [
                None,
                Some(Value::Null),
                Some(json!({})),
                Some(json!({"running": {"startedAt": TIME}})),
                Some(json!({"waiting": {"reason": "ContainerCreating"}})),
                Some(json!({"terminated": {"exitCode": 0, "finishedAt": TIME}})),
                Some(json!({"waiting": {}, "terminated": {"exitCode": 1}})),
                Some(json!({"terminated": null})),
                Some(json!({"waiting": null, "running": {}})),
                Some(json!({"running": {}, "terminated": {"exitCode": 137}})),
            ];
            let n = 1 + r.below(3);
            let list: Vec<Value> = (0..n)
                .map(|i| {
                    let mut s = json!({"name": format!("c{i}"), "ready": false, "restartCount": 0});
                    set(&mut s, "state", r.pick(&states));
                    s
                })
                .collect();
            Some(Value::Array(list))
        }
    }
}

fn string_map(r: &mut Rng, keys: &[&str], values: &[&str]) -> Option<Value> {
    match r.below(5) {
        0 => None,
        1 => Some(Value::Null),
        2 => Some(json!({})),
        _ => {
            let mut m = serde_json::Map::new();
            for _ in 0..1 + r.below(3) {
                m.insert(r.pick(keys).into(), json!(r.pick(values)));
            }
            Some(Value::Object(m))
        }
    }
}

fn pod(r: &mut Rng) -> Value {
    let mut metadata = json!({"name": "p", "namespace": "ns", "uid": "pod-uid"});
    set(&mut metadata, "deletionTimestamp", deletion_timestamp(r));
    if r.chance(20) {
        set(&mut metadata, "deletionGracePeriodSeconds", Some(json!(0)));
    }
    let mut spec = json!({"containers": [{"name": "c0", "image": "busybox"}]});
    set(
        &mut spec,
        "nodeName",
        r.pick(&[None, Some(json!("")), Some(json!("n1")), Some(json!("n1"))]),
    );
    let mut status = json!({});
    let phases = [
        None,
        Some(Value::Null),
        Some(json!("")),
        Some(json!("Pending")),
        Some(json!("Running")),
        Some(json!("Succeeded")),
        Some(json!("Failed")),
        Some(json!("Unknown")),
        Some(json!("running")),
        Some(json!("Terminated")),
    ];
    set(&mut status, "phase", r.pick(&phases));
    set(&mut status, "initContainerStatuses", container_statuses(r));
    set(&mut status, "containerStatuses", container_statuses(r));
    set(
        &mut status,
        "ephemeralContainerStatuses",
        container_statuses(r),
    );
    json!({"metadata": metadata, "spec": spec, "status": status})
}

/// A Node named as the pod's node or another, with any Ready conditions and taints.
fn node(r: &mut Rng) -> Option<Value> {
    if r.chance(25) {
        return None;
    }
    let conditions: Vec<Value> = (0..r.below(4))
        .map(|_| {
            let mut c = json!({"type": r.pick(&["Ready", "Ready", "MemoryPressure", "ready"])});
            set(
                &mut c,
                "status",
                r.pick(&[
                    None,
                    Some(json!("True")),
                    Some(json!("False")),
                    Some(json!("Unknown")),
                    Some(json!("true")),
                ]),
            );
            c
        })
        .collect();
    let taints: Vec<Value> = (0..r.below(4))
        .map(|_| {
            let mut t = json!({
                "key": r.pick(&["node.kubernetes.io/out-of-service", "node.kubernetes.io/unreachable",
                    "example.com/other", "node.kubernetes.io/out-of-service-x"]),
                "effect": r.pick(&["NoExecute", "NoSchedule", "PreferNoSchedule", ""]),
            });
            set(&mut t, "value", r.pick(&[None, Some(json!("nodeshutdown")), Some(json!(""))]));
            t
        })
        .collect();
    Some(json!({
        "metadata": {"name": r.pick(&["n1", "n1", "n1", "n2"])},
        "spec": {"taints": taints},
        "status": {"conditions": conditions},
    }))
}

fn pv(r: &mut Rng) -> Value {
    let mut metadata = json!({"name": "pv1", "uid": "pv-uid"});
    set(
        &mut metadata,
        "annotations",
        string_map(
            r,
            &[
                MIGRATED_TO,
                "pv.kubernetes.io/provisioned-by",
                "volguard.io/x",
            ],
            &["", "ebs.csi.aws.com", "kubernetes.io/aws-ebs"],
        ),
    );
    let mut spec = json!({"capacity": {"storage": "1Gi"}});
    let claim_ref = match r.below(6) {
        0 => None,
        1 => Some(Value::Null),
        _ => {
            let mut c = json!({
                "kind": "PersistentVolumeClaim",
                "namespace": r.pick(&["ns", "ns", "ns", "other"]),
                "name": r.pick(&["data", "data", "data", "data2"]),
            });
            set(
                &mut c,
                "uid",
                r.pick(&[
                    None,
                    Some(json!("")),
                    Some(json!("u1")),
                    Some(json!("u1")),
                    Some(json!("u2")),
                ]),
            );
            Some(c)
        }
    };
    set(&mut spec, "claimRef", claim_ref);
    set(
        &mut spec,
        "persistentVolumeReclaimPolicy",
        r.pick(&[
            None,
            Some(json!("Retain")),
            Some(json!("Delete")),
            Some(json!("Delete")),
            Some(json!("Recycle")),
            Some(json!("")),
            Some(json!("delete")),
            Some(json!("Garbage")),
        ]),
    );
    if r.chance(30) {
        set(
            &mut spec,
            "csi",
            Some(json!({"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"})),
        );
    } else if r.chance(30) {
        set(&mut spec, "hostPath", Some(json!({"path": "/data"})));
    }
    let mut status = json!({});
    set(
        &mut status,
        "phase",
        r.pick(&[
            None,
            Some(json!("Bound")),
            Some(json!("Released")),
            Some(json!("Failed")),
            Some(json!("Available")),
        ]),
    );
    json!({"metadata": metadata, "spec": spec, "status": status})
}

/// A claim, usually the one the PV's claimRef names.
fn claim(r: &mut Rng) -> Option<Value> {
    if r.chance(20) {
        return None;
    }
    let mut metadata = json!({"namespace": r.pick(&["ns", "ns", "ns", "other"]), "name": r.pick(&["data", "data", "data", "data2"])});
    set(
        &mut metadata,
        "uid",
        r.pick(&[
            None,
            Some(json!("")),
            Some(json!("u1")),
            Some(json!("u1")),
            Some(json!("u2")),
        ]),
    );
    let mut spec = json!({});
    set(
        &mut spec,
        "volumeName",
        r.pick(&[
            None,
            Some(json!("")),
            Some(json!("pv1")),
            Some(json!("pv1")),
            Some(json!("pv2")),
        ]),
    );
    Some(json!({"metadata": metadata, "spec": spec}))
}

const ANNOTATION_KEYS: [&str; 6] = [
    "volguard.io/a",
    "volguard.io/b",
    "volguard.io/rwo-lock",
    "example.com/other",
    "pod.beta.kubernetes.io/init-containers",
    "pod.alpha.kubernetes.io/init-container-statuses",
];
const LABEL_KEYS: [&str; 4] = [
    "app",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "kubernetes.io/hostname",
];
const VALUES: [&str; 3] = ["", "one", "two"];

/// A pod and a Binding of it: preconditions met or not, the pod bindable or not, metadata
/// overlapping the pod's.
fn binding_case(r: &mut Rng) -> Value {
    let mut pod_meta = json!({"name": "p", "namespace": "ns"});
    set(
        &mut pod_meta,
        "uid",
        r.pick(&[None, Some(json!("u1")), Some(json!("u1"))]),
    );
    set(
        &mut pod_meta,
        "resourceVersion",
        r.pick(&[None, Some(json!("5")), Some(json!("5"))]),
    );
    if r.chance(15) {
        set(&mut pod_meta, "deletionTimestamp", Some(json!(TIME)));
    }
    set(
        &mut pod_meta,
        "annotations",
        string_map(r, &ANNOTATION_KEYS, &VALUES),
    );
    set(&mut pod_meta, "labels", string_map(r, &LABEL_KEYS, &VALUES));
    let mut spec = json!({"containers": [{"name": "c0", "image": "busybox"}]});
    if r.chance(15) {
        set(&mut spec, "nodeName", Some(json!("n2")));
    }
    let mut b_meta = json!({"name": "p", "namespace": "ns"});
    set(
        &mut b_meta,
        "uid",
        r.pick(&[
            None,
            None,
            Some(json!("")),
            Some(json!("u1")),
            Some(json!("u2")),
        ]),
    );
    set(
        &mut b_meta,
        "resourceVersion",
        r.pick(&[
            None,
            None,
            Some(json!("")),
            Some(json!("5")),
            Some(json!("6")),
        ]),
    );
    set(
        &mut b_meta,
        "annotations",
        string_map(r, &ANNOTATION_KEYS, &VALUES),
    );
    set(&mut b_meta, "labels", string_map(r, &LABEL_KEYS, &VALUES));
    let mut target = json!({"name": "n1"});
    set(&mut target, "kind", r.pick(&[None, Some(json!("Node"))]));
    json!({
        "pod": {"metadata": pod_meta, "spec": spec},
        "binding": {"metadata": b_meta, "target": target},
    })
}

fn generate(predicate: &str, r: &mut Rng) -> Value {
    match predicate {
        "is_pod_terminated" | "podgc_is_pod_terminated" | "podgc_is_pod_terminating" => {
            json!({"pod": pod(r)})
        }
        "podgc_deletes" => {
            let mut input = json!({"pod": pod(r)});
            set(&mut input, "node", node(r));
            input
        }
        "is_volume_released" | "reclaim" => {
            let mut input = json!({"pv": pv(r)});
            set(&mut input, "claim", claim(r));
            input
        }
        "merge_binding" => binding_case(r),
        other => panic!("no generator for predicate {other}"),
    }
}

// ---------------------------------------------------------------- the ports

fn decode<T: for<'de> serde::Deserialize<'de>>(input: &Value, key: &str) -> Option<T> {
    let v = input.get(key)?;
    let text = v.to_string();
    Some(from_json(&text).unwrap_or_else(|e| panic!("the model refuses {key} {text}: {e}")))
}

/// The port's answer, in the Go program's JSON.
fn port(predicate: &str, input: &Value) -> Value {
    let pod: Option<Pod> = decode(input, "pod");
    let pod = || pod.as_ref().expect("input has a pod");
    match predicate {
        "is_pod_terminated" => {
            let states: ContainerStates = decode(input, "pod").expect("pod");
            json!(upstream::is_pod_terminated(pod(), &states))
        }
        "podgc_is_pod_terminated" => json!(upstream::podgc_is_pod_terminated(pod())),
        "podgc_is_pod_terminating" => json!(upstream::podgc_is_pod_terminating(pod())),
        "podgc_deletes" => {
            // The node lister's lookup by the pod's node name.
            let node: Option<Node> = decode::<Node>(input, "node")
                .filter(|n| Some(n.metadata.name.as_str()) == pod().node_name());
            json!(upstream::podgc_deletes(pod(), node.as_ref()).map(|r| r.as_str()))
        }
        "is_volume_released" | "reclaim" => {
            let pv: Pv = decode(input, "pv").expect("pv");
            // The claim cache's lookup by claimRef's namespace and name.
            let claim: Option<Pvc> = decode::<Pvc>(input, "claim").filter(|c| {
                pv.spec.claim_ref.as_ref().is_some_and(|r| {
                    r.namespace == c.metadata.namespace && r.name == c.metadata.name
                })
            });
            if predicate == "reclaim" {
                json!(upstream::reclaim(&pv, claim.as_ref()).as_str())
            } else {
                json!(upstream::is_volume_released(&pv, claim.as_ref()))
            }
        }
        "merge_binding" => {
            let binding: Binding = decode(input, "binding").expect("binding");
            let (bound, meta) = match upstream::bind_refused(pod(), &binding) {
                Some(_) => (false, pod().metadata.clone()),
                None => (true, upstream::merge_binding(&pod().metadata, &binding)),
            };
            json!({
                "bound": bound,
                "annotations": map_value(meta.annotations.as_ref()),
                "labels": map_value(meta.labels.as_ref()),
            })
        }
        other => panic!("no port for predicate {other}"),
    }
}

fn map_value(m: Option<&SmallMap>) -> Value {
    let m: BTreeMap<&str, &str> = m.into_iter().flat_map(|m| m.iter()).collect();
    json!(m)
}

/// Upstream's answer as the model can see it: the annotations the model keeps, maps with
/// `null` and `{}` alike.
fn comparable(predicate: &str, mut answer: Value) -> Value {
    if predicate == "merge_binding" {
        for key in ["annotations", "labels"] {
            let kept: BTreeMap<String, Value> = answer[key]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| {
                    key == "labels" || k.starts_with(ANNOTATION_PREFIX) || *k == MIGRATED_TO
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            answer[key] = json!(kept);
        }
    }
    answer
}

// ---------------------------------------------------------------- the run

#[derive(serde::Serialize)]
struct Row {
    predicate: &'static str,
    upstream_function: &'static str,
    cases: usize,
    mismatches: usize,
    /// Each distinct answer and how often upstream gave it: a generator that never reaches an
    /// outcome shows here (and fails the test).
    outcomes: BTreeMap<String, usize>,
}

#[test]
#[ignore = "needs the Go program: make differential"]
fn ports_agree_with_upstream() {
    let program = std::env::var("VOLGUARD_DIFFERENTIAL")
        .expect("VOLGUARD_DIFFERENTIAL: the e2e/differential binary (make differential builds it)");
    // The Makefile names the Kubernetes version the program links: the one the ports follow.
    if let Ok(linked) = std::env::var("VOLGUARD_DIFFERENTIAL_K8S_VERSION") {
        assert_eq!(
            linked,
            upstream::KUBERNETES_VERSION,
            "the ports follow {}, the program links {linked}: port the new version",
            upstream::KUBERNETES_VERSION
        );
    }
    let mut rng = Rng(SEED);
    let cases: Vec<(&str, &str, Value)> = UPSTREAM
        .iter()
        .flat_map(|(predicate, upstream)| std::iter::repeat_n((*predicate, *upstream), CASES))
        .map(|(p, u)| (p, u, generate(p, &mut rng)))
        .collect();

    let mut child = Command::new(&program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    let lines: Vec<String> = cases
        .iter()
        .map(|(p, _, input)| json!({"predicate": p, "input": input}).to_string())
        .collect();
    // Written from a thread: the program answers while it reads.
    let writer = std::thread::spawn(move || {
        for l in lines {
            writeln!(stdin, "{l}").expect("write a case");
        }
    });
    let answers: Vec<String> = BufReader::new(child.stdout.take().expect("stdout"))
        .lines()
        .map(|l| l.expect("read an answer"))
        .collect();
    writer.join().expect("writer");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{program} exited with {status}");
    assert_eq!(answers.len(), cases.len(), "one answer a case");

    let mut rows: Vec<Row> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for ((predicate, upstream_function, input), answer) in cases.iter().zip(&answers) {
        let reply: Value = serde_json::from_str(answer).expect("an answer is JSON");
        if let Some(e) = reply.get("error") {
            panic!("{predicate}: upstream's side failed: {e}\ninput: {input}");
        }
        let theirs = comparable(predicate, reply["result"].clone());
        let ours = port(predicate, input);
        if rows.last().is_none_or(|r| r.predicate != *predicate) {
            rows.push(Row {
                predicate,
                upstream_function,
                cases: 0,
                mismatches: 0,
                outcomes: BTreeMap::new(),
            });
        }
        let row = rows.last_mut().expect("a row");
        row.cases += 1;
        let outcome = match &theirs {
            Value::Object(o) => format!("bound={}", o["bound"]),
            v => v.to_string(),
        };
        *row.outcomes.entry(outcome).or_default() += 1;
        if ours != theirs {
            row.mismatches += 1;
            if failures.len() < 10 {
                failures.push(format!(
                    "{predicate} ({upstream_function}):\n  input:    {input}\n  upstream: {theirs}\n  volguard: {ours}"
                ));
            }
        }
    }

    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/e2e");
    std::fs::create_dir_all(&dir).expect("target/e2e");
    std::fs::write(
        dir.join("differential.json"),
        serde_json::to_string_pretty(&rows).expect("rows"),
    )
    .expect("write differential.json");
    println!(
        "\ndifferential, volguard's ports against Kubernetes {}:",
        upstream::KUBERNETES_VERSION
    );
    for r in &rows {
        println!(
            "  {:<26} {:>6} cases {:>3} mismatches  {:?}",
            r.predicate, r.cases, r.mismatches, r.outcomes
        );
    }
    assert!(
        failures.is_empty(),
        "the ports disagree with upstream:\n{}",
        failures.join("\n")
    );

    // Every outcome each predicate can have was reached.
    let expected: [(&str, &[&str]); 7] = [
        ("is_pod_terminated", &["true", "false"]),
        ("podgc_is_pod_terminated", &["true", "false"]),
        ("podgc_is_pod_terminating", &["true", "false"]),
        (
            "podgc_deletes",
            &[
                "null",
                "\"TerminatingOutOfService\"",
                "\"Orphaned\"",
                "\"TerminatingUnscheduled\"",
            ],
        ),
        ("is_volume_released", &["true", "false"]),
        ("reclaim", &["\"Keep\"", "\"Delete\"", "\"Recycle\""]),
        ("merge_binding", &["bound=true", "bound=false"]),
    ];
    for (predicate, outcomes) in expected {
        let row = rows
            .iter()
            .find(|r| r.predicate == predicate)
            .expect("a row per predicate");
        let seen: BTreeSet<&str> = row.outcomes.keys().map(String::as_str).collect();
        for o in outcomes {
            assert!(
                seen.contains(o),
                "{predicate}: no case reached {o} ({seen:?})"
            );
        }
    }
}
