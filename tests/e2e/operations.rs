//! Scenarios on operating volguard: least privilege, volguard down, failover, match conditions,
//! late decisions, `explain` and the kubectl plugin, the static policy manifest.

use super::*;

/// The ServiceAccounts of the manifests can do their job (the scenarios run with them) and no more.
pub(crate) async fn least_privilege(cp: &ControlPlane) {
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
    let pv_patch = label_write(Api::<k8s_openapi::api::core::v1::PersistentVolume>::all(
        webhook.clone(),
    ))
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
    // The controller deletes a released node's terminating pods (--release-pods=now, as PodGC
    // would: each force delete still judged by the webhook and the force-delete policy), and
    // writes pods no other way.
    let del = Api::<Pod>::namespaced(controller.clone(), "rbac")
        .delete("nope", &DeleteParams::default())
        .await;
    assert!(
        matches!(&del, Err(kube::Error::Api(s)) if s.code == 404),
        "the controller may delete pods (it met no pod): {del:?}"
    );
    let pod_patch = label_write(Api::<Pod>::namespaced(controller.clone(), "rbac")).await;
    assert!(
        matches!(&pod_patch, Err(kube::Error::Api(s)) if s.code == 403),
        "the controller must not write pods: {pod_patch:?}"
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
        "least privilege: webhook cannot write PVCs or delete pods; controller cannot read secrets, write pods (only delete, as PodGC), or read other Leases"
    );
}

/// A label patched onto object `nope`: whether the caller may write that kind at all.
async fn label_write<K>(api: Api<K>) -> Result<K, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        "nope",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await
}

/// 9. Webhook stopped: PVC and pod creation still work; the controller backfills the finalizer.
pub(crate) async fn webhook_down(cp: &mut ControlPlane, ns: &str) {
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
pub(crate) async fn leader_failover(cp: &mut ControlPlane, ns: &str) {
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

/// Scenario 14: matchConditions are exact: requests that matter reach volguard, counted by its metric;
/// requests that cannot matter do not.
pub(crate) async fn match_conditions(cp: &ControlPlane, ns: &str) {
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

/// Scenario 16: deciding late or without facts. With kube-apiserver frozen (SIGSTOP), every
/// live read of volguard's hangs; reviews are POSTed to volguard directly, as the apiserver
/// would send them. An Ignore rule answers "allowed, with a warning" (a pod with three claims
/// volguard has never seen: its reads run in parallel, so one read timeout, not three, is
/// spent); a Fail rule (the finalizer guard) refuses with code 500.
pub(crate) async fn late_decisions(cp: &ControlPlane) {
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

/// Scenario 17: `volguard explain` against the real apiserver, and as a kubectl plugin found by
/// kubectl's own plugin lookup (`kubectl-volguard` on PATH), as users run it.
pub(crate) async fn explain_kubectl_plugin(cp: &ControlPlane) {
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

/// rules.md §9 "Registration from files" (KEP-5793, beta in 1.37): kube-apiserver started with
/// `volguard manifests admission-dir`'s files enforces the policies before any API object
/// exists and while volguard is down, shows nothing through the API, and routes the webhooks to
/// volguard once it serves. Its own control plane (the flag is read at startup).
pub(crate) async fn policy_manifest_admission() {
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
        // Trusted by the policies and skipped by the force-delete entries' condition: the loader
        // compiles that condition too.
        .arg("--force-delete-allow-user=system:serviceaccount:ops:o'brien")
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
