//! Scenarios on pods: force deletes, evictions, the RWO lock on a placed pod, claim metadata.

use super::*;

/// 5. Force delete of a running pod.
pub(crate) async fn force_delete(cp: &ControlPlane, ns: &str) {
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
pub(crate) async fn stale_out_of_service_cache(cp: &ControlPlane, ns: &str) {
    use volguard::admission::{Admission, Endpoint, decode};
    use volguard::rules::force_delete::ForceDeletePolicy;
    use volguard::state::{Needs, Store, View};
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
    let view = View::from_store(c.clone(), store, Needs::admission(false));
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

/// Scenario 12: Eviction is a delete too (rules.md §2d): an Eviction with gracePeriodSeconds 0 of a running
/// pod never calls pod DELETE webhooks, so volguard validates `pods/eviction` itself.
pub(crate) async fn eviction(cp: &ControlPlane, ns: &str) {
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

/// Scenario 15: rules.md §2f on the real apiserver: a pod created with spec.nodeName on another node than
/// the running holder of its ReadWriteOnce claim is refused; on the same node it is allowed.
pub(crate) async fn rwo_pod_create(cp: &ControlPlane, ns: &str) {
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

/// Trust review points 7 and 12 on the real apiserver (rule `claim-metadata`, Fail): only
/// volguard writes the lock, a person with the break glass may clear it, and the pod owner of a
/// mounted ephemeral claim is not re-pointed.
pub(crate) async fn claim_metadata(cp: &ControlPlane, ns: &str) {
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

/// A pod placed on `node` with a generic ephemeral volume `scratch` (claim `<name>-scratch`).
pub(crate) fn ephemeral_pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {
        "nodeName": node, "containers": [{"name": "c", "image": "example.invalid/c"}],
        "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]}}))
    .expect("pod")
}
