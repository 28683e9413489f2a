//! Remediators and the limits: a trusted remediator's taint and node deletion, a storm, a
//! controller restart, a claim not opted in, and the guards.

use super::*;

/// A workload on `node` (a class that did not opt in: the remediator, not volguard, handles it),
/// and clients as the admin and as the two trusted remediators (RBAC lets them act; volguard
/// decides).
pub(crate) async fn remediated_workload(
    s: &mut Shared,
    ns: &str,
    node: &str,
) -> (kube::Client, kube::Client, kube::Client) {
    workload(&mut s.cp, ns, "db", "e2e-hostpath", node).await;
    let groups = ["system:serviceaccounts", "system:masters"];
    (
        s.cp.admin().await,
        s.cp.client_as(FAR, &groups).await,
        s.cp.client_as(CAPI, &groups).await,
    )
}

/// Issue 40 point 7: medik8s fence-agents-remediation, trusted with `taint`, adds the out-of-service
/// taint after its own fencing (its exact call: a patch of the Node's taints): refused while the
/// node heartbeats, then allowed and recorded; cluster-api's identity, trusted only to delete
/// Nodes, may not taint.
pub(crate) async fn remediator_taint(s: &mut Shared) {
    let (ns, node) = ("p-far", "far");
    let (c, far, capi) = remediated_workload(s, ns, node).await;
    let taint = Patch::Merge(
        json!({"spec": {"taints": [{"key": OOS, "value": "nodeshutdown", "effect": "NoExecute"}]}}),
    );
    s.cp.stop_kwok(node);
    let e = Api::<Node>::all(far.clone())
        .patch(node, &PatchParams::default(), &taint)
        .await
        .expect_err("a remediator's taint on a node that still heartbeats");
    let (_, alive) = denial(e);
    assert!(alive.contains("the node is not down"), "{alive}");
    not_ready(&s.cp, node).await;
    let e =
        s.cp.eventually(
            "cluster-api's identity refused the taint once the node is down",
            LONG,
            || {
                let capi = capi.clone();
                let taint = taint.clone();
                async move {
                    let e = Api::<Node>::all(capi)
                        .patch(node, &PatchParams::default(), &taint)
                        .await
                        .err()?;
                    let (_, m) = denial(e);
                    m.contains("nothing proves the node is down").then_some(m)
                }
            },
        )
        .await;
    assert!(!tainted(&c, node).await, "{e}");
    Api::<Node>::all(far.clone())
        .patch(node, &PatchParams::default(), &taint)
        .await
        .expect("the trusted remediator's taint");
    let record = incidents(&c, node)
        .await
        .into_iter()
        .find(|f| f.spec.release.is_some())
        .expect("the remediator's taint is recorded");
    let release = record.spec.release.clone().expect("release");
    assert_eq!(release.action, volguard::model::fence::ReleaseAction::Taint);
    assert_eq!(release.by, FAR);
    // The taint releases the pod (taint eviction, PodGC); its replacement runs on kwok-1.
    running_on(&s.cp, ns, "db-0", Some("kwok-1")).await;
    println!(
        "remediator-taint: refused while the node heartbeated; cluster-api's identity refused; fence-agents-remediation's taint allowed, recorded as nodefence/{} ({:?} by {})",
        record.metadata.name, release.action, release.by
    );
    forget_node(&mut s.cp, node).await;
}

/// Issue 40 point 7: cluster-api, trusted with `delete-node`, deletes the Node of a Machine it
/// removed (its exact call: DELETE of the Node): refused while the node heartbeats, then allowed
/// and recorded; fence-agents-remediation's identity, trusted only to taint, may not delete it.
pub(crate) async fn remediator_node_delete(s: &mut Shared) {
    let (ns, node) = ("p-capi", "capi");
    let (c, far, capi) = remediated_workload(s, ns, node).await;
    s.cp.stop_kwok(node);
    let e = Api::<Node>::all(capi.clone())
        .delete(node, &DeleteParams::default())
        .await
        .expect_err("deleting a node that still heartbeats");
    let (_, alive) = denial(e);
    assert!(alive.contains("the node is not down"), "{alive}");
    not_ready(&s.cp, node).await;
    s.cp.eventually(
        "fence-agents-remediation's identity refused the delete once the node is down",
        LONG,
        || {
            let far = far.clone();
            async move {
                let e = Api::<Node>::all(far)
                    .delete(node, &DeleteParams::default())
                    .await
                    .err()?;
                let (_, m) = denial(e);
                m.contains("nothing proves the machine is off")
                    .then_some(())
            }
        },
    )
    .await;
    Api::<Node>::all(capi.clone())
        .delete(node, &DeleteParams::default())
        .await
        .expect("the trusted remediator's delete");
    let record = incidents(&c, node)
        .await
        .into_iter()
        .find(|f| f.spec.release.is_some())
        .expect("the deletion is recorded");
    let release = record.spec.release.clone().expect("release");
    assert_eq!(
        release.action,
        volguard::model::fence::ReleaseAction::NodeDelete
    );
    assert_eq!(release.by, CAPI);
    assert_eq!(release.pods, vec![format!("{ns}/db-0")]);
    println!(
        "remediator-node-delete: refused while the node heartbeated; fence-agents-remediation's identity refused; cluster-api's delete allowed, recorded as nodefence/{} (pods {:?})",
        record.metadata.name, release.pods
    );
    forget_node(&mut s.cp, node).await;
}

pub(crate) async fn partition_storm(s: &mut Shared) {
    let ns = "p-storm";
    // Two nodes never turn NotReady at the same instant (the node monitor looks every 5 s): the
    // pods forgive 20 s, so both count as unhealthy before either could be fenced.
    workload_forgiving(&mut s.cp, ns, "a", "fence-auto", "storm-a", 20).await;
    workload_forgiving(&mut s.cp, ns, "b", "fence-auto", "storm-b", 20).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    for n in ["storm-a", "storm-b"] {
        behave(s, n, "touch \"$FENCED\"", None);
    }
    s.cp.stop_kwok("storm-a");
    s.cp.stop_kwok("storm-b");
    not_ready(&s.cp, "storm-a").await;
    not_ready(&s.cp, "storm-b").await;
    s.cp.eventually("volguard_fencing_storm 1", LONG, || async {
        (controller_metric(&s.cp, "volguard_fencing_storm").await == 1.0).then_some(())
    })
    .await;
    // Well past detection and forgiveness (20 s): still nothing.
    tokio::time::sleep(Duration::from_secs(30)).await;
    for n in ["storm-a", "storm-b"] {
        assert!(
            incidents(&c, n).await.is_empty(),
            "node {n} was fenced in a storm"
        );
        assert!(!tainted(&c, n).await);
    }
    let held = Api::<Event>::namespaced(c.clone(), "default")
        .list(&ListParams::default().fields("involvedObject.name=storm-a"))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("FencingHeld"))
        .filter_map(|e| e.message)
        .collect::<Vec<_>>();
    assert!(held.iter().any(|m| m.contains("storm")), "{held:?}");
    check.finish();
    println!(
        "partition-storm: 2 of 4 nodes down at once: nothing fenced, volguard_fencing_storm=1, Event: {}",
        held[0]
    );
    forget_node(&mut s.cp, "storm-a").await;
    forget_node(&mut s.cp, "storm-b").await;
}

pub(crate) async fn partition_restart(s: &mut Shared) {
    let (ns, node) = ("p-restart", "restart");
    workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    behave(s, node, "sleep 3; touch \"$FENCED\"", None);
    s.cp.stop_kwok(node);
    let f = incident_in(&s.cp, node, Phase::Fencing, LONG).await;
    // Killed right after "fence requested" was recorded, while the agent works.
    for mut p in std::mem::take(&mut s.cp.controllers) {
        p.kill();
    }
    s.cp.controller_probes.clear();
    s.cp.start_controller("replica-b").await;
    let done = incident_in(&s.cp, node, Phase::Released, LONG).await;
    assert_eq!(
        done.metadata.name, f.metadata.name,
        "the same incident resumed"
    );
    assert_eq!(incidents(&c, node).await.len(), 1, "one incident");
    let (calls, runs) = ledger(s, &f.metadata.name, "fence");
    assert_eq!(runs, 1, "the agent fenced once (asked {calls} times)");
    assert_eq!(
        steps(&done)
            .iter()
            .filter(|s| **s == "fence-requested")
            .count(),
        1,
        "fence requested once"
    );
    check.finish();
    println!(
        "partition-restart: controller killed after fence requested; the next one resumed: agent asked {calls}x, fenced once"
    );
    print_record(&done);
    forget_node(&mut s.cp, node).await;
}

pub(crate) async fn partition_opt_out(s: &mut Shared) {
    let (ns, node) = ("p-optout", "optout");
    let pod = workload(&mut s.cp, ns, "db", "e2e-hostpath", node).await;
    let c = s.cp.admin().await;
    s.cp.stop_kwok(node);
    not_ready(&s.cp, node).await;
    // Detection (10 s) + forgiveness (2 s) + margin: nothing happens, as upstream.
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    s.cp.eventually("db-0 Terminating (taint eviction)", LONG, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("db-0").await.ok()?;
            p.metadata.deletion_timestamp.is_some().then_some(())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(
        incidents(&c, node).await.is_empty(),
        "no incident for an opted-out class"
    );
    assert!(!tainted(&c, node).await);
    let p = pods.get("db-0").await.expect("pod stays Terminating");
    assert_eq!(p.metadata.uid, pod.metadata.uid);
    println!(
        "partition-opt-out: no opt-in: no incident, no taint, db-0 stays Terminating (upstream's behaviour)"
    );
    forget_node(&mut s.cp, node).await;
}

pub(crate) async fn partition_guards(s: &mut Shared) {
    let (ns, node) = ("p-guards", "guard");
    let c = s.cp.admin().await;
    // A forged terminal phase on a running pod (on a healthy node) is refused.
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "busy"},
        "spec": {"nodeName": "kwok-2", "containers": [{"name": "app", "image": "example.invalid/app:1"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &p).await.expect("pod");
    running_on(&s.cp, ns, "busy", None).await;
    let forged = pods
        .patch_status(
            "busy",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await;
    match forged {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403, "{e:?}");
            assert!(e.message.contains("only its kubelet"), "{}", e.message);
        }
        other => panic!("a forged Failed phase was not refused: {other:?}"),
    }
    // A person's out-of-service taint on a down node: refused without confirmation.
    workload(&mut s.cp, ns, "db", "e2e-hostpath", node).await;
    s.cp.stop_kwok(node);
    not_ready(&s.cp, node).await;
    let kc =
        s.cp.kubeconfig_file("kubectl-bob", "bob", &["system:masters"]);
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new(harness::bin_dir().join("kubectl"))
            .arg(format!("--kubeconfig={}", kc.display()))
            .args(args)
            .output()
            .expect("kubectl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let taint = format!("{OOS}=nodeshutdown:NoExecute");
    let (ok, out) = kubectl(&["taint", "node", node, &taint]);
    assert!(!ok, "refused: {out}");
    assert!(out.contains("volguard.io/confirm-node-down=true"), "{out}");
    assert!(!tainted(&c, node).await);
    let allowed_before = decided(&s.cp, "pod-status", Some("allowed")).await;
    let denied_before = decided(&s.cp, "pod-status", Some("denied")).await;
    let (ok, out) = kubectl(&[
        "annotate",
        "node",
        node,
        "volguard.io/confirm-node-down=true",
    ]);
    assert!(ok, "{out}");
    let (ok, out2) = kubectl(&["taint", "node", node, &taint]);
    assert!(ok, "{out2}");
    assert!(
        out2.contains("manual fencing incident"),
        "the warning: {out2}"
    );
    // Recorded as a manual incident.
    let f = incident_in(&s.cp, node, Phase::Released, Duration::from_secs(30)).await;
    assert_eq!(
        f.spec.backends,
        [volguard::model::fence::BackendKind::Manual]
    );
    // PodGC marks the Terminating pod Failed and deletes it: its own marking passes.
    let pod_gone = s.cp.eventually("db-0 removed by PodGC", LONG, || {
        let pods = pods.clone();
        async move {
            match pods.get_opt("db-0").await.ok()? {
                None => Some(()),
                Some(p) => (p.spec?.node_name.as_deref() != Some(node)).then_some(()),
            }
        }
    });
    pod_gone.await;
    let allowed = decided(&s.cp, "pod-status", Some("allowed")).await - allowed_before;
    assert_eq!(
        decided(&s.cp, "pod-status", Some("denied")).await,
        denied_before
    );
    println!(
        "partition-guards: forged phase refused; taint refused without confirmation, then allowed with it ({}), recorded as {}; PodGC's marking passed ({allowed} pods/status reviews allowed)",
        out2.lines()
            .find(|l| l.contains("Warning"))
            .unwrap_or("")
            .trim(),
        f.metadata.name
    );
    forget_node(&mut s.cp, node).await;
}
