//! Node deletion, the out-of-service taint and drains: releases that need proof.

use super::*;

/// Issue 40 points 4 and 6 among the real control loops: a Node whose running pod uses a claim is
/// not deleted without proof (and, while it still reports Ready, not confirmed down either); once
/// its kwok is stopped and node-lifecycle marks it NotReady, a person's confirmation lets the
/// deletion through, recorded as a NodeFence; PodGC then force-deletes the orphaned pod, nothing
/// refused, and the claim survives.
pub(super) async fn node_delete_guard(cp: &mut ControlPlane, ns: &str) {
    let node = format!("{ns}-node");
    cp.kwok_node(&node).await;
    let c = cp.admin().await;
    claim(cp, ns, "orphan-data").await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    pods.create(
        &PostParams::default(),
        &claim_pod("orphan", "orphan-data", Some(&node)),
    )
    .await
    .expect("pod");
    running(cp, ns, "orphan").await;
    // A drained node (nothing on it uses a claim) deletes freely.
    let spare = format!("{ns}-spare");
    cp.kwok_node(&spare).await;
    let nodes = Api::<Node>::all(c.clone());
    nodes
        .delete(&spare, &DeleteParams::default())
        .await
        .expect("a drained node deletes freely");
    cp.stop_kwok(&spare);
    let allowed = decided(cp, "force-delete", Some("allowed")).await;
    let denied = decided(cp, "force-delete", Some("denied")).await;
    cp.stop_kwok(&node);
    // Unproven: refused, with what to do.
    let (code, msg) = denial(
        nodes
            .delete(&node, &DeleteParams::default())
            .await
            .expect_err("an unproven deletion of a node whose pod uses a claim"),
    );
    assert_eq!(code, 403, "{msg}");
    assert!(
        msg.contains("node-delete.volguard.io") && msg.contains("kubectl volguard fence confirm"),
        "{msg}"
    );
    // A person's confirmation while the node still reports Ready or heartbeats: refused.
    let confirm = Patch::Merge(
        json!({"metadata": {"annotations": {"volguard.io/confirm-node-down": "true"}}}),
    );
    let (code, alive) = denial(
        nodes
            .patch(&node, &PatchParams::default(), &confirm)
            .await
            .expect_err("confirming a node that heartbeats"),
    );
    assert!(
        code == 403 && alive.contains("the node is not down"),
        "{alive}"
    );
    // Once node-lifecycle marks it NotReady and its Lease is older than --partition-after.
    let started = Instant::now();
    cp.eventually(
        "the confirmation accepted once the node is down",
        LONG,
        || {
            let nodes = nodes.clone();
            let (node, confirm) = (node.clone(), confirm.clone());
            async move {
                nodes
                    .patch(&node, &PatchParams::default(), &confirm)
                    .await
                    .ok()
                    .map(|_| ())
            }
        },
    )
    .await;
    let waited = started.elapsed().as_secs();
    nodes
        .delete(&node, &DeleteParams::default())
        .await
        .expect("deletion on the stored confirmation");
    let records = support::objects::fence_api(&c)
        .list(&ListParams::default())
        .await
        .expect("nodefences");
    let record = records
        .items
        .iter()
        .filter_map(|o| support::objects::decode_fence(o.clone()))
        .find(|f| f.spec.node == node && f.spec.release.is_some())
        .expect("the deletion is recorded as a NodeFence");
    let release = record.spec.release.clone().expect("release");
    assert!(release.proof.contains("confirm-node-down"), "{release:?}");
    assert_eq!(release.pods, vec![format!("{ns}/orphan")]);
    // `explain node` on the live cluster: the Node is gone, its release recorded.
    let kc = cp.kubeconfig_file("explainer", "e2e-user", &["system:masters"]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args(["explain", "node", &node])
        .arg(format!("--kubeconfig={}", kc.display()))
        .output()
        .expect("run explain node");
    let explained = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success()
            && explained.contains("exists:       no (deleted)")
            && explained.contains(&format!(
                "release recorded in nodefence {}",
                record.metadata.name
            )),
        "{explained}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // PodGC quarantines a missing node for 40 s, checks every 20 s.
    gone_within(cp, &pods, "pod (PodGC)", "orphan", Duration::from_secs(150)).await;
    // PodGC marks the pod Failed before it force-deletes it, so the webhook's matchConditions
    // (scheduled and not terminal) may skip the call: what matters is that nothing is refused.
    let judged = decided(cp, "force-delete", Some("allowed")).await - allowed;
    assert_eq!(decided(cp, "force-delete", Some("denied")).await, denied);
    println!(
        "node-delete-guard: unproven deletion refused; confirmation refused while the node heartbeats, accepted {waited}s later; \
         deletion recorded as nodefence/{} by {:?}; PodGC force-deleted the orphaned pod, nothing refused ({judged} reviews reached volguard)",
        record.metadata.name, release.by
    );
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    assert!(!gone(&pvcs, "orphan-data").await, "the claim must survive");
}

/// Non-graceful node shutdown: the node's kwok stops, the node goes NotReady, an operator taints
/// it `out-of-service`; taint eviction deletes the pod, PodGC force-deletes it, volguard allows it.
pub(super) async fn out_of_service(cp: &mut ControlPlane, ns: &str) {
    let node = format!("{ns}-node");
    cp.kwok_node(&node).await;
    let c = cp.admin().await;
    claim(cp, ns, "oos-data").await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    pods.create(
        &PostParams::default(),
        &claim_pod("db", "oos-data", Some(&node)),
    )
    .await
    .expect("pod");
    running(cp, ns, "db").await;
    let allowed = decided(cp, "force-delete", Some("allowed")).await;
    let denied = decided(cp, "force-delete", Some("denied")).await;
    cp.stop_kwok(&node);
    let nodes = Api::<Node>::all(c.clone());
    cp.eventually("node NotReady once its lease expires", LONG, || {
        let nodes = nodes.clone();
        let node = node.clone();
        async move {
            let n = nodes.get(&node).await.ok()?;
            n.status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Ready" && c.status != "True")
                .then_some(())
        }
    })
    .await;
    // What an operator does after confirming the node is down: the taint alone is refused
    // (rules.md §7 guards), the confirmation first lets it through.
    let taint = [
        "taint",
        "node",
        &node,
        "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
    ];
    let (ok, refused) = kubectl(cp, &taint);
    assert!(
        !ok && refused.contains("out-of-service-taint.volguard.io"),
        "{refused}"
    );
    // The confirmation counts once the node no longer heartbeats (its Lease silent for the
    // webhook's --partition-after): until then kubectl prints volguard's refusal.
    let annotate = [
        "annotate",
        "node",
        &node,
        "volguard.io/confirm-node-down=true",
    ];
    let mut alive = None;
    cp.eventually(
        "the confirmation accepted once the Lease is silent",
        LONG,
        || {
            let (ok, out) = kubectl(cp, &annotate);
            if !ok {
                assert!(out.contains("the node is not down"), "{out}");
                alive.get_or_insert(out);
            }
            async move { ok.then_some(()) }
        },
    )
    .await;
    if let Some(out) = alive {
        println!(
            "out-of-service: the confirmation refused while the node heartbeats: {}",
            out.trim()
        );
    }
    let (ok, out) = kubectl(cp, &taint);
    assert!(ok, "{out}");
    gone_within(cp, &pods, "pod (taint eviction + PodGC)", "db", LONG).await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    assert!(!gone(&pvcs, "oos-data").await, "the claim must survive");
    let judged = decided(cp, "force-delete", Some("allowed")).await - allowed;
    assert_eq!(decided(cp, "force-delete", Some("denied")).await, denied);
    println!(
        "out-of-service: {}; taint eviction + PodGC removed the pod, nothing refused ({judged} reviews reached volguard)",
        out.trim()
    );
}

/// `kubectl drain --grace-period=0` is refused on a running pod (the eviction would force-delete
/// it); a plain drain evicts gracefully through the PodDisruptionBudget and the pod finishes.
pub(super) async fn drain_eviction(cp: &mut ControlPlane, ns: &str) {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let node = format!("{ns}-node");
    cp.kwok_node(&node).await;
    let c = cp.admin().await;
    // A StatefulSet pod pinned to the node: the disruption controller needs the pod's controller
    // to count what the budget allows.
    let mut set = statefulset(
        "drainee",
        1,
        json!({"whenScaled": "Retain", "whenDeleted": "Retain"}),
    );
    if let Some(spec) = set.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        spec.node_selector = Some([("kubernetes.io/hostname".to_string(), node.clone())].into());
    }
    Api::<StatefulSet>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &set)
        .await
        .expect("statefulset");
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let first = running(cp, ns, "drainee-0").await.metadata.uid;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "drainee"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "drainee"}}}
    }))
    .expect("pdb");
    Api::<PodDisruptionBudget>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &pdb)
        .await
        .expect("pdb");
    let (ok, forced) = kubectl(
        cp,
        &[
            "drain",
            &node,
            "--grace-period=0",
            "--force",
            "--ignore-daemonsets",
            "--timeout=8s",
        ],
    );
    assert!(!ok, "forced drain went through:\n{forced}");
    assert!(
        forced.contains("eviction.volguard.io")
            && forced.contains("eviction with gracePeriodSeconds 0 of pod")
            && forced.contains("kubectl drain without --grace-period=0"),
        "{forced}"
    );
    let still = running(cp, ns, "drainee-0").await.metadata.uid;
    assert_eq!(still, first, "the refused drain replaced the pod");
    println!(
        "drain-eviction: kubectl drain --grace-period=0 refused: {}",
        forced
            .lines()
            .find(|l| l.contains("volguard"))
            .unwrap_or_default()
    );
    let (ok, drained) = kubectl(
        cp,
        &["drain", &node, "--ignore-daemonsets", "--timeout=90s"],
    );
    assert!(ok, "{drained}");
    assert!(drained.contains("drained"), "{drained}");
    let now = pods
        .get_opt("drainee-0")
        .await
        .expect("get")
        .and_then(|p| p.metadata.uid);
    assert_ne!(now, first, "the evicted pod is still there:\n{drained}");
    println!(
        "drain-eviction: plain drain (through the PodDisruptionBudget): {}",
        drained.lines().last().unwrap_or_default()
    );
    let (ok, out) = kubectl(cp, &["uncordon", &node]);
    assert!(ok, "{out}");
}
