//! StatefulSets, ephemeral volumes, Jobs, namespace deletion and the `Unused` condition: upstream's control loops with volguard beside them.

use super::*;

/// A StatefulSet scaled 3 -> 1 with `whenScaled: Delete`: claims 1 and 2 are deleted (owned by
/// their pods, removed by the garbage collector) and released only after their pods are gone, as
/// the watch's deletion revisions prove.
pub(super) async fn statefulset_scale(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let sets = Api::<StatefulSet>::namespaced(c.clone(), ns);
    let retention = json!({"whenScaled": "Delete", "whenDeleted": "Retain"});
    sets.create(&PostParams::default(), &statefulset("web", 3, retention))
        .await
        .expect("statefulset");
    for i in 0..3 {
        running(cp, ns, &format!("web-{i}")).await;
    }
    let deletions = Deletions::watch(&c, ns).await;
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scale");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    for i in [1, 2] {
        gone_within(cp, &pvcs, "claim", &format!("data-web-{i}"), LONG).await;
        let pod_at = cp
            .eventually("pod deletion seen by the watch", WAIT, || async {
                deletions.at(&format!("pod/web-{i}"))
            })
            .await;
        let claim_at = cp
            .eventually("claim deletion seen by the watch", WAIT, || async {
                deletions.at(&format!("pvc/data-web-{i}"))
            })
            .await;
        assert!(
            claim_at > pod_at,
            "data-web-{i} vanished at revision {claim_at}, before web-{i} ({pod_at})"
        );
        println!(
            "statefulset-scale: web-{i} gone at revision {pod_at}, data-web-{i} at {claim_at}"
        );
    }
    let kept = pvcs.get("data-web-0").await.expect("data-web-0 kept");
    assert!(finalizers(&kept).contains(&PVCF.to_string()));
}

/// A claim deleted under a running StatefulSet pod waits (DeletionPostponed names the pod); the
/// pod deleted, its replacement is refused while the claim terminates (by the StatefulSet
/// controller's own check of its cache, and by volguard for anyone who tries anyway); once the
/// claim is gone the controller recreates claim and pod, and the new claim (new UID) carries its
/// protection finalizer.
pub(super) async fn statefulset_recreate(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let sets = Api::<StatefulSet>::namespaced(c.clone(), ns);
    // A second finalizer on the claim keeps it terminating (as a slow CSI detach would) for as
    // long as the test needs to show the refusals.
    sets.create(
        &PostParams::default(),
        &statefulset(
            "web",
            1,
            json!({"whenScaled": "Retain", "whenDeleted": "Retain"}),
        ),
    )
    .await
    .expect("statefulset");
    running(cp, ns, "web-0").await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let old_uid = pvcs
        .get("data-web-0")
        .await
        .expect("claim")
        .metadata
        .uid
        .expect("uid");
    pvcs.patch(
        "data-web-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": [PVCF, HOLD]}})),
    )
    .await
    .expect("hold");
    pvcs.delete("data-web-0", &DeleteParams::default())
        .await
        .expect("delete claim");
    let postponed = cp
        .eventually("DeletionPostponed on data-web-0", WAIT, || {
            let c = c.clone();
            async move {
                events(&c, ns, "data-web-0", Some("DeletionPostponed"))
                    .await
                    .into_iter()
                    .next()
            }
        })
        .await;
    assert!(postponed.contains("web-0"), "{postponed}");
    println!("statefulset-recreate: {postponed}");
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    pods.delete("web-0", &DeleteParams::default())
        .await
        .expect("delete pod");
    // The StatefulSet controller tries to recreate web-0 and fails while the claim terminates.
    let failed = cp
        .eventually("FailedCreate for web-0 on the StatefulSet", LONG, || {
            let c = c.clone();
            async move {
                events(&c, ns, "web", Some("FailedCreate"))
                    .await
                    .into_iter()
                    .find(|m| m.contains("web-0"))
            }
        })
        .await;
    println!("statefulset-recreate: FailedCreate: {failed}");
    assert!(
        failed.contains("is being deleted"),
        "FailedCreate without a reason about the claim: {failed}"
    );
    // Whoever races the controller's cache (here: the same pod by hand) meets volguard.
    let mut same = claim_pod("web-0", "data-web-0", None);
    same.spec.as_mut().expect("spec").hostname = Some("web-0".into());
    let err = pods
        .create(&PostParams::default(), &same)
        .await
        .expect_err("pod on a terminating claim");
    let (code, msg) = denial(err);
    assert!(
        code == 403 || code == 400,
        "unexpected status {code}: {msg}"
    );
    assert!(
        msg.contains("pod-create.volguard.io") && msg.contains("is being deleted"),
        "{msg}"
    );
    println!("statefulset-recreate: a racing create is refused: {msg}");
    // Release the hold: volguard (and kcm) release the unused claim, the controller recreates it.
    release_hold(&pvcs, "data-web-0").await;
    let new = cp
        .eventually("a new data-web-0 (new UID)", LONG, || {
            let pvcs = pvcs.clone();
            let old_uid = old_uid.clone();
            async move {
                let p = pvcs.get("data-web-0").await.ok()?;
                (p.metadata.uid.as_deref() != Some(old_uid.as_str())).then_some(p)
            }
        })
        .await;
    assert!(
        finalizers(&new).contains(&PVCF.to_string()),
        "{:?}",
        new.metadata
    );
    running(cp, ns, "web-0").await;
    println!(
        "statefulset-recreate: data-web-0 recreated (uid {} -> {}) with {PVCF}, web-0 runs again",
        old_uid,
        new.metadata.uid.unwrap_or_default()
    );
}

/// A generic ephemeral volume: the ephemeral-volume controller's claim is owned by its pod and
/// released after the pod is gone; a same-name pod created while the old claim still terminates
/// is refused, then runs once the claim is gone.
pub(super) async fn ephemeral_volume(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let eph = || -> Pod {
        let mut t = pod_template(
            "eph",
            json!({"name": "data", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}),
        );
        t["metadata"]["name"] = json!("eph");
        serde_json::from_value(t).expect("pod")
    };
    pods.create(&PostParams::default(), &eph())
        .await
        .expect("pod");
    let first = running(cp, ns, "eph").await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let owned = pvcs.get("eph-data").await.expect("generated claim");
    let owner = owned
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|o| o.kind == "Pod")
        .expect("owned by the pod");
    assert_eq!(owner.uid, first.metadata.uid.clone().expect("uid"));
    // Hold the claim in Terminating past the pod's end, as a slow detach would.
    pvcs.patch(
        "eph-data",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": [PVCF, HOLD]}})),
    )
    .await
    .expect("hold");
    pods.delete("eph", &DeleteParams::default())
        .await
        .expect("delete pod");
    gone_within(cp, &pods, "pod", "eph", LONG).await;
    // The garbage collector deletes the claim its owner left behind.
    cp.eventually("GC deletes eph-data", LONG, || {
        let pvcs = pvcs.clone();
        async move {
            pvcs.get("eph-data")
                .await
                .ok()?
                .metadata
                .deletion_timestamp
                .map(|_| ())
        }
    })
    .await;
    let err = pods
        .create(&PostParams::default(), &eph())
        .await
        .expect_err("same-name pod on the old claim");
    let (_, msg) = denial(err);
    assert!(
        msg.contains("pod-create.volguard.io") && msg.contains("eph-data"),
        "{msg}"
    );
    println!("ephemeral-volume: same-name pod refused: {msg}");
    release_hold(&pvcs, "eph-data").await;
    gone_within(cp, &pvcs, "claim", "eph-data", LONG).await;
    pods.create(&PostParams::default(), &eph())
        .await
        .expect("same-name pod once the claim is gone");
    running(cp, ns, "eph").await;
    let fresh = pvcs.get("eph-data").await.expect("new generated claim");
    assert_ne!(fresh.metadata.uid, owned.metadata.uid);
    assert!(finalizers(&fresh).contains(&PVCF.to_string()));
}

/// Trust review point 12 among the real controllers: the owner of a mounted ephemeral claim cannot
/// be re-pointed or removed (upstream's pvc-protection trusts that UID), while the garbage
/// collector's orphaning (`kubectl delete pod --cascade=orphan`) still works.
pub(super) async fn ephemeral_owner_repointed(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let mut t = pod_template(
        "eph",
        json!({"name": "data", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}),
    );
    t["metadata"]["name"] = json!("eph");
    let pod: Pod = serde_json::from_value(t).expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    let running_pod = running(cp, ns, "eph").await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let claim = pvcs.get("eph-data").await.expect("generated claim");
    let mut owners = claim.metadata.owner_references.clone().expect("owned");
    assert_eq!(
        owners[0].uid,
        running_pod.metadata.uid.clone().expect("uid")
    );
    owners[0].uid = "00000000-0000-4000-8000-0000000000bb".into();
    for (what, refs) in [("re-pointed", json!(owners)), ("removed", json!(null))] {
        let e = pvcs
            .patch(
                "eph-data",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"ownerReferences": refs}})),
            )
            .await
            .expect_err("the owner of a mounted ephemeral claim changed");
        let (code, msg) = denial(e);
        assert_eq!(code, 403, "{what}: {msg}");
        assert!(msg.contains("--cascade=orphan"), "{what}: {msg}");
        println!("ephemeral-owner-repointed: owner {what}: refused");
    }
    pods.delete(
        "eph",
        &DeleteParams {
            propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
            ..Default::default()
        },
    )
    .await
    .expect("delete --cascade=orphan");
    cp.eventually("the garbage collector orphans eph-data", LONG, || {
        let pvcs = pvcs.clone();
        async move {
            let p = pvcs.get("eph-data").await.ok()?;
            p.metadata
                .owner_references
                .unwrap_or_default()
                .is_empty()
                .then_some(())
        }
    })
    .await;
    gone_within(cp, &pods, "pod", "eph", LONG).await;
    assert!(
        pvcs.get("eph-data").await.is_ok(),
        "the orphaned claim stays"
    );
    println!(
        "ephemeral-owner-repointed: --cascade=orphan: the garbage collector removed the owner, the claim stays"
    );
}

/// A completed Job pod still blocks its claim (the event says to delete the pod); the TTL
/// controller removes Job and pod, and the claim is released.
pub(super) async fn job_completion(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    claim(cp, ns, "results").await;
    let mut template = pod_template(
        "batch",
        json!({"name": "data", "persistentVolumeClaim": {"claimName": "results"}}),
    );
    template["spec"]["restartPolicy"] = json!("Never");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "batch"},
        "spec": {"ttlSecondsAfterFinished": 15, "backoffLimit": 0, "template": template}
    }))
    .expect("job");
    Api::<Job>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &job)
        .await
        .expect("job");
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let done = cp
        .eventually("the Job's pod Succeeded", LONG, || {
            let pods = pods.clone();
            async move {
                pods.list(&ListParams::default().labels("job-name=batch"))
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .find(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
                    })?
                    .metadata
                    .name
            }
        })
        .await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    pvcs.delete("results", &DeleteParams::default())
        .await
        .expect("delete claim");
    let postponed = cp
        .eventually("DeletionPostponed naming the finished pod", WAIT, || {
            let c = c.clone();
            async move {
                events(&c, ns, "results", Some("DeletionPostponed"))
                    .await
                    .into_iter()
                    .next()
            }
        })
        .await;
    assert!(
        postponed.contains(&done) && postponed.contains("delete"),
        "{postponed}"
    );
    assert!(
        !gone(&pvcs, "results").await,
        "claim released under a finished pod"
    );
    println!("job-completion: {postponed}");
    gone_within(cp, &pods, "pod (TTL after finished)", &done, LONG).await;
    gone_within(cp, &pvcs, "claim", "results", LONG).await;
}

/// A namespace with a StatefulSet, a Job, pods and claims is deleted completely.
pub(super) async fn namespace_deletion(cp: &ControlPlane, ns: &str) -> Duration {
    let c = cp.admin().await;
    populate(cp, ns).await;
    let started = Instant::now();
    Api::<Namespace>::all(c.clone())
        .delete(ns, &DeleteParams::default())
        .await
        .expect("delete namespace");
    gone_within(cp, &Api::<Namespace>::all(c), "namespace", ns, LONG).await;
    started.elapsed()
}

/// A StatefulSet (2 replicas), a Job and a plain pod, each with claims, all running.
pub(super) async fn populate(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    namespace(&c, ns).await;
    Api::<StatefulSet>::namespaced(c.clone(), ns)
        .create(
            &PostParams::default(),
            &statefulset(
                "db",
                2,
                json!({"whenScaled": "Retain", "whenDeleted": "Retain"}),
            ),
        )
        .await
        .expect("statefulset");
    claim(cp, ns, "batch-data").await;
    let mut template = pod_template(
        "batch",
        json!({"name": "data", "persistentVolumeClaim": {"claimName": "batch-data"}}),
    );
    template["spec"]["restartPolicy"] = json!("Never");
    let job: Job = serde_json::from_value(
        json!({"metadata": {"name": "batch"}, "spec": {"template": template}}),
    )
    .expect("job");
    Api::<Job>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &job)
        .await
        .expect("job");
    claim(cp, ns, "solo-data").await;
    Api::<Pod>::namespaced(c.clone(), ns)
        .create(
            &PostParams::default(),
            &claim_pod("solo", "solo-data", None),
        )
        .await
        .expect("pod");
    for p in ["db-0", "db-1", "solo"] {
        running(cp, ns, p).await;
    }
}

/// kube-controller-manager's `Unused` condition (KEP-5541; beta and on by default from 1.37, alpha
/// and off in 1.36) read by `volguard report unused`: with volguard's controller stopped, the
/// report's only source is the condition on 1.37 and nothing on 1.36; with the controller back,
/// its annotation fills in on 1.36.
pub(super) async fn unused_condition(cp: &mut ControlPlane, ns: &str, minor: u32) {
    for p in cp.controllers.iter_mut() {
        p.kill();
    }
    claim(cp, ns, "idle").await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(cp.admin().await, ns);
    let condition = || {
        let pvcs = pvcs.clone();
        async move {
            let p = pvcs.get("idle").await.ok()?;
            p.status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Unused" && c.status == "True")
                .and_then(|c| c.last_transition_time)
                .map(|t| t.0)
        }
    };
    let kc = cp.kubeconfig_file("report", "e2e-user", &["system:masters"]);
    let report = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
            .args(["report", "unused", "-n", ns, "-o", "json"])
            .arg(format!("--kubeconfig={}", kc.display()))
            .output()
            .expect("run report");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        v["items"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["name"] == "idle").cloned())
            .expect("idle in the report")
    };
    if minor >= 37 {
        let since = cp
            .eventually(
                "kube-controller-manager's Unused condition",
                LONG,
                condition,
            )
            .await;
        let row = report();
        assert_eq!(row["unusedSinceSource"], "condition", "{row}");
        let reported: jiff::Timestamp = row["unusedSince"]
            .as_str()
            .expect("unusedSince")
            .parse()
            .expect("time");
        assert_eq!(reported.as_second(), since.as_second(), "{row}");
        println!(
            "unused-condition: kube-controller-manager wrote Unused=True at {since}; volguard report unused: {row}"
        );
    } else {
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(
            condition().await.is_none(),
            "an Unused condition on 1.{minor}"
        );
        let row = report();
        assert_eq!(row["unusedSinceSource"], "unknown", "{row}");
        cp.start_controller("replica-b").await;
        let row = cp
            .eventually(
                "volguard's unused-since annotation in the report",
                LONG,
                || async {
                    let row = report();
                    (row["unusedSinceSource"] == "annotation").then_some(row)
                },
            )
            .await;
        println!(
            "unused-condition: no Unused condition on 1.{minor} (alpha, off); volguard's annotation: {row}"
        );
    }
}
