//! End-to-end: volguard against a real kube-apiserver + etcd (and kube-controller-manager's
//! protection controllers in the "beside upstream" profile), built from Go modules by
//! `make controlplane`. No fake API server. The upstream control loops (scheduler, StatefulSet,
//! Job, GC, PodGC, namespace, kwok nodes, cert-manager, kubectl) are in `tests/cluster.rs`.
//! Run with `make e2e` (part of `make test`).

mod support;

use support::shared::Body;
use support::{harness, objects};

use harness::{ControlPlane, Profile, eventually};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use objects::*;
use serde_json::json;
use std::time::Duration;

// ---------------------------------------------------------------- scenarios

/// Scenario 17: `volguard explain` against the real apiserver, and as a kubectl plugin found by
/// kubectl's own plugin lookup (`kubectl-volguard` on PATH), as users run it.
async fn s17_explain_and_kubectl(cp: &ControlPlane) {
    let kc = cp.kubeconfig_file("user", "e2e-user", &["system:masters"]);
    let run = |cmd: &mut std::process::Command| {
        let out = cmd.output().expect("run");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    // Its own claim, used by a running pod.
    let c = cp.admin().await;
    node(&c, "node-ex").await;
    pvc(&c, "s17", "data", None).await.expect("pvc");
    pod(&c, "s17", "x-0", Some("node-ex"), &["data"])
        .await
        .expect("pod");
    set_pod_phase(&c, "s17", "x-0", "Running").await;
    let direct = run(std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args(["explain", "pvc", "data", "-n", "s17", "--kubeconfig"])
        .arg(&kc));
    assert!(
        direct.starts_with("PersistentVolumeClaim s17/data\n"),
        "{direct}"
    );
    assert!(direct.contains("x-0 (Running on node node-ex)"), "{direct}");
    assert!(
        direct.contains("next:         in use by pod(s) x-0"),
        "{direct}"
    );
    let plugins = tempfile::tempdir().expect("tmp");
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_volguard"),
        plugins.path().join("kubectl-volguard"),
    )
    .expect("symlink");
    let path = format!(
        "{}:{}",
        plugins.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = harness::bin_dir().join("kubectl");
    let listed = run(std::process::Command::new(&kubectl)
        .args(["plugin", "list"])
        .env("PATH", &path));
    assert!(listed.contains("kubectl-volguard"), "{listed}");
    let via_kubectl = run(std::process::Command::new(&kubectl)
        .args([
            "volguard", "explain", "pvc", "data", "-n", "s17", "-o", "json",
        ])
        .env("PATH", &path)
        .env("KUBECONFIG", &kc));
    let v: serde_json::Value = serde_json::from_str(&via_kubectl).expect("json");
    assert_eq!(v["blockingPods"][0]["name"], "x-0", "{via_kubectl}");
    let unused = run(std::process::Command::new(&kubectl)
        .args(["volguard", "unused", "-A"])
        .env("PATH", &path)
        .env("KUBECONFIG", &kc));
    assert!(unused.starts_with("NAMESPACE"), "{unused}");
    println!("kubectl volguard explain pvc data -n s17:\n{direct}");
}

/// Scenario 16: deciding late or without facts. With kube-apiserver frozen (SIGSTOP), every
/// live read of volguard's hangs; reviews are POSTed to volguard directly, as the apiserver
/// would send them. An Ignore rule answers "allowed, with a warning" (a pod with three claims
/// volguard has never seen: its reads run in parallel, so one read timeout, not three, is
/// spent); a Fail rule (the finalizer guard) refuses with code 500.
async fn s16_late_decisions(cp: &ControlPlane) {
    let ca = reqwest::Certificate::from_pem(cp.webhook_ca.as_bytes()).expect("ca");
    let http = reqwest::Client::builder()
        .add_root_certificate(ca)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let review = |kind: &str, op: &str, object: serde_json::Value, old: serde_json::Value| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "late-1", "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": "x"}, "namespace": "s16",
            "operation": op, "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object, "oldObject": old}})
    };
    let claims: Vec<_> = (0..3)
        .map(|i| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": format!("never-seen-{i}")}}))
        .collect();
    let pod = json!({"metadata": {"name": "p", "namespace": "s16"}, "spec": {"containers": [], "volumes": claims}});
    let pvc = |finalizers: serde_json::Value| {
        json!({"metadata": {"name": "data", "namespace": "s16", "uid": "u", "finalizers": finalizers},
               "spec": {"volumeName": "pv"}, "status": {"phase": "Bound"}})
    };
    let post = |path: &'static str, body: serde_json::Value| {
        let http = http.clone();
        let url = format!("https://127.0.0.1:{}{path}", cp.webhook_port);
        async move {
            let started = std::time::Instant::now();
            let r: serde_json::Value = http
                .post(url)
                .json(&body)
                .send()
                .await
                .expect("volguard answers while the apiserver is frozen")
                .json()
                .await
                .expect("json");
            (r["response"].clone(), started.elapsed())
        }
    };
    let apiserver = cp.apiserver.as_ref().expect("apiserver");
    apiserver.signal("STOP");
    let (pod_answer, pod_took) = post(
        "/validate/pod-on-terminating-claim",
        review("Pod", "CREATE", pod, serde_json::Value::Null),
    )
    .await;
    let (strip_answer, _) = post(
        "/validate/finalizer-removal",
        review(
            "PersistentVolumeClaim",
            "UPDATE",
            pvc(json!(null)),
            pvc(json!([PVCF])),
        ),
    )
    .await;
    apiserver.signal("CONT");
    assert_eq!(pod_answer["allowed"], true, "{pod_answer}");
    let warnings = pod_answer["warnings"].to_string();
    assert!(
        warnings.contains("could not check") && warnings.contains("never-seen-2"),
        "{warnings}"
    );
    assert!(
        pod_took < Duration::from_millis(2400),
        "reads in parallel: {pod_took:?}"
    );
    assert_eq!(strip_answer["allowed"], false, "{strip_answer}");
    assert_eq!(strip_answer["status"]["code"], 500, "{strip_answer}");
    let msg = strip_answer["status"]["message"].to_string();
    assert!(msg.contains("could not list the pods"), "{msg}");
    println!(
        "late: pod CREATE allowed with warnings after {pod_took:?}; finalizer removal refused with 500"
    );
}

/// Scenario 12: Eviction is a delete too (rules.md §2d): an Eviction with gracePeriodSeconds 0 of a running
/// pod never calls pod DELETE webhooks, so volguard validates `pods/eviction` itself.
async fn s12_eviction(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    node(&c, "node-e").await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    for name in ["ev-0", "ev-1"] {
        pod(&c, ns, name, Some("node-e"), &[]).await.expect("pod");
        set_pod_phase(&c, ns, name, "Running").await;
    }
    let before = reached(cp, "force-delete").await;
    // Written by hand as kubectl drain writes it: kube-rs's `Api::evict` sends its options as
    // `delete_options`, a field the apiserver ignores, so it cannot ask for grace 0.
    let evict = |pod: &str, grace: Option<i64>| {
        let mut body = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": ns}});
        if let Some(g) = grace {
            body["deleteOptions"] = json!({"gracePeriodSeconds": g});
        }
        http::Request::post(format!("/api/v1/namespaces/{ns}/pods/{pod}/eviction"))
            .header("Content-Type", "application/json")
            .body(serde_json::to_vec(&body).expect("body"))
            .expect("request")
    };
    let (code, msg) = match c.request::<serde_json::Value>(evict("ev-0", Some(0))).await {
        Err(e) => denial(e),
        Ok(s) => panic!(
            "eviction with grace 0 of a running pod went through: {s}\n{}",
            cp.logs()
        ),
    };
    assert_eq!(code, 403, "{msg}");
    assert!(
        msg.contains("eviction with gracePeriodSeconds 0 of pod \"ev-0\" refused")
            && msg.contains("may keep running")
            && msg.contains("kubectl drain without --grace-period=0"),
        "volguard's message, not another refusal: {msg}"
    );
    assert!(
        reached(cp, "force-delete").await > before,
        "the eviction reached volguard"
    );
    let still = pods.get("ev-0").await.expect("pod");
    assert!(still.metadata.deletion_timestamp.is_none(), "not deleted");
    // Without a grace period of 0 the eviction goes through (graceful: the pod is terminating).
    c.request::<serde_json::Value>(evict("ev-1", None))
        .await
        .expect("graceful eviction allowed");
    let evicted = pods.get("ev-1").await.expect("pod");
    assert!(
        evicted.metadata.deletion_timestamp.is_some(),
        "evicted pod terminates"
    );
    println!("eviction grace 0: refused by volguard ({code}); graceful eviction: allowed");
}

/// Scenario 13: A PVC deleted and recreated under the same name (StatefulSet) never loses the new
/// object's finalizer to a removal planned on the old one: the controller's patch `test`s the
/// UID. Replayed against the real apiserver as the controller's ServiceAccount.
async fn s13_recreated_pvc(cp: &ControlPlane, ns: &str) {
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

/// Scenario 14: matchConditions are exact: requests that matter reach volguard, counted by its metric;
/// requests that cannot matter do not.
async fn s14_match_conditions(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    node(&c, "node-m").await;
    pvc(&c, ns, "data", None).await.expect("pvc");
    pod(&c, ns, "m-0", Some("node-m"), &["data"])
        .await
        .expect("pod");
    set_pod_phase(&c, ns, "m-0", "Running").await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    // A caller named like the node's kubelet but without group system:nodes is no kubelet:
    // volguard is called and refuses.
    let before = reached(cp, "force-delete").await;
    let pretender = cp
        .client_as("system:node:node-m", &["system:masters"])
        .await;
    let (code, msg) = denial(
        Api::<Pod>::namespaced(pretender, ns)
            .delete("m-0", &force())
            .await
            .expect_err("username alone is not a kubelet"),
    );
    assert_eq!(code, 403);
    assert!(msg.contains("force delete of pod \"m-0\" refused"), "{msg}");
    assert_eq!(reached(cp, "force-delete").await, before + 1.0);
    // Swapping one protection finalizer for the other removes one: reviewed and refused.
    let before = reached(cp, "finalizer-removal").await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let swap = Patch::Merge(json!({"metadata": {"finalizers": [PVF]}}));
    let (code, msg) = denial(
        pvcs.patch("data", &PatchParams::default(), &swap)
            .await
            .expect_err("swap refused"),
    );
    assert_eq!(code, 403);
    assert!(
        msg.contains("refusing to remove kubernetes.io/pvc-protection"),
        "{msg}"
    );
    assert_eq!(reached(cp, "finalizer-removal").await, before + 1.0);
    // Requests that cannot matter never reach volguard: a label change keeps the finalizers,
    // a graceful delete is not a force delete.
    let before = (
        reached(cp, "finalizer-removal").await,
        reached(cp, "force-delete").await,
    );
    pvcs.patch(
        "data",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await
    .expect("label");
    pods.delete("m-0", &DeleteParams::default())
        .await
        .expect("graceful delete");
    // The graceful delete reaches the force-delete webhook (CEL cannot read options), and is
    // allowed at row 1; the label change does not reach the finalizer guard at all.
    assert_eq!(reached(cp, "finalizer-removal").await, before.0);
    assert!(reached(cp, "force-delete").await <= before.1 + 1.0);
    println!(
        "matchConditions: pretend kubelet and finalizer swap reached volguard; a label change did not"
    );
}

/// Scenario 15: rules.md §2f on the real apiserver: a pod created with spec.nodeName on another node than
/// the running holder of its ReadWriteOnce claim is refused; on the same node it is allowed.
async fn s15_rwo_pod_create(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    for n in ["node-r1", "node-r2"] {
        node(&c, n).await;
    }
    pvc(&c, ns, "db", None).await.expect("pvc");
    pod(&c, ns, "db-0", Some("node-r1"), &["db"])
        .await
        .expect("holder");
    set_pod_phase(&c, ns, "db-0", "Running").await;
    // The webhook sees the holder through its pod watch: retry until it has. A pod admitted
    // before that is marked finished so it holds nothing.
    let started = std::time::Instant::now();
    let mut attempt = 0;
    let msg = loop {
        let name = format!("db-x{attempt}");
        attempt += 1;
        match pod(&c, ns, &name, Some("node-r2"), &["db"]).await {
            Err(e) => break denial(e),
            Ok(_) => set_pod_phase(&c, ns, &name, "Succeeded").await,
        }
        if started.elapsed() > WAIT {
            let log = harness::read_log(cp.serve.as_ref().expect("serve"));
            let relevant: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("rwo") || l.contains("s15/") || l.contains("Pod"))
                .collect();
            panic!(
                "a pod on a second node was never refused ({attempt} tries); serve log:\n{}",
                relevant.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(msg.0, 403);
    assert!(
        msg.1.contains("pod \"db-0\" uses it on node \"node-r1\""),
        "{}",
        msg.1
    );
    pod(&c, ns, "db-2", Some("node-r1"), &["db"])
        .await
        .expect("same node allowed");
    println!("rwo: pod on a second node refused: {}", msg.1);
}

/// 1. PVC and PV created → carry the protection finalizer.
async fn s1_finalizers_on_create(cp: &ControlPlane, ns: &str) {
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
async fn s_conflict_patch(cp: &ControlPlane, ns: &str) {
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
async fn s2_s3_postponed_then_released(cp: &ControlPlane, ns: &str) {
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
async fn s2_s3_postponed_release_without_event(cp: &ControlPlane, ns: &str) {
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
async fn s4_finalizer_strip_guard(cp: &ControlPlane, ns: &str) {
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

/// 5. Force delete of a running pod.
async fn s5_force_delete(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    for n in ["node-a", "node-b", "node-x", "node-down"] {
        node(&c, n).await;
    }
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    for (name, n) in [
        ("db-0", "node-a"),
        ("db-1", "node-a"),
        ("db-2", "node-a"),
        ("db-3", "node-x"),
        ("db-4", "node-down"),
    ] {
        pod(&c, ns, name, Some(n), &[]).await.expect("pod");
        set_pod_phase(&c, ns, name, "Running").await;
    }
    // As admin: refused, with how to proceed.
    let (code, msg) = denial(
        pods.delete("db-0", &force())
            .await
            .expect_err("admin force delete refused"),
    );
    assert_eq!(code, 403);
    assert!(
        msg.contains("may keep running") && msg.contains("volguard.io/confirm-force-delete=true"),
        "{msg}"
    );
    // Admin with the confirm annotation: allowed.
    pods.patch(
        "db-0",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"volguard.io/confirm-force-delete": "true"}}}),
        ),
    )
    .await
    .expect("annotate");
    pods.delete("db-0", &force())
        .await
        .expect("confirmed force delete");
    // That pod's kubelet: allowed.
    Api::<Pod>::namespaced(cp.kubelet("node-a").await, ns)
        .delete("db-1", &force())
        .await
        .expect("own kubelet");
    // Another node's kubelet: refused by volguard (the NodeRestriction admission plugin, which
    // would refuse it first, is not enabled on this apiserver, as on a default one).
    let err = Api::<Pod>::namespaced(cp.kubelet("node-b").await, ns)
        .delete("db-2", &force())
        .await
        .expect_err("other kubelet");
    let (code, msg) = denial(err);
    assert_eq!(code, 403);
    assert!(
        msg.contains("force-delete.volguard.io")
            && msg.contains("force delete of pod \"db-2\" refused"),
        "{msg}"
    );
    assert!(pods.get_opt("db-2").await.expect("get").is_some());
    // After the Node object is deleted: allowed.
    Api::<Node>::all(c.clone())
        .delete("node-x", &DeleteParams::default())
        .await
        .expect("delete node");
    eventually("force delete after node deletion", WAIT, || {
        let pods = pods.clone();
        async move { pods.delete("db-3", &force()).await.ok().map(|_| ()) }
    })
    .await;
    // Node tainted out-of-service (by a person who confirmed it down, as the taint's own guard
    // requires): allowed.
    // The confirmation first, in its own request: one in the same update does not count (§8).
    Api::<Node>::all(c.clone())
        .patch(
            "node-down",
            &PatchParams::default(),
            &Patch::Merge(json!({
            "metadata": {"annotations": {"volguard.io/confirm-node-down": "true"}}})),
        )
        .await
        .expect("confirm");
    Api::<Node>::all(c.clone())
        .patch("node-down", &PatchParams::default(), &Patch::Merge(json!({
            "spec": {"taints": [
            {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]}})))
        .await
        .expect("taint");
    eventually("force delete on out-of-service node", WAIT, || {
        let pods = pods.clone();
        async move { pods.delete("db-4", &force()).await.ok().map(|_| ()) }
    })
    .await;
    // A pod with terminationGracePeriodSeconds 0 deleted without options: the apiserver lowers the
    // grace period to the pod's 0 before admission, and the `not-opted-in` matchCondition (row 6)
    // keeps such deletes away from volguard, so with the webhook registered Fail the namespace
    // controller never waits on volguard for them.
    pods.create(
        &PostParams::default(),
        &pod_json("fast", Some("node-a"), &[], 0),
    )
    .await
    .expect("pod");
    set_pod_phase(&c, ns, "fast", "Running").await;
    let sa = cp
        .client_as("system:e2e-deleter", &["system:masters"])
        .await;
    Api::<Pod>::namespaced(sa, ns)
        .delete("fast", &DeleteParams::default())
        .await
        .expect("tgps 0 pod delete allowed");
    let log = harness::read_log(cp.serve.as_ref().expect("serve"));
    let seen = log
        .lines()
        .find(|l| l.contains("pod delete seen") && l.contains("\"pod\":\"fast\""));
    assert!(
        seen.is_none(),
        "a delete of an opted-in (terminationGracePeriodSeconds 0) pod reached volguard: {seen:?}"
    );
    println!(
        "recorded: delete of a terminationGracePeriodSeconds=0 pod does not reach volguard (matchCondition not-opted-in)"
    );
}

/// Scenario 5b, rules.md §2d rows 4-5 on a stale cache (kubernetes#142331): volguard's view still shows
/// `node-stale` tainted out-of-service (the cache lags a taint removed a moment ago), the
/// apiserver no longer does. The live read wins: the force delete is refused. With the taint
/// really there, the same request is allowed. The view is volguard's own, over a store the test
/// fills, with live reads going to the real apiserver.
async fn s5b_stale_out_of_service(cp: &ControlPlane, ns: &str) {
    use volguard::admission::{Admission, Endpoint, decode};
    use volguard::rules::force_delete::ForceDeletePolicy;
    use volguard::state::live::LiveCluster;
    use volguard::state::{Cluster, Store};
    let c = cp.admin().await;
    node(&c, "node-stale").await;
    pod(&c, ns, "stale-0", Some("node-stale"), &[])
        .await
        .expect("pod");
    set_pod_phase(&c, ns, "stale-0", "Running").await;
    let tainted: volguard::model::Node = serde_json::from_value(json!({
        "metadata": {"name": "node-stale"},
        "spec": {"taints": [{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]}
    }))
    .expect("node");
    let store = std::sync::Arc::new(Store::default());
    store.nodes.apply(tainted);
    let view = Cluster::Live(LiveCluster::from_store(c.clone(), store, false));
    let admission = Admission::new(view, ForceDeletePolicy::default(), vec![]);
    let live_pod = Api::<Pod>::namespaced(c.clone(), ns)
        .get("stale-0")
        .await
        .expect("pod");
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "stale-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "stale-0", "namespace": ns, "operation": "DELETE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "oldObject": live_pod,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}}})
    .to_string();
    let req = decode(review.as_bytes()).expect("review");
    let v = admission
        .decide(Endpoint::Validate, &req, Duration::from_secs(2))
        .await;
    assert!(
        !v.decision.allowed && v.decision.row == "force-delete-running-pod",
        "a stale out-of-service taint let a force delete through: {v:?}"
    );
    // Tainted for real: the live read confirms it, row 5 allows.
    for step in [
        json!({"metadata": {"annotations": {"volguard.io/confirm-node-down": "true"}}}),
        json!({"spec": {"taints": [{"key": "node.kubernetes.io/out-of-service",
            "value": "nodeshutdown", "effect": "NoExecute"}]}}),
    ] {
        Api::<Node>::all(c.clone())
            .patch("node-stale", &PatchParams::default(), &Patch::Merge(step))
            .await
            .expect("confirm, then taint");
    }
    let v = admission
        .decide(Endpoint::Validate, &req, Duration::from_secs(2))
        .await;
    assert_eq!(
        (v.decision.allowed, v.decision.row),
        (true, "force-delete-node-out-of-service"),
        "{v:?}"
    );
    println!(
        "scenario 5b stale out-of-service cache: refused until the live node carries the taint"
    );
}

/// 6. A PVC pre-bound to a terminating PV is refused.
async fn s6_prebound_terminating_pv(cp: &ControlPlane, ns: &str) {
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
async fn s7_bound_pv(cp: &ControlPlane, ns: &str) {
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
async fn s8_unused_since(cp: &ControlPlane, ns: &str) {
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

/// 9. Webhook stopped: PVC and pod creation still work; the controller backfills the finalizer.
async fn s9_webhook_down(cp: &mut ControlPlane, ns: &str) {
    cp.stop_webhook();
    let c = cp.admin().await;
    let created = pvc(&c, ns, "while-down", None)
        .await
        .expect("PVC creation works without the webhook");
    pod(&c, ns, "while-down", None, &["while-down"])
        .await
        .expect("pod creation works without the webhook");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    if finalizers(&created).is_empty() {
        eventually("controller backfills the finalizer", WAIT, || {
            let pvcs = pvcs.clone();
            async move {
                pvcs.get("while-down")
                    .await
                    .ok()
                    .filter(|p| finalizers(p).contains(&PVCF.to_string()))
                    .map(|_| ())
            }
        })
        .await;
    }
    cp.start_webhook().await;
}

/// 10. Kill the leader during a pending release; the other replica finishes it.
async fn s10_leader_failover(cp: &mut ControlPlane, ns: &str) {
    let c = cp.admin().await;
    node(&c, "node-a").await;
    let second = cp.start_controller("replica-b").await;
    pvc(&c, ns, "ha", None).await.expect("pvc");
    pod(&c, ns, "ha-user", Some("node-a"), &["ha"])
        .await
        .expect("pod");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    pvcs.delete("ha", &DeleteParams::default())
        .await
        .expect("delete");
    tokio::time::sleep(Duration::from_secs(1)).await;
    cp.controllers[0].kill();
    Api::<Pod>::namespaced(cp.kubelet("node-a").await, ns)
        .delete("ha-user", &force())
        .await
        .expect("kubelet delete");
    eventually(
        "the follower releases the PVC",
        Duration::from_secs(45),
        || {
            let pvcs = pvcs.clone();
            async move { gone(&pvcs, "ha").await.then_some(()) }
        },
    )
    .await;
    let log = harness::read_log(&cp.controllers[second]);
    assert!(log.contains("became leader"), "replica-b never led:\n{log}");
    // SIGTERM: the leader stops cleanly and gives the Lease up for the next replica.
    let status = cp.controllers[second].terminate();
    assert!(
        status.is_some_and(|s| s.success()),
        "controller exit on SIGTERM: {status:?}"
    );
    let lease =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(c.clone(), "volguard-system")
            .get("volguard-controller")
            .await
            .expect("lease");
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(
        holder.is_empty(),
        "lease still held by {holder:?} after SIGTERM"
    );
}

/// The ServiceAccounts of the manifests can do their job (the scenarios run with them) and no more.
async fn s_least_privilege(cp: &ControlPlane) {
    let webhook = cp.sa_client("volguard-webhook").await;
    let controller = cp.sa_client("volguard-controller").await;
    let c = cp.admin().await;
    namespace(&c, "rbac").await;
    pvc(&c, "rbac", "probe", None).await.expect("pvc");
    let forbidden = |r: Result<PersistentVolumeClaim, kube::Error>| matches!(r, Err(kube::Error::Api(s)) if s.code == 403);
    // Its one write: the RWO lock, a patch of a claim (rules.md §2f). Nothing else on claims.
    let lock = Patch::Merge(json!({"metadata": {"annotations": {"volguard.io/rwo-lock": null}}}));
    let lock_write = Api::<PersistentVolumeClaim>::namespaced(webhook.clone(), "rbac")
        .patch("probe", &PatchParams::default(), &lock)
        .await;
    assert!(
        lock_write.is_ok(),
        "the webhook may patch claims (its lock): {lock_write:?}"
    );
    assert!(
        forbidden(
            Api::<PersistentVolumeClaim>::namespaced(webhook.clone(), "rbac")
                .create(&PostParams::default(), &serde_json::from_value(json!({
                    "metadata": {"name": "probe-2"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
                })).expect("pvc"))
                .await
        ),
        "the webhook must not create PVCs"
    );
    let pvc_delete = Api::<PersistentVolumeClaim>::namespaced(webhook.clone(), "rbac")
        .delete("probe", &DeleteParams::default())
        .await;
    assert!(
        matches!(&pvc_delete, Err(kube::Error::Api(s)) if s.code == 403),
        "the webhook must not delete PVCs: {pvc_delete:?}"
    );
    let pv_patch = Api::<k8s_openapi::api::core::v1::PersistentVolume>::all(webhook.clone())
        .patch(
            "nope",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await;
    assert!(
        matches!(&pv_patch, Err(kube::Error::Api(s)) if s.code == 403),
        "the webhook must not write PVs: {pv_patch:?}"
    );
    // The webhook reads pods (RWO holders, evicted pods) but never writes them.
    let pod_get = Api::<Pod>::namespaced(webhook.clone(), "rbac")
        .get_opt("nope")
        .await;
    assert!(
        matches!(pod_get, Ok(None)),
        "the webhook reads pods: {pod_get:?}"
    );
    let pod_delete = Api::<Pod>::namespaced(webhook.clone(), "rbac")
        .delete("nope", &DeleteParams::default())
        .await;
    assert!(
        matches!(&pod_delete, Err(kube::Error::Api(s)) if s.code == 403),
        "the webhook must not delete pods: {pod_delete:?}"
    );
    let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
        controller.clone(),
        "volguard-system",
    )
    .list(&Default::default())
    .await;
    assert!(
        matches!(secrets, Err(kube::Error::Api(s)) if s.code == 403),
        "the controller must not read secrets"
    );
    let del = Api::<Pod>::namespaced(controller.clone(), "rbac")
        .delete("nope", &DeleteParams::default())
        .await;
    assert!(
        matches!(del, Err(kube::Error::Api(s)) if s.code == 403),
        "the controller must not delete pods"
    );
    let other_lease =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(controller, "volguard-system")
            .get_opt("someone-else")
            .await;
    assert!(
        matches!(other_lease, Err(kube::Error::Api(s)) if s.code == 403),
        "only its own Lease"
    );
    println!(
        "least privilege: webhook cannot write PVCs or get pods; controller cannot read secrets, delete pods, or read other Leases"
    );
}

// ---------------------------------------------------------------- the shared control planes

/// volguard alone (kube-controller-manager without its protection controllers): its own
/// scenarios. Built by the first scenario that runs, shared by the others.
static STANDALONE: std::sync::Mutex<Option<ControlPlane>> = std::sync::Mutex::new(None);
/// volguard beside kube-controller-manager's own pvc/pv-protection controllers.
static BESIDE: std::sync::Mutex<Option<ControlPlane>> = std::sync::Mutex::new(None);

async fn start_standalone() -> ControlPlane {
    let mut cp = ControlPlane::start(Profile::Standalone).await;
    let version = cp.admin().await.apiserver_version().await.expect("version");
    println!("kube-apiserver {}", version.git_version);
    let applied = cp.install_manifests().await;
    println!(
        "manifests applied (namespace, RBAC, CRDs for real; the rest server-side dry run): {}",
        applied.join(", ")
    );
    assert!(
        applied.iter().any(|a| a == "Certificate/volguard-webhook"),
        "cert-manager objects dry-run"
    );
    cp.start_webhook().await;
    cp.start_controller("replica-a").await;
    let c = cp.admin().await;
    for ns in [
        "s1",
        "s2",
        "s-conflict",
        "s4",
        "s5",
        "s6",
        "s7",
        "s8",
        "s9",
        "s10",
        "s12",
        "s13",
        "s14",
        "s15",
        "s5b",
        "s17",
    ] {
        namespace(&c, ns).await;
    }
    cp
}

async fn start_beside() -> ControlPlane {
    let mut cp = ControlPlane::start(Profile::BesideUpstream).await;
    cp.install_manifests().await;
    cp.start_webhook().await;
    cp.start_controller("replica-a").await;
    let c = cp.admin().await;
    for ns in ["u1", "u2", "u4", "u-kcm"] {
        namespace(&c, ns).await;
    }
    cp
}

/// A scenario on the standalone control plane; a wait that times out dumps every log.
fn standalone(name: &str, f: impl for<'a> FnOnce(&'a mut ControlPlane) -> Body<'a>) {
    support::shared::scenario(
        &STANDALONE,
        || Box::pin(start_standalone()),
        |cp| Box::pin(cp.ensure_running()),
        |cp| cp.logs(),
        name,
        f,
    );
}

/// A scenario beside kube-controller-manager's protection controllers.
fn beside(name: &str, f: impl for<'a> FnOnce(&'a mut ControlPlane) -> Body<'a>) {
    support::shared::scenario(
        &BESIDE,
        || Box::pin(start_beside()),
        |cp| Box::pin(cp.ensure_running()),
        |cp| cp.logs(),
        name,
        f,
    );
}

/// A pod placed on `node` with a generic ephemeral volume `scratch` (claim `<name>-scratch`).
fn ephemeral_pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {
        "nodeName": node, "containers": [{"name": "c", "image": "example.invalid/c"}],
        "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]}}))
    .expect("pod")
}

/// Trust review points 7 and 12 on the real apiserver (rule `claim-metadata`, Fail): only
/// volguard writes the lock, a person with the break glass may clear it, and the pod owner of a
/// mounted ephemeral claim is not re-pointed.
async fn s_claim_metadata(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    namespace(&c, ns).await;
    pvc(&c, ns, "locked", None).await.expect("pvc");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let lock = r#"{"node":"node-a","pod":"x","at":"2099-01-01T00:00:00Z"}"#;
    let forge = Patch::Merge(json!({"metadata": {"annotations": {"volguard.io/rwo-lock": lock}}}));
    let e = pvcs
        .patch("locked", &PatchParams::default(), &forge)
        .await
        .expect_err("a person forging the lock");
    let (code, msg) = denial(e);
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("only volguard writes it"), "{msg}");
    // Through /status too: metadata sent there is stored.
    let e = pvcs
        .patch_status("locked", &PatchParams::default(), &forge)
        .await
        .expect_err("forging through /status");
    assert_eq!(denial(e).0, 403);
    // volguard's webhook writes it (its matchCondition lets it through without a call).
    let webhook = cp.sa_client("volguard-webhook").await;
    Api::<PersistentVolumeClaim>::namespaced(webhook, ns)
        .patch("locked", &PatchParams::default(), &forge)
        .await
        .expect("volguard's webhook writes the lock");
    // A person allowed to break glass (system:masters here) clears it, with a warning.
    pvcs.patch(
        "locked",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"volguard.io/allow-lock-removal": "true"}}}),
        ),
    )
    .await
    .expect("break glass annotation");
    pvcs.patch(
        "locked",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"volguard.io/rwo-lock": null}}})),
    )
    .await
    .expect("break glass clears the lock");
    // The ephemeral claim of a running pod keeps its owner.
    let user = pod(&c, ns, "cache-0", Some("node-a"), &[]).await;
    let user = match user {
        Ok(p) => p,
        Err(e) => panic!("pod: {e}"),
    };
    let eph = ephemeral_pod("cache-1", "node-a");
    let eph = Api::<Pod>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &eph)
        .await
        .expect("ephemeral pod");
    set_pod_phase(&c, ns, "cache-1", "Running").await;
    let owned: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {
        "name": "cache-1-scratch",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "cache-1",
            "uid": eph.metadata.uid.clone().unwrap_or_default(), "controller": true}]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": ""}}))
    .expect("pvc");
    pvcs.create(&PostParams::default(), &owned)
        .await
        .expect("the ephemeral claim, as its controller makes it");
    let repoint = Patch::Merge(
        json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
        "name": "cache-0", "uid": user.metadata.uid.clone().unwrap_or_default(), "controller": true}]}}),
    );
    let e = eventually("re-pointed owner refused", WAIT, || {
        let pvcs = pvcs.clone();
        let repoint = repoint.clone();
        async move {
            pvcs.patch("cache-1-scratch", &PatchParams::default(), &repoint)
                .await
                .err()
        }
    })
    .await;
    let (code, msg) = denial(e);
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("pod \"cache-1\" still mounts it"), "{msg}");
    println!(
        "claim-metadata: forged lock refused (plain and /status), volguard's write and the break glass allowed; re-pointed owner refused: {msg}"
    );
}

// ---------------------------------------------------------------- one test per scenario

crate::scenarios! { standalone:
    least_privilege => |cp| s_least_privilege(cp);
    finalizers_on_create => |cp| s1_finalizers_on_create(cp, "s1");
    postponed_refused_released => |cp| s2_s3_postponed_then_released(cp, "s2");
    test_guarded_finalizer_removal => |cp| s_conflict_patch(cp, "s-conflict");
    finalizer_strip_guard => |cp| s4_finalizer_strip_guard(cp, "s4");
    force_delete => |cp| s5_force_delete(cp, "s5");
    stale_out_of_service_cache => |cp| s5b_stale_out_of_service(cp, "s5b");
    prebound_terminating_pv => |cp| s6_prebound_terminating_pv(cp, "s6");
    bound_pv => |cp| s7_bound_pv(cp, "s7");
    unused_since => |cp| s8_unused_since(cp, "s8");
    eviction => |cp| s12_eviction(cp, "s12");
    recreated_claim => |cp| s13_recreated_pvc(cp, "s13");
    match_conditions => |cp| s14_match_conditions(cp, "s14");
    claim_metadata => |cp| s_claim_metadata(cp, "s-claim-meta");
    rwo_pod_create => |cp| s15_rwo_pod_create(cp, "s15");
    late_decisions => |cp| s16_late_decisions(cp);
    explain_kubectl_plugin => |cp| s17_explain_and_kubectl(cp);
    webhook_down => |cp| s9_webhook_down(cp, "s9");
    leader_failover => |cp| s10_leader_failover(cp, "s10");
}

crate::scenarios! { beside:
    beside_upstream_finalizers_on_create => |cp| s1_finalizers_on_create(cp, "u1");
    beside_upstream_postponed_refused_released => |cp| s2_s3_postponed_then_released(cp, "u2");
    beside_upstream_finalizer_strip_guard => |cp| s4_finalizer_strip_guard(cp, "u4");
    beside_upstream_then_kcm_alone_releases => |cp| kcm_alone_releases(cp);
}

/// Two controllers on one claim do not fight, and kube-controller-manager really is active:
/// with volguard's controller stopped it releases alone.
async fn kcm_alone_releases(cp: &mut ControlPlane) {
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
    s2_s3_postponed_release_without_event(cp, "u-kcm").await;
}

/// rules.md §9 "Registration from files" (KEP-5793, beta in 1.37): kube-apiserver started with
/// `volguard manifests admission-dir`'s files enforces the policies before any API object
/// exists and while volguard is down, shows nothing through the API, and routes the webhooks to
/// volguard once it serves. Its own control plane (the flag is read at startup).
async fn s_policy_manifest_admission() {
    let port = harness::free_port();
    let pki = volguard::devcerts::generate(&["127.0.0.1".into(), "localhost".into()]).expect("pki");
    let admission = tempfile::tempdir().expect("dir");
    let ca = admission.path().join("ca.crt");
    std::fs::write(&ca, &pki.ca_pem).expect("ca");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args(["manifests", "admission-dir"])
        .arg(admission.path().join("static"))
        .arg(format!("--webhook-url=https://127.0.0.1:{port}"))
        .arg(format!("--ca-bundle={}", ca.display()))
        .output()
        .expect("run volguard manifests admission-dir");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config =
        std::fs::canonicalize(admission.path().join("static/admission-configuration.yaml"))
            .expect("written");
    let mut cp = ControlPlane::start_with(
        Profile::Standalone,
        &[
            &format!("--admission-control-config-file={}", config.display()),
            "--feature-gates=ManifestBasedAdmissionControlConfig=true",
        ],
    )
    .await;
    let version = cp.admin().await.apiserver_version().await.expect("version");
    println!(
        "policy-manifest-admission: kube-apiserver {} with {}",
        version.git_version,
        config.display()
    );
    cp.install_manifests().await;
    let c = cp.admin().await;
    namespace(&c, "static").await;
    // Nothing of volguard's is an API object: the list shows no static policy.
    let vaps = Api::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>::all(
        c.clone(),
    )
    .list(&Default::default())
    .await
    .expect("list policies");
    assert!(
        vaps.items.iter().all(|p| !p
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .ends_with(".static.k8s.io")),
        "static policies are not API objects"
    );
    // volguard is not running. The mutating policy gives a new claim its finalizer (this
    // profile runs without the StorageObjectInUseProtection plugin: only volguard adds it).
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "static");
    let claim = pvc(&c, "static", "data", None).await.expect("claim");
    assert_eq!(
        finalizers(&claim),
        vec!["kubernetes.io/pvc-protection"],
        "from the static policy"
    );
    // The validating policy refuses a person's force delete of a running pod.
    node(&c, "static-node").await;
    let pods = Api::<Pod>::namespaced(c.clone(), "static");
    pods.create(
        &PostParams::default(),
        &pod_json("app", Some("static-node"), &["data"], 30),
    )
    .await
    .expect("pod");
    set_pod_phase(&c, "static", "app", "Running").await;
    let refused = pods
        .delete("app", &force())
        .await
        .expect_err("force delete refused");
    let (code, msg) = denial(refused);
    assert_eq!(code, 403, "{msg}");
    assert!(
        msg.contains("volguard-force-delete.static.k8s.io")
            && msg.contains("force delete of pod \"app\" refused"),
        "{msg}"
    );
    println!(
        "policy-manifest-admission: volguard down, force delete refused by the apiserver: {msg}"
    );
    // Marked claim: its DELETE is refused by the static policy too.
    pvcs.patch(
        "data",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"volguard.io/delete-protection": "true"}}}),
        ),
    )
    .await
    .expect("mark");
    let (code, msg) = denial(
        pvcs.delete("data", &DeleteParams::default())
            .await
            .expect_err("refused"),
    );
    assert_eq!(code, 403, "{msg}");
    // volguard starts: the static webhooks reach it (a namespace holding a marked claim is
    // judged by volguard's claim cache, which no policy can read).
    let d = cp.dir.path().to_path_buf();
    volguard::devcerts::write(&d.join("webhook-certs"), &pki).expect("certs");
    cp.webhook_ca = pki.ca_pem.clone();
    let (serve, _probe) = cp.spawn_serve("volguard-serve", port, &[]).await;
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone());
    let msg = eventually(
        "the namespace DELETE refused by volguard",
        Duration::from_secs(30),
        || {
            let namespaces = namespaces.clone();
            async move {
                match namespaces.delete("static", &DeleteParams::default()).await {
                    Err(e) => Some(denial(e).1),
                    Ok(_) => None,
                }
            }
        },
    )
    .await;
    assert!(
        msg.contains("namespace-delete.volguard.io") && msg.contains("data"),
        "{msg}"
    );
    println!("policy-manifest-admission: volguard up, through the static webhook: {msg}");
    drop(serve);
}

#[test]
#[ignore = "needs the control plane that `make e2e` builds (it runs the ignored tests)"]
fn policy_manifest_admission() {
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(s_policy_manifest_admission());
}
