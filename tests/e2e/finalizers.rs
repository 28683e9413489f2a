//! Scenarios on the protection finalizers, their release and "unused since".

use super::*;

/// 1. PVC and PV created → carry the protection finalizer.
pub(crate) async fn finalizers_on_create(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let created = pvc(&c, ns, "s1", None).await.expect("pvc");
    assert_eq!(
        finalizers(&created),
        vec![PVCF.to_string()],
        "PVC finalizer"
    );
    let v = pv(&c, &format!("{ns}-s1"), &[]).await;
    assert_eq!(finalizers(&v), vec![PVF.to_string()], "PV finalizer");
    Api::<PersistentVolume>::all(c)
        .delete(&format!("{ns}-s1"), &DeleteParams::default())
        .await
        .expect("cleanup");
}

/// The controller's removal patch `test`s the finalizer list: against the real apiserver a stale
/// view is rejected and nothing is clobbered; a fresh view applies.
pub(crate) async fn test_guarded_finalizer_removal(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let created = pvc(&c, ns, "contested", None).await.expect("pvc");
    assert_eq!(finalizers(&created), vec![PVCF.to_string()]);
    let stale: volguard::model::Pvc =
        serde_json::from_value(serde_json::to_value(&created).expect("json")).expect("model");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    // Another writer adds a finalizer after we read.
    pvcs.patch(
        "contested",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/other"}]))
            .expect("patch"),
        ),
    )
    .await
    .expect("other writer");
    let patch =
        volguard::rules::release::finalizer_removal_patch(&stale.metadata, PVCF).expect("patch");
    let err = pvcs
        .patch(
            "contested",
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
        .expect_err("stale removal must fail");
    println!(
        "stale removal patch rejected by the apiserver with HTTP {}",
        denial(err).0
    );
    let now = pvcs.get("contested").await.expect("get");
    assert_eq!(
        finalizers(&now),
        vec![PVCF.to_string(), "example.com/other".to_string()],
        "nothing clobbered"
    );
    let fresh: volguard::model::Pvc =
        serde_json::from_value(serde_json::to_value(&now).expect("json")).expect("model");
    let patch =
        volguard::rules::release::finalizer_removal_patch(&fresh.metadata, PVCF).expect("patch");
    let after = pvcs
        .patch(
            "contested",
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
        .expect("fresh removal applies");
    assert_eq!(finalizers(&after), vec!["example.com/other".to_string()]);
}

/// 2 + 3. A used PVC deleted stays Terminating with DeletionPostponed naming the pod; a new pod on
/// it is refused; when the pod goes, the PVC goes.
pub(crate) async fn postponed_refused_released(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    node(&c, "node-a").await;
    pvc(&c, ns, "data", None).await.expect("pvc");
    pod(&c, ns, "app", Some("node-a"), &["data"])
        .await
        .expect("pod");
    set_pod_phase(&c, ns, "app", "Running").await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    pvcs.delete("data", &DeleteParams::default())
        .await
        .expect("delete pvc");
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(c.clone(), ns);
    let note = eventually("DeletionPostponed event", WAIT, || {
        let events = events.clone();
        async move {
            let list = events.list(&Default::default()).await.ok()?;
            list.items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("DeletionPostponed"))
                .and_then(|e| e.note)
        }
    })
    .await;
    // The controller's cache may deliver the claim's deletion before the pod's phase update
    // (separate watches), so the pod may still be described as Pending: name and node are what
    // the user needs.
    assert!(
        note.contains("app (") && note.contains(" on node node-a)"),
        "{note}"
    );
    let still = pvcs.get("data").await.expect("pvc kept");
    assert!(still.metadata.deletion_timestamp.is_some());
    // 3. A new pod on the terminating claim is refused by the apiserver with volguard's message.
    let err = pod(&c, ns, "late", Some("node-a"), &["data"])
        .await
        .expect_err("pod on terminating claim");
    let (code, msg) = denial(err);
    assert_eq!(code, 403);
    assert!(
        msg.contains(r#"pod "late" uses PersistentVolumeClaim "data", which is being deleted"#),
        "{msg}"
    );
    // The kubelet confirms the containers are gone and deletes the pod; the claim follows.
    let kubelet = cp.kubelet("node-a").await;
    Api::<Pod>::namespaced(kubelet, ns)
        .delete("app", &force())
        .await
        .expect("kubelet delete");
    eventually("PVC released", WAIT, || {
        let pvcs = pvcs.clone();
        async move { gone(&pvcs, "data").await.then_some(()) }
    })
    .await;
}

/// kube-controller-manager alone: a used PVC deleted stays, and goes when its pod goes.
pub(crate) async fn postponed_release_without_event(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    node(&c, "node-a").await;
    pvc(&c, ns, "data", None).await.expect("pvc");
    pod(&c, ns, "app", Some("node-a"), &["data"])
        .await
        .expect("pod");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    pvcs.delete("data", &DeleteParams::default())
        .await
        .expect("delete pvc");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        pvcs.get("data")
            .await
            .expect("kept while used")
            .metadata
            .deletion_timestamp
            .is_some()
    );
    let kubelet = cp.kubelet("node-a").await;
    Api::<Pod>::namespaced(kubelet, ns)
        .delete("app", &force())
        .await
        .expect("kubelet delete");
    eventually("kube-controller-manager releases the PVC", WAIT, || {
        let pvcs = pvcs.clone();
        async move { gone(&pvcs, "data").await.then_some(()) }
    })
    .await;
}

/// 4. Stripping the finalizer while a pod uses the PVC is refused; the break-glass annotation allows it.
pub(crate) async fn finalizer_strip_guard(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    node(&c, "node-a").await;
    pvc(&c, ns, "keep", None).await.expect("pvc");
    pod(&c, ns, "user", Some("node-a"), &["keep"])
        .await
        .expect("pod");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let err = pvcs
        .patch("keep", &PatchParams::default(), &strip)
        .await
        .expect_err("strip refused");
    let (code, msg) = denial(err);
    assert_eq!(code, 403);
    assert!(
        msg.contains("refusing to remove kubernetes.io/pvc-protection")
            && msg.contains("user (phase Pending, node node-a)"),
        "{msg}"
    );
    // Break glass set in the same update is not yet a proof (rules.md §8): refused...
    let same = Patch::Merge(
        json!({"metadata": {"annotations": {"volguard.io/allow-finalizer-removal": "true"}, "finalizers": null}}),
    );
    let (code, msg) = denial(
        pvcs.patch("keep", &PatchParams::default(), &same)
            .await
            .expect_err("an override in the same update does not count"),
    );
    assert_eq!(code, 403, "{msg}");
    // ...set first by a person allowed to break glass (stamped with their name), then used.
    let glass = Patch::Merge(
        json!({"metadata": {"annotations": {"volguard.io/allow-finalizer-removal": "true"}}}),
    );
    let set = pvcs
        .patch("keep", &PatchParams::default(), &glass)
        .await
        .expect("override set");
    let stamp = set
        .metadata
        .annotations
        .unwrap_or_default()
        .get("volguard.io/confirmed-by")
        .cloned();
    assert_eq!(stamp.as_deref(), Some("e2e-admin"), "the setter's stamp");
    pvcs.patch("keep", &PatchParams::default(), &strip)
        .await
        .expect("break glass allowed");
}

/// 6. A PVC pre-bound to a terminating PV is refused.
pub(crate) async fn prebound_terminating_pv(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let name = format!("{ns}-going");
    pv(&c, &name, &["e2e.volguard.io/hold"]).await;
    let pvs = Api::<PersistentVolume>::all(c.clone());
    pvs.delete(&name, &DeleteParams::default())
        .await
        .expect("delete pv");
    let (code, msg) = denial(
        pvc(&c, ns, "prebound", Some(&name))
            .await
            .expect_err("bind refused"),
    );
    assert_eq!(code, 403);
    assert!(msg.contains("which is being deleted"), "{msg}");
    pvs.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("cleanup");
}

/// 7. A Bound PV deleted stays until unbound, then goes.
pub(crate) async fn bound_pv(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let name = format!("{ns}-bound");
    pv(&c, &name, &[]).await;
    let pvs = Api::<PersistentVolume>::all(c.clone());
    set_status_phase(&pvs, &name, "Bound").await;
    pvs.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kept = pvs.get(&name).await.expect("bound PV kept");
    assert!(
        kept.metadata.deletion_timestamp.is_some() && finalizers(&kept).contains(&PVF.to_string())
    );
    set_status_phase(&pvs, &name, "Released").await;
    eventually("PV released", WAIT, || {
        let pvs = pvs.clone();
        let name = name.clone();
        async move { gone(&pvs, &name).await.then_some(()) }
    })
    .await;
}

/// 8. volguard.io/unused-since appears when the last pod goes, disappears when a pod uses it again.
pub(crate) async fn unused_since(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    pvc(&c, ns, "idle", None).await.expect("pvc");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    set_status_phase(&pvcs, "idle", "Bound").await;
    let has = |want: bool| {
        let pvcs = pvcs.clone();
        async move {
            let p = pvcs.get("idle").await.ok()?;
            let present = p
                .metadata
                .annotations
                .unwrap_or_default()
                .contains_key("volguard.io/unused-since");
            (present == want).then_some(())
        }
    };
    eventually("unused-since set", WAIT, || has(true)).await;
    // The report reads the same cluster.
    let kc = cp.kubeconfig_file("report", "e2e-report", &["system:masters"]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args(["report", "unused", "-o", "json", "-n", ns, "--kubeconfig"])
        .arg(&kc)
        .output()
        .expect("report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["items"][0]["name"], "idle", "{v}");
    assert_eq!(v["items"][0]["unusedSinceSource"], "annotation", "{v}");
    pod(&c, ns, "reader", None, &["idle"]).await.expect("pod");
    eventually("unused-since cleared by a pending pod", WAIT, || has(false)).await;
    Api::<Pod>::namespaced(c.clone(), ns)
        .delete("reader", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("unused-since set again", WAIT, || has(true)).await;
}

/// Scenario 13: A PVC deleted and recreated under the same name (StatefulSet) never loses the new
/// object's finalizer to a removal planned on the old one: the controller's patch `test`s the
/// UID. Replayed against the real apiserver as the controller's ServiceAccount.
pub(crate) async fn recreated_claim(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let old = pvc(&c, ns, "data-web-0", None).await.expect("pvc");
    assert_eq!(finalizers(&old), vec![PVCF]);
    // What the controller's cache holds when it plans the removal.
    let old_meta: volguard::model::Meta =
        serde_json::from_value(serde_json::to_value(&old.metadata).expect("meta")).expect("meta");
    let planned =
        volguard::rules::release::finalizer_removal_patch(&old_meta, PVCF).expect("patch");
    pvcs.delete("data-web-0", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("old claim released", WAIT, || {
        let pvcs = pvcs.clone();
        async move { gone(&pvcs, "data-web-0").await.then_some(()) }
    })
    .await;
    // The StatefulSet controller recreates it: same name, same finalizer list, new UID.
    let new = pvc(&c, ns, "data-web-0", None).await.expect("recreate");
    assert_eq!(finalizers(&new), vec![PVCF]);
    assert_ne!(new.metadata.uid, old.metadata.uid);
    let controller =
        Api::<PersistentVolumeClaim>::namespaced(cp.sa_client("volguard-controller").await, ns);
    let err = controller
        .patch(
            "data-web-0",
            &PatchParams::default(),
            &Patch::Json::<()>(planned.clone()),
        )
        .await
        .expect_err("the queued removal must not apply to the recreated claim");
    let (code, msg) = denial(err);
    assert!(code == 422 || code == 409, "test op failure: {code} {msg}");
    assert_eq!(
        finalizers(&pvcs.get("data-web-0").await.expect("get")),
        vec![PVCF],
        "the new claim keeps its finalizer"
    );
    // Without the UID test (the patch as it was before), the same removal strips the new claim.
    let mut without_uid = planned.clone();
    without_uid.0.retain(
        |op| !matches!(op, json_patch::PatchOperation::Test(t) if t.path == "/metadata/uid"),
    );
    // (The patch's own answer is read: volguard's controller backfills the finalizer right after.)
    let stripped = controller
        .patch(
            "data-web-0",
            &PatchParams::default(),
            &Patch::Json::<()>(without_uid),
        )
        .await
        .expect("the old patch applies to the new object");
    assert_eq!(stripped.metadata.uid, new.metadata.uid);
    assert!(
        finalizers(&stripped).is_empty(),
        "the race the UID test closes is real"
    );
    println!(
        "recreated claim: stale removal refused with {code}; without the UID test it strips the new claim"
    );
}

/// Two controllers on one claim do not fight, and kube-controller-manager really is active:
/// with volguard's controller stopped it releases alone.
pub(crate) async fn then_kcm_alone_releases(cp: &mut ControlPlane) {
    // No retry loop between the two controllers: volguard's retries stay at a handful at most.
    let metrics = metrics_text(cp.controller_probes[0]).await;
    let retries: f64 = metrics
        .lines()
        .find(|l| l.starts_with("volguard_controller_reconciles_total{result=\"retry\"}"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    println!("volguard controller retries beside kube-controller-manager: {retries}");
    // The controller process exports its own series only, none of the webhook server's.
    assert!(
        metrics.contains("volguard_controller_reconciles_total")
            && !metrics.contains("volguard_admission_")
            && !metrics.contains("volguard_tls_"),
        "controller /metrics should hold only controller series:\n{metrics}"
    );
    assert!(
        retries <= 3.0,
        "retry loop between controllers? {retries} retries\n{metrics}"
    );
    let kcm_log = harness::read_log(cp.kcm.as_ref().expect("kcm"));
    assert!(
        !kcm_log.contains("forbidden"),
        "kube-controller-manager lacks RBAC:\n{kcm_log}"
    );
    let kcm_errors = kcm_log
        .matches("Error removing protection finalizer")
        .count();
    println!("kube-controller-manager finalizer-removal errors beside volguard: {kcm_errors}");
    assert!(
        kcm_errors <= 3,
        "retry loop on the kube-controller-manager side:\n{kcm_log}"
    );
    // kube-controller-manager really is active: with volguard's controller stopped it releases alone.
    for p in cp.controllers.iter_mut() {
        p.kill();
    }
    postponed_release_without_event(cp, "u-kcm").await;
}
