//! Nodes that stop answering: a force delete on a partitioned node, partition healing through a
//! real power fence, and a fence agent that lies; the recovery time split into its phases.

use super::*;

/// A StatefulSet pod writing on node-a, whose network is then cut (its kubelet goes silent,
/// its container keeps writing). The user does what the non-graceful-shutdown page says: force
/// delete the pod and taint the node out-of-service. Without volguard the replacement starts on
/// node-b while the old container still writes: two writers on one ReadWriteOnce volume. With
/// volguard both steps are refused (nobody proved node-a down), and the old writer stays alone.
pub(super) async fn s_force_delete_partitioned(s: &mut Shared) {
    for on in [false, true] {
        volguard(s, on).await;
        let ns = format!("dl-force-{}", mode(on));
        let c = s.cp.admin().await;
        // Forgiving the unreachable node for an hour: nothing but the user's steps moves the pod.
        let (old, path, _) = placed_writer(s, &ns, ATTACHED.class, 3600).await;
        s.nodes.partition("node-a", true);
        let nodes: Api<Node> = Api::all(c.clone());
        s.cp.eventually("node-a is NotReady", Duration::from_secs(90), || async {
            let n = nodes.get("node-a").await.ok()?;
            let ready = n
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Ready")?;
            (ready.status != "True").then_some(())
        })
        .await;
        let pods: Api<Pod> = Api::namespaced(c.clone(), &ns);
        let forced = refusal(
            pods.delete(
                "db-0",
                &DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await,
        );
        let tainted = refusal(
            nodes
                .patch("node-a", &PatchParams::default(), &Patch::Merge(json!({"spec": {"taints": [
                    {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]}})))
                .await,
        );
        // Long enough for the replacement to be placed, attached, started and to write.
        let replaced = replacement(s, &ns, &old, &path, Duration::from_secs(40)).await;
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        let outcome = match (&forced, &tainted, &replaced) {
            (None, None, Some(p)) => format!("forced; replacement ran on {}", node_of(p)),
            (None, None, None) => "forced; no replacement ran".to_string(),
            (f, t, _) => format!(
                "force delete {}, taint {}",
                f.as_deref()
                    .map_or("allowed".into(), |m| format!("refused ({})", rule_of(m))),
                t.as_deref()
                    .map_or("allowed".into(), |m| format!("refused ({})", rule_of(m)))
            ),
        };
        let r = record(s, "force-delete-partitioned", on, &path, &seen, &outcome).await;
        // Heal, and leave nothing writing: the StatefulSet goes, its pods with it.
        s.nodes.partition("node-a", false);
        let _ = nodes
            .patch(
                "node-a",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"taints": null}})),
            )
            .await;
        remove_writer(s, &ns).await;
        if on {
            assert!(
                forced.is_some(),
                "volguard let a running pod on an unfenced node be force-deleted"
            );
            assert_eq!((r.lost, r.overlaps), (0, 0), "with volguard: {r:?}");
        } else {
            assert!(
                replaced.is_some(),
                "without volguard the replacement should run: {r:?}"
            );
            assert!(
                r.overlaps > 0,
                "without volguard two writers overlap: {r:?}"
            );
        }
    }
}

// ---------------------------------------------------------------- partition healing

async fn incident(c: &kube::Client, node: &str) -> Option<NodeFence> {
    support::objects::fence_api(c)
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .filter_map(support::objects::decode_fence)
        .filter(|f| f.spec.node == node)
        .max_by_key(|f| f.metadata.creation_timestamp)
}

/// node-a's incident, once `Done` after its reboot proof.
async fn done_after_reboot(s: &Shared, c: &kube::Client) -> NodeFence {
    s.cp.eventually(
        "node-a's incident is Done after the reboot proof",
        Duration::from_secs(120),
        || async {
            incident(c, "node-a")
                .await
                .filter(|f| f.status.phase == volguard::model::fence::Phase::Done)
        },
    )
    .await
}

fn ts(s: Option<&str>) -> Option<jiff::Timestamp> {
    s?.parse().ok()
}

/// The machine clock of a record (seconds since boot) as a wall-clock time.
fn wall(uptime: f64) -> jiff::Timestamp {
    let now_up: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let back = jiff::SignedDuration::from_secs_f64(now_up - uptime);
    jiff::Timestamp::now() - back
}

fn secs(a: Option<jiff::Timestamp>, b: Option<jiff::Timestamp>) -> Option<f64> {
    Some(b?.duration_since(a?).as_secs_f64())
}

/// A one-replica StatefulSet `db` writing to its claim of `class`, placed on node-a, its pod
/// tolerating an unreachable node for `forgive` seconds (volguard waits that out before it fences).
async fn placed_writer(s: &mut Shared, ns: &str, class: &str, forgive: i64) -> (Pod, PathBuf, f64) {
    let c = s.cp.admin().await;
    namespace(&c, ns).await;
    s.cp.cordon("node-b", true).await.expect("cordon");
    let mut spec = writer_spec("data");
    spec["volumes"] = json!([]);
    spec["tolerations"] = json!([
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": forgive},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": forgive}]);
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}}, "spec": spec},
                 "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                             "resources": {"requests": {"storage": "1Mi"}}}}]}
    }))
    .expect("statefulset");
    let t = Instant::now();
    Api::<StatefulSet>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &sts)
        .await
        .expect("create statefulset");
    let old = running_pod(s, ns, "db-0").await;
    assert_eq!(node_of(&old), "node-a");
    let path = log_path(s, ns, "data-db-0").await;
    records_of(&path, &uid(&old), 1, Duration::from_secs(60)).await;
    // A pod start on a healthy node, claim attach included: part of the physical limit.
    let start = t.elapsed().as_secs_f64();
    s.cp.cordon("node-b", false).await.expect("uncordon");
    records_of(&path, &uid(&old), 10, Duration::from_secs(60)).await;
    (old, path, start)
}

async fn remove_writer(s: &Shared, ns: &str) {
    let c = s.cp.admin().await;
    let _ = Api::<StatefulSet>::namespaced(c.clone(), ns)
        .delete("db", &DeleteParams::default())
        .await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), ns);
    s.cp.eventually(
        "the StatefulSet's pods are gone",
        Duration::from_secs(120),
        || async {
            pods.list(&ListParams::default())
                .await
                .ok()?
                .items
                .is_empty()
                .then_some(())
        },
    )
    .await;
}

/// The replacement of `old` once it runs on another node and has written `n` records.
async fn replacement(
    s: &Shared,
    ns: &str,
    old: &Pod,
    path: &std::path::Path,
    within: Duration,
) -> Option<Pod> {
    let pods: Api<Pod> = Api::namespaced(s.cp.admin().await, ns);
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(p) = pods.get_opt("db-0").await.ok().flatten()
            && uid(&p) != uid(old)
            && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        {
            records_of(path, &uid(&p), 20, Duration::from_secs(30)).await;
            return Some(p);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// Partition healing on real nodes, end to end. node-a's network is cut while its StatefulSet
/// pod writes. With volguard: detection, a power fence through the fence agent (every process of
/// the machine killed), proof, release (out-of-service taint, force delete), the replacement
/// attached and writing on node-b; then the network heals and the machine is powered on with a
/// new boot ID: its reboot proof, after which the fence is undone and the taint goes. Without
/// volguard nothing releases the pod: no second writer, and no writer at all until node-a is
/// back. The recovery time is split into its phases beside the physical limit on this run
/// (target/e2e/recovery.json; `make bench` copies it into its report).
pub(super) async fn s_partition_heals(s: &mut Shared) {
    for on in [false, true] {
        volguard(s, on).await;
        let _ = std::fs::remove_file(s.agent_dir.join("behaviour/node-a"));
        let ns = format!("dl-heal-{}", mode(on));
        let c = s.cp.admin().await;
        let (old, path, pod_start) = placed_writer(s, &ns, FENCED_CLASS, 2).await;
        s.nodes.partition("node-a", true);
        let (outcome, next) = if on {
            let replaced = replacement(s, &ns, &old, &path, Duration::from_secs(150)).await;
            let f = incident(&c, "node-a")
                .await
                .expect("an incident for node-a");
            // When kcm marked node-a NotReady (its Ready condition's transition, whole seconds).
            let not_ready = Api::<Node>::all(c.clone())
                .get("node-a")
                .await
                .ok()
                .and_then(|n| n.status?.conditions)
                .and_then(|cs| {
                    cs.into_iter()
                        .find(|c| c.type_ == "Ready" && c.status != "True")
                })
                .and_then(|c| c.last_transition_time)
                .map(|t| t.0);
            let Some(new) = replaced else {
                panic!(
                    "no replacement ran; incident: {:?}\n{}",
                    f.status,
                    s.nodes.logs()
                );
            };
            s.nodes.partition("node-a", false);
            s.nodes.power_on(&s.cp, "node-a").await;
            let done = done_after_reboot(s, &c).await;
            let untainted = Api::<Node>::all(c.clone())
                .get("node-a")
                .await
                .ok()
                .and_then(|n| n.spec?.taints)
                .is_none_or(|t| {
                    t.iter()
                        .all(|t| t.key != "node.kubernetes.io/out-of-service")
                });
            assert!(
                untainted,
                "node-a keeps the out-of-service taint after Done"
            );
            recovery_split(&done, &new, &path, pod_start, not_ready);
            // The old pod went by volguard's hand (PodGC's predicate, at once), not PodGC's pass.
            let mut released = 0.0;
            for p in s.cp.controller_probes.clone() {
                let text = support::objects::metrics_text(p).await;
                released += text
                    .lines()
                    .filter(|l| l.starts_with("volguard_fencing_pods_released"))
                    .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
                    .sum::<f64>();
            }
            assert!(
                released >= 1.0,
                "volguard deleted none of the released node's pods (volguard_fencing_pods_released {released})"
            );
            (
                format!(
                    "fenced (power), released; replacement on {}; node-a back after reboot proof",
                    node_of(&new)
                ),
                Some(new),
            )
        } else {
            let replaced = replacement(s, &ns, &old, &path, Duration::from_secs(40)).await;
            s.nodes.partition("node-a", false);
            (
                match &replaced {
                    Some(p) => format!("replacement ran on {}", node_of(p)),
                    None => "no replacement in 40 s (the pod waits on the unreachable node)".into(),
                },
                replaced,
            )
        };
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        let r = record(s, "partition-heals", on, &path, &seen, &outcome).await;
        remove_writer(s, &ns).await;
        assert_eq!((r.lost, r.overlaps), (0, 0), "{} volguard: {r:?}", mode(on));
        if on {
            assert!(next.is_some() && r.writers.len() == 2, "{r:?}");
        }
    }
}

/// A hung machine is a dead node: node-a's every process is frozen (the writer holds its volume
/// and would write again the moment it resumed), nothing answers, and its Lease goes silent while
/// the machine stays frozen. With volguard it is fenced like a powered-off one: the power fence
/// thaws and kills it, the agent's verify command proves no process is left before it says
/// "fenced", and the replacement writes on node-b. Without volguard nothing moves the pod. Either
/// way the machine is then thawed (and, fenced, powered on): the old writer never writes again
/// after the replacement began.
pub(super) async fn s_frozen_machine(s: &mut Shared) {
    for on in [false, true] {
        volguard(s, on).await;
        let _ = std::fs::remove_file(s.agent_dir.join("behaviour/node-a"));
        let ns = format!("dl-frozen-{}", mode(on));
        let c = s.cp.admin().await;
        let (old, path, _) = placed_writer(s, &ns, FENCED_CLASS, 2).await;
        s.nodes.freeze("node-a", true);
        let replaced = replacement(
            s,
            &ns,
            &old,
            &path,
            Duration::from_secs(if on { 150 } else { 40 }),
        )
        .await;
        let f = incident(&c, "node-a").await;
        let outcome = if on {
            let Some(new) = &replaced else {
                panic!(
                    "a frozen machine was not recovered; incident: {:?}\n{}",
                    f.map(|f| f.status),
                    s.nodes.logs()
                );
            };
            // The proof the agent gave for this incident (its ledger), and no process is left.
            let name = f
                .as_ref()
                .map(|f| f.metadata.name.clone())
                .unwrap_or_default();
            let ledger: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(s.agent_dir.join("ledger.json")).unwrap_or_default(),
            )
            .unwrap_or_default();
            let answer = &ledger[&name]["fence"];
            assert!(
                answer["state"] == "Done"
                    && answer["message"].as_str().is_some_and(
                        |m| m.contains("proven: no process of node-a's machine is left")
                    ),
                "the agent said fenced without its proof for {name}: {answer}"
            );
            assert!(!s.nodes.running("node-a"), "the fenced machine still runs");
            format!(
                "frozen machine fenced (proven), released; replacement on {}",
                node_of(new)
            )
        } else {
            match &replaced {
                Some(p) => format!("replacement ran on {}", node_of(p)),
                None => "no replacement in 40 s (the pod waits on the hung node)".into(),
            }
        };
        // The machine resumes: thawed (a frozen one writes again), or powered on after its fence.
        s.nodes.freeze("node-a", false);
        if !s.nodes.running("node-a") {
            s.nodes.power_on(&s.cp, "node-a").await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        let r = record(s, "frozen-machine", on, &path, &seen, &outcome).await;
        remove_writer(s, &ns).await;
        assert_eq!((r.lost, r.overlaps), (0, 0), "{} volguard: {r:?}", mode(on));
        if on {
            assert_eq!(r.writers.len(), 2, "{r:?}");
            done_after_reboot(s, &c).await;
        } else {
            assert!(replaced.is_none(), "{r:?}");
        }
    }
}

/// The same partition with a fence agent that answers "fenced" and fences nothing. While the
/// partition lasts, the node's Lease is silent either way, so nothing volguard can read tells
/// the lie from the truth: it releases, and the old container (still running behind the cut)
/// and the replacement both write. The row shows that overlap; docs/fencing.md says why a
/// backend must really fence.
pub(super) async fn s_lying_agent(s: &mut Shared) {
    volguard(s, true).await;
    std::fs::write(s.agent_dir.join("behaviour/node-a"), "lie").expect("behaviour");
    let ns = "dl-lying";
    let c = s.cp.admin().await;
    let (old, path, _) = placed_writer(s, ns, FENCED_CLASS, 2).await;
    s.nodes.partition("node-a", true);
    let replaced = replacement(s, ns, &old, &path, Duration::from_secs(150)).await;
    let f = incident(&c, "node-a").await;
    // Heal: node-a's kubelet finds its pod deleted and stops the old container.
    s.nodes.partition("node-a", false);
    let _ = std::fs::remove_file(s.agent_dir.join("behaviour/node-a"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let seen = records::snapshot(&read(&path).unwrap_or_default());
    let outcome = match (&replaced, &f) {
        (Some(p), _) => format!(
            "agent lied; released; replacement on {} beside the old writer",
            node_of(p)
        ),
        (None, Some(f)) => format!("not released: {}", f.status.phase.as_str()),
        (None, None) => "no incident".into(),
    };
    let r = record(s, "partition-lying-agent", true, &path, &seen, &outcome).await;
    remove_writer(s, ns).await;
    if replaced.is_some() {
        assert!(
            r.overlaps > 0,
            "released on a lie, yet the checker saw no overlap: {r:?}"
        );
    } else {
        assert_eq!(r.overlaps, 0, "{r:?}");
    }
    s.cp.eventually(
        "node-a's incident ends",
        Duration::from_secs(120),
        || async {
            incident(&c, "node-a").await.filter(|f| {
                matches!(
                    f.status.phase,
                    volguard::model::fence::Phase::Done | volguard::model::fence::Phase::Failed
                )
            })
        },
    )
    .await;
}

/// From the node's last heartbeat to the replacement's first record, phase by phase, beside the
/// physical limit (kcm's node-monitor grace + the pod's forgiveness + the fence agent's own time
/// + a pod start on a healthy node, measured on this run).
fn recovery_split(
    f: &NodeFence,
    new: &Pod,
    path: &std::path::Path,
    pod_start: f64,
    not_ready: Option<jiff::Timestamp>,
) {
    let st = &f.status;
    let heartbeat = ts(st.lease_renew_time.as_deref());
    let detected = f.metadata.creation_timestamp;
    let fence_asked = ts(st.fence_requested_at.as_deref());
    let fenced = ts(st.fenced_at.as_deref());
    let released = ts(st.released_at.as_deref());
    let created = new.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let scheduled = support::objects::condition_time(new, "PodScheduled");
    let sandbox = support::objects::condition_time(new, "PodReadyToStartContainers");
    let first = read(path)
        .unwrap_or_default()
        .lines()
        .filter_map(records::parse)
        .find(|r| r.writer == uid(new))
        .map(|r| wall(r.at));
    let phases = [
        ("detection", secs(heartbeat, detected)),
        ("fence", secs(detected, fenced)),
        ("proof_and_release", secs(fenced, released)),
        ("reschedule", secs(released, scheduled.or(created))),
        ("attach_and_mount", secs(scheduled, sandbox)),
        ("start", secs(sandbox, first)),
    ];
    let total = secs(heartbeat, first);
    let agent = secs(fence_asked, fenced).unwrap_or(0.0);
    let limit = 16.0 + 2.0 + agent + pod_start;
    // The same limit with kcm's detection as it happened (its grace, sampled every
    // node-monitor-period) and the pod's forgiveness (2 s), both waited out by rule.
    let kcm = secs(heartbeat, not_ready);
    let cluster_limit = kcm.map(|k| k + 2.0 + agent + pod_start);
    let mut out =
        String::from("\nrecovery on real nodes (node-a partitioned, power-fenced), seconds:\n");
    for (name, v) in &phases {
        out += &format!(
            "  {name:<20} {}\n",
            v.map_or("-".into(), |v| format!("{v:.1}"))
        );
    }
    out += &format!(
        "  {:<20} {}\n  {:<20} {limit:.1}  (node-monitor grace 16 s + forgiveness 2 s + fence agent {agent:.1} s + pod start on a healthy node {pod_start:.1} s)\n",
        "total",
        total.map_or("-".into(), |v| format!("{v:.1}")),
        "limit"
    );
    if let (Some(k), Some(l)) = (kcm, cluster_limit) {
        out += &format!(
            "  {:<20} {l:.1}  (kcm marked the node NotReady {k:.0} s after its last heartbeat + forgiveness 2 s + fence agent + pod start)\n",
            "cluster limit"
        );
    }
    println!("{out}");
    let mut json = serde_json::Map::new();
    for (name, v) in phases {
        json.insert(format!("{name}_seconds"), json!(v));
    }
    json.insert("total_seconds".into(), json!(total));
    json.insert("limit_seconds".into(), json!(limit));
    json.insert("cluster_limit_seconds".into(), json!(cluster_limit));
    json.insert("kcm_not_ready_seconds".into(), json!(kcm));
    json.insert("node_monitor_grace_seconds".into(), json!(16.0));
    json.insert("fence_agent_seconds".into(), json!(agent));
    json.insert("pod_start_seconds".into(), json!(pod_start));
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/e2e");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("recovery.json"),
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    );
    // `make bench` runs this scenario after its own measurements: the split joins its report.
    if let Ok(report) = std::env::var("VOLGUARD_BENCH_REPORT") {
        let mut all: serde_json::Value = std::fs::read_to_string(&report)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_else(|| json!({}));
        // Beside this incident, the ratios over every incident the nemesis runs measured
        // (`make robustness` / `make e2e`; this scenario's last run is among them).
        let summary =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/robustness/summary.json");
        let nemesis: serde_json::Value = std::fs::read_to_string(summary)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let r = &nemesis["recovery"];
        let ratio = total.map(|t| t / limit);
        json.insert(
            "p50_ratio".into(),
            r.get("p50_ratio").cloned().unwrap_or(json!(ratio)),
        );
        json.insert(
            "max_ratio".into(),
            r.get("max_ratio").cloned().unwrap_or(json!(ratio)),
        );
        json.insert(
            "incidents".into(),
            r.get("incidents").cloned().unwrap_or_else(|| json!([])),
        );
        if let Some(o) = all.as_object_mut() {
            o.insert("recovery".into(), serde_json::Value::Object(json));
        }
        std::fs::write(
            &report,
            serde_json::to_string_pretty(&all).unwrap_or_default(),
        )
        .expect("write the bench report");
        println!("wrote recovery into {report}");
    }
}
