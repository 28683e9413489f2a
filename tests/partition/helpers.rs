//! What the partition scenarios share: their workloads, incidents, nodes and the checker of
//! writers.

use super::*;

// ---------------------------------------------------------------- helpers

/// A one-replica StatefulSet whose pod may run on `node` or kwok-1, tolerating unreachability
/// for `forgive` seconds (the pods' "forgiveness" volguard waits out).
pub(crate) fn statefulset(name: &str, class: &str, node: &str, forgive: i64) -> StatefulSet {
    let on = json!({"key": "kubernetes.io/hostname", "operator": "In", "values": [node, "kwok-1"]});
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": 1, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "example.invalid/app:1",
                                             "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                             "terminationGracePeriodSeconds": 5,
                             "tolerations": [
                                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": forgive},
                                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": forgive}],
                             "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                {"nodeSelectorTerms": [{"matchExpressions": [on]}]}}}}},
                 "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                             "resources": {"requests": {"storage": "1Gi"}}}}]}
    }))
    .expect("statefulset")
}

/// Start node `node` and a StatefulSet `name` whose pod runs on it (kwok-1 is cordoned while the
/// pod is placed). Returns the running pod.
pub(crate) async fn workload(
    cp: &mut ControlPlane,
    ns: &str,
    name: &str,
    class: &str,
    node: &str,
) -> Pod {
    workload_forgiving(cp, ns, name, class, node, 2).await
}

/// As `workload`, its pod tolerating unreachability for `forgive` seconds.
pub(crate) async fn workload_forgiving(
    cp: &mut ControlPlane,
    ns: &str,
    name: &str,
    class: &str,
    node: &str,
    forgive: i64,
) -> Pod {
    cp.kwok_node(node).await;
    let c = cp.admin().await;
    cp.cordon("kwok-1", true).await.expect("cordon");
    Api::<StatefulSet>::namespaced(c.clone(), ns)
        .create(
            &PostParams::default(),
            &statefulset(name, class, node, forgive),
        )
        .await
        .expect("statefulset");
    let pod = running_on(cp, ns, &format!("{name}-0"), Some(node)).await;
    cp.cordon("kwok-1", false).await.expect("uncordon");
    pod
}

/// The pod once Running (on `node` when given), not being deleted.
pub(crate) async fn running_on(cp: &ControlPlane, ns: &str, name: &str, node: Option<&str>) -> Pod {
    let pods = Api::<Pod>::namespaced(cp.admin().await, ns);
    cp.eventually(
        &format!("pod {ns}/{name} Running on {node:?}"),
        LONG,
        || {
            let pods = pods.clone();
            async move {
                let p = pods.get(name).await.ok()?;
                let phase = p.status.as_ref()?.phase.as_deref()?;
                let on = p.spec.as_ref()?.node_name.as_deref();
                (phase == "Running"
                    && p.metadata.deletion_timestamp.is_none()
                    && node.is_none_or(|n| on == Some(n)))
                .then_some(p)
            }
        },
    )
    .await
}

pub(crate) fn behave(s: &Shared, node: &str, fence: &str, unfence: Option<&str>) {
    let b = s.agent_dir.join("behaviour");
    std::fs::write(b.join(format!("{node}.fence")), fence).expect("behaviour");
    if let Some(u) = unfence {
        std::fs::write(b.join(format!("{node}.unfence")), u).expect("behaviour");
    }
}

/// The agent's ledger entry of an incident's action: (calls, runs).
pub(crate) fn ledger(s: &Shared, incident: &str, action: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(s.agent_dir.join("ledger.json")).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let o = &v[incident][action];
    (
        o["calls"].as_u64().unwrap_or(0),
        o["runs"].as_u64().unwrap_or(0),
    )
}

pub(crate) async fn incidents(c: &kube::Client, node: &str) -> Vec<NodeFence> {
    crate::support::objects::node_fences(c)
        .await
        .into_iter()
        .filter(|f| f.spec.node == node)
        .collect()
}

/// The node's incident once it reaches `phase`.
pub(crate) async fn incident_in(
    cp: &ControlPlane,
    node: &str,
    phase: Phase,
    within: Duration,
) -> NodeFence {
    let c = cp.admin().await;
    cp.eventually(
        &format!("an incident for node {node} in phase {}", phase.as_str()),
        within,
        || {
            let c = c.clone();
            async move {
                incidents(&c, node)
                    .await
                    .into_iter()
                    .find(|f| f.status.phase == phase)
            }
        },
    )
    .await
}

pub(crate) fn steps(f: &NodeFence) -> Vec<&str> {
    f.status.evidence.iter().map(|e| e.step.as_str()).collect()
}

pub(crate) fn print_record(f: &NodeFence) {
    println!(
        "  nodefence/{} node={} phase={} backend={:?} leaseRenewTime={:?} confirmedBy={:?}",
        f.metadata.name,
        f.spec.node,
        f.status.phase.as_str(),
        f.status.backend.map(|b| b.as_str()),
        f.status.lease_renew_time,
        f.status.confirmed_by
    );
    for e in &f.status.evidence {
        println!("    {} {:<16} {}", e.time, e.step, e.message);
    }
}

pub(crate) async fn tainted(c: &kube::Client, node: &str) -> bool {
    Api::<Node>::all(c.clone())
        .get_opt(node)
        .await
        .ok()
        .flatten()
        .and_then(|n| n.spec?.taints)
        .is_some_and(|t| t.iter().any(|t| t.key == OOS))
}

pub(crate) async fn ready(c: &kube::Client, node: &str) -> Option<bool> {
    let n = Api::<Node>::all(c.clone()).get_opt(node).await.ok()??;
    n.status?
        .conditions?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status == "True")
}

pub(crate) async fn not_ready(cp: &ControlPlane, node: &str) {
    let c = cp.admin().await;
    cp.eventually(&format!("node {node} NotReady"), LONG, || {
        let c = c.clone();
        async move { (ready(&c, node).await == Some(false)).then_some(()) }
    })
    .await;
}

pub(crate) async fn event_reasons(c: &kube::Client, ns: &str, name: &str) -> BTreeSet<String> {
    Api::<Event>::namespaced(c.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| e.reason)
        .collect()
}

pub(crate) async fn controller_metric(cp: &ControlPlane, name: &str) -> f64 {
    let mut total = 0.0;
    for p in &cp.controller_probes {
        let text = metrics_text(*p).await;
        total += text
            .lines()
            .filter(|l| {
                l.starts_with(name) && (l.len() == name.len() || !l[name.len()..].starts_with('_'))
            })
            .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .sum::<f64>();
    }
    total
}

/// The invariant of rules.md §7, sampled every 300 ms while a scenario runs.
pub(crate) struct Checker {
    violations: Arc<Mutex<Vec<String>>>,
    samples: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Checker {
    pub(crate) fn start(c: &kube::Client, ns: &str, fenced_dir: PathBuf) -> Checker {
        let violations = Arc::new(Mutex::new(Vec::new()));
        let samples = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (v, n, pods) = (
            violations.clone(),
            samples.clone(),
            Api::<Pod>::namespaced(c.clone(), ns),
        );
        let task = tokio::spawn(async move {
            loop {
                if let Ok(list) = pods.list(&ListParams::default()).await {
                    let mut nodes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
                    for p in &list.items {
                        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                        if matches!(phase, Some("Succeeded" | "Failed")) {
                            continue;
                        }
                        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                            continue;
                        };
                        for vol in p.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
                            if let Some(c) = &vol.persistent_volume_claim {
                                nodes
                                    .entry(c.claim_name.clone())
                                    .or_default()
                                    .insert(node.clone());
                            }
                        }
                    }
                    for (claim, on) in nodes {
                        let unfenced: Vec<&String> =
                            on.iter().filter(|n| !fenced_dir.join(n).exists()).collect();
                        if on.len() > 1 && unfenced.len() > 1 {
                            v.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                                "claim {claim} used on nodes {on:?}, unfenced {unfenced:?}"
                            ));
                        }
                    }
                    n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        Checker {
            violations,
            samples,
            task,
        }
    }

    /// Stop sampling; fail on any violation.
    pub(crate) fn finish(self) -> usize {
        self.task.abort();
        let v = self
            .violations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        assert!(v.is_empty(), "rules.md §7 invariant broken: {v:#?}");
        self.samples.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Remove a scenario's node (its kwok first): the incident ends `Done`, PodGC cleans up.
pub(crate) async fn forget_node(cp: &mut ControlPlane, node: &str) {
    remove_node(cp, node).await;
}

/// Remove a node whatever is left on it. volguard refuses deleting a Node whose pods use claims
/// without proof (rules.md §7): so the node is cordoned and stopped, and when a plain delete is
/// refused, its pods are force-deleted by a person who accepts the risk (the force-delete rule's
/// row 8: test cleanup), which drains it.
pub(crate) async fn remove_node(cp: &mut ControlPlane, node: &str) {
    let c = cp.admin().await;
    let nodes = Api::<Node>::all(c.clone());
    let _ = cp.cordon(node, true).await;
    cp.stop_kwok(node);
    for _ in 0..30 {
        match nodes.delete(node, &DeleteParams::default()).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 404 => return,
            Err(_) => {}
        }
        let on = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let pods = Api::<Pod>::all(c.clone())
            .list(&on)
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let confirm = Patch::Merge(
            json!({"metadata": {"annotations": {"volguard.io/confirm-force-delete": "true"}}}),
        );
        for p in pods {
            let (ns, name) = (
                p.metadata.namespace.unwrap_or_default(),
                p.metadata.name.unwrap_or_default(),
            );
            let api = Api::<Pod>::namespaced(c.clone(), &ns);
            let _ = api.patch(&name, &PatchParams::default(), &confirm).await;
            let _ = api.delete(&name, &force()).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("node {node} could not be removed");
}
