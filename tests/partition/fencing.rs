//! A partitioned node fenced through its agent: the fence proven, a lying or slow agent, a
//! partition that heals, a zombie node, maintenance, and a return that needs a reboot.

use super::*;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};

pub(crate) async fn partition_fenced(s: &mut Shared) {
    let (ns, node) = ("p-fenced", "pf");
    let pod = workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    // The agent "powers the machine off": its kwok never comes back.
    behave(s, node, "touch \"$FENCED\"", None);
    let t0 = Instant::now();
    s.cp.stop_kwok(node);
    // Until a fence is proven, no taint.
    let c2 = c.clone();
    let early = tokio::spawn(async move {
        loop {
            let fenced = incidents(&c2, node)
                .await
                .iter()
                .any(|f| matches!(f.status.phase, Phase::Fenced | Phase::Released));
            if tainted(&c2, node).await && !fenced {
                return true;
            }
            if fenced {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let f = incident_in(&s.cp, node, Phase::Released, LONG).await;
    assert!(
        !early.await.expect("watch"),
        "the taint came before the fence was proven"
    );
    let fenced_in = t0.elapsed();
    assert_released(&c, node, &f).await;
    let n = Api::<Node>::all(c.clone()).get(node).await.expect("node");
    assert_eq!(
        n.metadata
            .annotations
            .unwrap_or_default()
            .get("volguard.io/fence-incident"),
        Some(&f.metadata.name),
        "the taint names its incident"
    );
    // PodGC force-deletes the Terminating pod; the StatefulSet's replacement runs elsewhere.
    let replacement =
        s.cp.eventually("db-0 replaced on kwok-1", LONG, || {
            let pods = Api::<Pod>::namespaced(c.clone(), ns);
            let old = pod.metadata.uid.clone();
            async move {
                let p = pods.get("db-0").await.ok()?;
                let on = p.spec.as_ref()?.node_name.clone()?;
                let phase = p.status.as_ref()?.phase.clone()?;
                (p.metadata.uid != old && on == "kwok-1" && phase == "Running").then_some(p)
            }
        })
        .await;
    let (calls, runs) = ledger(s, &f.metadata.name, "fence");
    assert_eq!(runs, 1, "the agent fenced once");
    // What operators list: node, phase, backend, age.
    let kc =
        s.cp.kubeconfig_file("kubectl-ops", "ops", &["system:masters"]);
    let out = std::process::Command::new(harness::bin_dir().join("kubectl"))
        .arg(format!("--kubeconfig={}", kc.display()))
        .args(["get", "nodefences"])
        .output()
        .expect("kubectl get nodefences");
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let header: Vec<&str> = listed
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "NODE", "PHASE", "BACKEND", "AGE"],
        "{listed}"
    );
    assert!(
        listed.lines().any(|l| l.starts_with(&f.metadata.name)
            && l.contains(" pf ")
            && l.contains("Released")
            && l.contains("webhook")),
        "{listed}"
    );
    let node_events = event_reasons(&c, "default", node).await;
    for r in [
        "PartitionDetected",
        "FenceRequested",
        "NodeFenced",
        "NodeReleased",
    ] {
        assert!(
            node_events.contains(r),
            "Node event {r} missing: {node_events:?}"
        );
    }
    let claim_events = event_reasons(&c, ns, "data-db-0").await;
    assert!(
        claim_events.contains("VolumeReleased"),
        "claim events {claim_events:?}"
    );
    let fence_events = event_reasons(&c, "default", &f.metadata.name).await;
    assert!(
        fence_events.contains("NodeFenced"),
        "NodeFence events {fence_events:?}"
    );
    assert!(controller_metric(&s.cp, "volguard_fencing_time_to_fence_seconds_count").await >= 1.0);
    let samples = check.finish();
    println!(
        "partition-fenced: released {:.0}s after the partition; db-0 replaced on {} ({} invariant samples, agent calls {calls}, runs {runs}); the incident:",
        fenced_in.as_secs_f64(),
        replacement
            .spec
            .and_then(|s| s.node_name)
            .unwrap_or_default(),
        samples
    );
    print_record(&f);
    // explain-node-fenced (issue 44 point 2 on the live cluster): why this node is tainted and
    // what holds it, as an operator asks it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args(["explain", "node", node])
        .arg(format!("--kubeconfig={}", kc.display()))
        .output()
        .expect("volguard explain node");
    let explained = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{explained}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        format!("Node {node}"),
        "tainted:      yes, on volguard's incident".to_string(),
        format!("{} Released (webhook)", f.metadata.name),
        format!("next:         released by incident {}", f.metadata.name),
    ] {
        assert!(explained.contains(&want), "{want:?} not in:\n{explained}");
    }
    println!("explain-node-fenced: $ kubectl volguard explain node {node}\n{explained}");
    forget_node(&mut s.cp, node).await;
    let done = incident_in(&s.cp, node, Phase::Done, Duration::from_secs(30)).await;
    assert_eq!(steps(&done).last(), Some(&"node-deleted"));
}

pub(crate) async fn partition_lying_agent(s: &mut Shared) {
    let (ns, node) = ("p-lying", "lie");
    let pod = workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    // Answers "fenced" after 6 s and fences nothing: the node comes back while it is asked.
    behave(s, node, "touch \"$FENCED.asked\"; sleep 6", None);
    s.cp.stop_kwok(node);
    let asked = s.agent_dir.join("fenced").join(format!("{node}.asked"));
    s.cp.eventually("the agent asked to fence", LONG, || {
        let asked = asked.clone();
        async move { asked.exists().then_some(()) }
    })
    .await;
    s.cp.restart_kwok(node);
    let never_tainted = {
        let c = c.clone();
        tokio::spawn(async move {
            let until = Instant::now() + Duration::from_secs(40);
            while Instant::now() < until {
                if tainted(&c, node).await {
                    return false;
                }
                if incidents(&c, node)
                    .await
                    .iter()
                    .any(|f| f.status.phase == Phase::Failed)
                {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            true
        })
    };
    let f = incident_in(&s.cp, node, Phase::Failed, LONG).await;
    assert!(
        never_tainted.await.expect("watch"),
        "a node whose fence did not hold was tainted"
    );
    assert!(!tainted(&c, node).await);
    assert_eq!(steps(&f).last(), Some(&"proof-failed"), "{:?}", steps(&f));
    assert!(
        f.status
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("renewed since"),
        "{:?}",
        f.status.message
    );
    // The claim stays; the pod is the same one (kwok, the node's kubelet, may finish its graceful
    // deletion now that it is back, as a kubelet does).
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    if let Some(p) = pods.get_opt("db-0").await.expect("pod") {
        assert!(
            p.metadata.uid == pod.metadata.uid || p.spec.and_then(|s| s.node_name).is_some(),
            "no force delete happened"
        );
    }
    let pvcs = Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(c.clone(), ns);
    assert!(
        pvcs.get_opt("data-db-0").await.expect("claim").is_some(),
        "the claim stays"
    );
    assert!(controller_metric(&s.cp, "volguard_fencing_backend_failures_total").await >= 1.0);
    check.finish();
    println!(
        "partition-lying-agent: the agent answered fenced, the Lease was renewed: Failed, no taint"
    );
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

pub(crate) async fn partition_agent_timeout(s: &mut Shared) {
    let (ns, node) = ("p-timeout", "slow");
    workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    behave(s, node, "sleep 20; touch \"$FENCED\"", None);
    s.cp.stop_kwok(node);
    // The webhook backend hangs past its 8 s; the incident moves on to the manual backend.
    s.cp.eventually("the incident on its manual backend", LONG, || {
        let c = c.clone();
        async move {
            incidents(&c, node).await.into_iter().find(|f| {
                f.status.phase == Phase::Fencing
                    && f.status.backend == Some(volguard::model::fence::BackendKind::Manual)
            })
        }
    })
    .await;
    assert!(!tainted(&c, node).await);
    // Meanwhile `explain pvc` says which node the claim waits on and which incident handles it.
    let kc =
        s.cp.kubeconfig_file("explainer", "carol", &["system:masters"]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args(["explain", "pvc", "data-db-0", "-n", ns])
        .arg(format!("--kubeconfig={}", kc.display()))
        .output()
        .expect("run explain");
    let explained = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{explained}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        explained.contains("partition:    pod db-0 waits on node slow: incident slow-")
            && explained.contains("waits on partitioned node slow: fencing incident slow-"),
        "{explained}"
    );
    // A person confirms (kubectl volguard fence confirm), as the admin user.
    let kc =
        s.cp.kubeconfig_file("confirmer", "alice", &["system:masters"]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args(["fence", "confirm", node, "--partition-after=10s"])
        .arg(format!("--kubeconfig={}", kc.display()))
        .output()
        .expect("run fence confirm");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("confirmed") && text.contains("alice"),
        "{text}"
    );
    let f = incident_in(&s.cp, node, Phase::Released, LONG).await;
    assert!(
        f.status
            .confirmed_by
            .as_deref()
            .unwrap_or_default()
            .starts_with("alice"),
        "{:?}",
        f.status.confirmed_by
    );
    let st: Vec<&str> = steps(&f).into_iter().filter(|s| *s != "progress").collect();
    assert_eq!(
        st,
        [
            "detected",
            "fence-requested",
            "fence-requested",
            "fenced",
            "released"
        ],
        "webhook, then manual"
    );
    assert!(
        f.status
            .evidence
            .iter()
            .any(|e| e.message.contains("backend webhook failed")),
        "the webhook's timeout is recorded"
    );
    // The fenced marker only comes from the person here (the agent's script was cut short), so
    // the checker treats the node as unfenced: still no second node may use the claim.
    check.finish();
    println!("partition-agent-timeout: webhook timed out, fenced by alice's confirmation");
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

pub(crate) async fn partition_heals(s: &mut Shared) {
    let (ns, node) = ("p-heals", "heal");
    workload(&mut s.cp, ns, "db", "fence-manual", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    s.cp.stop_kwok(node);
    // A manual class: the incident waits for a person, and the node returns first.
    incident_in(&s.cp, node, Phase::Fencing, LONG).await;
    s.cp.restart_kwok(node);
    let tainted_seen = {
        let c = c.clone();
        tokio::spawn(async move {
            loop {
                if tainted(&c, node).await {
                    return true;
                }
                if incidents(&c, node)
                    .await
                    .iter()
                    .any(|f| f.status.phase == Phase::Aborted)
                {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let f = incident_in(&s.cp, node, Phase::Aborted, LONG).await;
    assert!(
        !tainted_seen.await.expect("watch"),
        "a Ready node was tainted"
    );
    assert_eq!(ready(&c, node).await, Some(true));
    assert_eq!(
        f.spec.backends,
        [volguard::model::fence::BackendKind::Manual]
    );
    check.finish();
    println!("partition-heals: the node came back before any proof: Aborted, never tainted");
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

pub(crate) async fn partition_zombie(s: &mut Shared) {
    let (ns, node) = ("p-zombie", "zombie");
    workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    behave(
        s,
        node,
        "touch \"$FENCED\"",
        Some("sleep 5; rm -f \"$FENCED\""),
    );
    s.cp.stop_kwok(node);
    incident_in(&s.cp, node, Phase::Released, LONG).await;
    running_on(&s.cp, ns, "db-0", Some("kwok-1")).await;
    // The fenced machine boots again.
    s.cp.restart_kwok(node);
    let rec = incident_in(&s.cp, node, Phase::Recovering, LONG).await;
    assert!(
        tainted(&c, node).await,
        "the taint stays while the fence is undone"
    );
    let f = incident_in(&s.cp, node, Phase::Done, LONG).await;
    assert!(!tainted(&c, node).await, "the taint goes once unfenced");
    let (_, runs) = ledger(s, &f.metadata.name, "unfence");
    assert_eq!(runs, 1, "unfenced once");
    assert_eq!(steps(&f).last(), Some(&"recovered"));
    assert!(
        controller_metric(&s.cp, "volguard_fencing_time_to_recover_seconds_count").await >= 1.0
    );
    check.finish();
    println!(
        "partition-zombie: the fenced node returned at {}: taint kept until unfenced, then removed",
        rec.status.unfence_requested_at.unwrap_or_default()
    );
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

/// Issue 40 point 8: a node that reports a planned-maintenance condition (KEP-5683) is not
/// partitioned, it is being worked on: never fenced, and the hold says why.
pub(crate) async fn partition_maintenance(s: &mut Shared) {
    let (ns, node) = ("p-maint", "maint");
    workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    behave(s, node, "touch \"$FENCED\"", None);
    s.cp.stop_kwok(node);
    let maint = json!({"status": {"conditions": [{"type": "MaintenanceInProgress", "status": "True",
        "reason": "PlannedMaintenance", "message": "e2e: planned maintenance"}]}});
    Api::<Node>::all(c.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(maint))
        .await
        .expect("maintenance condition");
    not_ready(&s.cp, node).await;
    // Well past detection (10 s) and forgiveness (2 s): still nothing.
    let held =
        s.cp.eventually("FencingHeld names the maintenance", LONG, || {
            let c = c.clone();
            async move {
                Api::<Event>::namespaced(c, "default")
                    .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .filter(|e| e.reason.as_deref() == Some("FencingHeld"))
                    .filter_map(|e| e.message)
                    .find(|m| m.contains("MaintenanceInProgress"))
            }
        })
        .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        incidents(&c, node).await.is_empty(),
        "a node in maintenance was fenced"
    );
    assert!(!tainted(&c, node).await);
    check.finish();
    println!(
        "partition-maintenance: NotReady with MaintenanceInProgress=True: no incident, no taint; Event: {held}"
    );
    forget_node(&mut s.cp, node).await;
}

/// Issue 40 point 2: a fenced node that returns without a reboot, its kubelet still reporting a
/// released volume, stays `Recovering` (tainted, fenced); a new bootID releases it.
pub(crate) async fn partition_needs_reboot(s: &mut Shared) {
    let (ns, node) = ("p-reboot", "reboot");
    workload(&mut s.cp, ns, "db", "fence-auto", node).await;
    let c = s.cp.admin().await;
    let nodes = Api::<Node>::all(c.clone());
    // What its kubelet reports: this boot, and a volume mounted for the pod.
    let volume = "kubernetes.io/host-path/e2e-reboot-data";
    let reported =
        |boot: &str| json!({"status": {"nodeInfo": {"bootID": boot}, "volumesInUse": [volume]}});
    nodes
        .patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(reported("boot-1")),
        )
        .await
        .expect("node status");
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    behave(s, node, "touch \"$FENCED\"", Some("rm -f \"$FENCED\""));
    s.cp.stop_kwok(node);
    let released = incident_in(&s.cp, node, Phase::Released, LONG).await;
    assert_eq!(released.status.boot_id.as_deref(), Some("boot-1"));
    assert_eq!(released.status.released_volumes, vec![volume.to_string()]);
    running_on(&s.cp, ns, "db-0", Some("kwok-1")).await;
    // The machine comes back without a reboot, the volume still mounted.
    s.cp.restart_kwok(node);
    nodes
        .patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(reported("boot-1")),
        )
        .await
        .expect("node status");
    let held = incident_in(&s.cp, node, Phase::Recovering, LONG).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let still = incidents(&c, node)
        .await
        .into_iter()
        .find(|f| f.metadata.name == held.metadata.name)
        .expect("incident");
    assert_eq!(
        still.status.phase,
        Phase::Recovering,
        "unfenced without a reboot"
    );
    let why = still.status.message.clone().unwrap_or_default();
    assert!(
        why.contains("without a reboot") && why.contains(volume),
        "{why}"
    );
    assert!(tainted(&c, node).await, "the taint stays until the reboot");
    assert_eq!(
        ledger(s, &held.metadata.name, "unfence").1,
        0,
        "unfenced before the reboot"
    );
    // The machine reboots.
    nodes
        .patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(reported("boot-2")),
        )
        .await
        .expect("node status");
    let f = incident_in(&s.cp, node, Phase::Done, LONG).await;
    assert!(!tainted(&c, node).await, "the taint goes after the reboot");
    check.finish();
    println!(
        "partition-needs-reboot: back with bootID boot-1 and {volume} still in use: Recovering ({why}); bootID boot-2: Done"
    );
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

/// A claim bound statically (`storageClassName: ""`) names no class: its namespace opts it in,
/// and its node is fenced and released like any other (fencing once read a class called "" for
/// it, failed, and retried without end).
pub(crate) async fn partition_static_claim(s: &mut Shared) {
    let (ns, node) = ("p-static", "static");
    let c = s.cp.admin().await;
    Api::<Namespace>::all(c.clone())
        .patch(
            ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"volguard.io/fencing": "auto"}}})),
        )
        .await
        .expect("opt the namespace in");
    // The volume the claim binds to: no class, reserved for the StatefulSet's claim.
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": "p-static-data"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain",
                 "hostPath": {"path": "/tmp/volguard-e2e-p-static"},
                 "claimRef": {"namespace": ns, "name": "data-db-0"}}
    }))
    .expect("volume");
    Api::<PersistentVolume>::all(c.clone())
        .create(&PostParams::default(), &pv)
        .await
        .expect("create volume");
    workload(&mut s.cp, ns, "db", "", node).await;
    let claim = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
        .get("data-db-0")
        .await
        .expect("claim");
    let spec = claim.spec.unwrap_or_default();
    assert_eq!(spec.storage_class_name.as_deref(), Some(""), "no class");
    assert_eq!(spec.volume_name.as_deref(), Some("p-static-data"));
    behave(s, node, "touch \"$FENCED\"", None);
    s.cp.stop_kwok(node);
    let f = incident_in(&s.cp, node, Phase::Released, LONG).await;
    assert_released(&c, node, &f).await;
    println!(
        "partition-static-claim: a claim of no class, opted in by its namespace: fenced and released"
    );
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

/// A released incident took every step, and its node carries the out-of-service taint.
async fn assert_released(c: &kube::Client, node: &str, f: &NodeFence) {
    assert_eq!(
        steps(f),
        ["detected", "fence-requested", "fenced", "released"],
        "incident steps"
    );
    assert!(tainted(c, node).await, "out-of-service taint after release");
}
