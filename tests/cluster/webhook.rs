//! The webhook as the apiserver meets it: down, rolled out, flooded, mTLS, certificate renewal, latency.

use super::*;

/// Trust review point 13 on the real apiserver: 1,100 TLS connections that never send a request,
/// from 19 addresses, fill every slot of volguard's listener. Once the read timeout has passed
/// they are closed, and the apiserver's calls reach volguard again: a Fail rule answers with
/// volguard's own refusal, not "failed calling webhook".
pub(super) async fn webhook_idle_flood(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    held_claim(cp, ns).await;
    let connector = {
        use rustls_pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in
            rustls_pki_types::CertificateDer::pem_slice_iter(cp.webhook_ca.as_bytes()).flatten()
        {
            roots.add(cert).expect("ca");
        }
        let cfg = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg))
    };
    let target: std::net::SocketAddr = format!("127.0.0.1:{}", cp.webhook_port)
        .parse()
        .expect("addr");
    let started = std::time::Instant::now();
    let mut idle = Vec::new();
    for i in 0..1100u32 {
        let src = std::net::Ipv4Addr::new(127, 0, 1, (2 + i % 19) as u8);
        let sock = tokio::net::TcpSocket::new_v4().expect("socket");
        if sock.bind((src, 0).into()).is_err() {
            continue;
        }
        let Ok(tcp) = sock.connect(target).await else {
            continue;
        };
        let name = rustls_pki_types::ServerName::try_from(WEBHOOK_DNS).expect("name");
        if let Ok(Ok(t)) = tokio::time::timeout(
            Duration::from_secs(2),
            connector.connect(name.to_owned(), tcp),
        )
        .await
        {
            idle.push(t);
        }
    }
    let opened = idle.len();
    // The read timeout (10 s) passes; the flood is still open on the attacker's side.
    tokio::time::sleep(Duration::from_secs(12).saturating_sub(started.elapsed())).await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let mut answered = 0;
    for _ in 0..10 {
        let e = pvcs
            .patch("held", &PatchParams::default(), &strip)
            .await
            .expect_err("stripping an in-use claim's finalizer");
        let (code, msg) = denial(e);
        assert!(
            code == 403 && msg.contains("in use by pod(s) holder"),
            "after the read timeout the apiserver must reach volguard: {code} {msg}"
        );
        answered += 1;
    }
    // And the flood's connections were closed by volguard, not left holding slots.
    tokio::time::sleep(Duration::from_secs(16).saturating_sub(started.elapsed())).await;
    let mut closed = 0;
    for t in idle.iter_mut() {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 512];
        loop {
            match tokio::time::timeout(Duration::from_millis(50), t.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    closed += 1;
                    break;
                }
                Ok(Ok(_)) => continue,
                Err(_) => break,
            }
        }
    }
    assert!(
        opened >= 1000 && closed == opened,
        "{closed} of {opened} idle connections closed by volguard"
    );
    println!(
        "webhook-idle-flood: {opened} idle TLS connections held every slot; volguard closed all {closed} after the read timeout; \
         then {answered}/10 Fail-rule calls answered by volguard"
    );
}

/// Trust review point 13 on the real apiserver: with `--client-ca`, volguard serves the apiserver
/// (which presents its AdmissionConfiguration's client certificate) and nobody else.
pub(super) async fn webhook_client_cert(cp: &mut ControlPlane, ns: &str) {
    let c = cp.admin().await;
    held_claim(cp, ns).await;
    let ca = cp.dir.path().join("webhook-client/ca.crt");
    let port = harness::free_port();
    let (mtls, probe) = cp
        .spawn_serve(
            "volguard-serve-mtls",
            port,
            &["--client-ca", ca.to_str().expect("path")],
        )
        .await;
    let before = cp.webhook_port;
    cp.route_webhooks_to(port).await;
    // A Fail rule answers with volguard's own refusal: the apiserver's certificate was accepted.
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let (code, msg) = cp
        .eventually(
            "the apiserver reaches volguard with its certificate",
            WAIT,
            || {
                let pvcs = pvcs.clone();
                let strip = strip.clone();
                async move {
                    let e = pvcs
                        .patch("held", &PatchParams::default(), &strip)
                        .await
                        .err()?;
                    let (code, msg) = denial(e);
                    msg.contains("in use by pod(s) holder")
                        .then_some((code, msg))
                }
            },
        )
        .await;
    assert_eq!(code, 403, "{msg}");
    // A caller without a certificate is refused at the handshake.
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CONNECT"}});
    let stranger = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cp.webhook_ca.as_bytes()).expect("ca"))
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(10))
        .resolve(WEBHOOK_DNS, ([127, 0, 0, 1], 0).into()) // the URL gives the port
        .build()
        .expect("client");
    let r = stranger
        .post(format!("https://{WEBHOOK_DNS}:{port}/validate"))
        .json(&body)
        .send()
        .await;
    assert!(
        r.is_err(),
        "a caller without a client certificate was served: {r:?}"
    );
    // The same caller is served by a replica without --client-ca: the refusal above is the
    // missing client certificate, not this client's trust in the server.
    let control = stranger
        .post(format!("https://{WEBHOOK_DNS}:{before}/validate"))
        .json(&body)
        .send()
        .await;
    assert!(control.is_ok(), "the control call failed: {control:?}");
    // The refused handshake is counted by the connection's task once it ends, which on a loaded
    // machine can come after the control call: read the metric until it shows (or time out).
    harness::eventually(
        "the refused handshake is counted",
        Duration::from_secs(10),
        || async {
            let metrics = reqwest::get(format!("http://127.0.0.1:{probe}/metrics"))
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            metrics
                .contains("volguard_connections_closed_total{reason=\"handshake_failed\"}")
                .then_some(())
        },
    )
    .await;
    cp.route_webhooks_to(before).await;
    drop(mtls);
    println!(
        "webhook-client-cert: the apiserver's calls served with its client certificate ({code}); a caller without one refused at the handshake"
    );
}

/// With `volguard serve` stopped: namespace deletion and PodGC still complete (every rule they
/// meet is `failurePolicy: Ignore` or exempts the controllers by matchConditions), a finalizer
/// strip is refused (the guard fails closed), and after a restart volguard judges again.
pub(super) async fn webhook_down(cp: &mut ControlPlane, ns: &str) {
    let node = format!("{ns}-node");
    let c = cp.admin().await;
    let doomed = format!("{ns}-doomed");
    // The doomed namespace is populated before the node that is deleted below exists: a pod of
    // it placed there would leave only after PodGC's 40 s quarantine for pods of a deleted node
    // plus the namespace controller's backoff (seen: 60 s to over 120 s), webhook up or down.
    populate(cp, &doomed).await;
    cp.kwok_node(&node).await;
    claim(cp, ns, "orphan-data").await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    pods.create(
        &PostParams::default(),
        &claim_pod("orphan", "orphan-data", Some(&node)),
    )
    .await
    .expect("pod");
    running(cp, ns, "orphan").await;
    cp.stop_webhook();
    let started = Instant::now();
    // Claims created meanwhile: the apiserver's own StorageObjectInUseProtection plugin gives
    // them the finalizer (volguard's controller backfills only where that plugin is off:
    // scenario 9 of tests/e2e.rs).
    claim(cp, ns, "meanwhile").await;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let meanwhile = pvcs.get("meanwhile").await.expect("claim");
    assert!(finalizers(&meanwhile).contains(&PVCF.to_string()));
    // Plain and through the status subresource (which stores metadata too): both refused (Fail).
    let nulled = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let pp = PatchParams::default();
    let mut refusals = Vec::new();
    for status in [false, true] {
        let strip = match status {
            false => pvcs.patch("orphan-data", &pp, &nulled).await,
            true => pvcs.patch_status("orphan-data", &pp, &nulled).await,
        };
        let (_, m) = denial(strip.expect_err("strip with the guard down"));
        assert!(
            m.contains("finalizer-guard.volguard.io"),
            "/status {status}: {m}"
        );
        refusals.push(m);
    }
    let msg = refusals.swap_remove(0);
    force_delete_fails_closed(cp, ns).await;
    cp.stop_kwok(&node);
    Api::<Node>::all(c.clone())
        .delete(&node, &DeleteParams::default())
        .await
        .expect("delete node");
    Api::<Namespace>::all(c.clone())
        .delete(&doomed, &DeleteParams::default())
        .await
        .expect("delete namespace");
    gone_within(
        cp,
        &Api::<Namespace>::all(c.clone()),
        "namespace (webhook down)",
        &doomed,
        LONG,
    )
    .await;
    let ns_done = started.elapsed();
    gone_within(
        cp,
        &pods,
        "pod (PodGC, webhook down)",
        "orphan",
        Duration::from_secs(150),
    )
    .await;
    println!(
        "webhook-down: namespace deleted in {:.1}s, PodGC done in {:.1}s, strip refused: {msg}",
        ns_done.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    cp.start_webhook().await;
    let err = pods
        .create(
            &PostParams::default(),
            &claim_pod("again", "orphan-data", None),
        )
        .await
        .map(|_| ());
    assert!(err.is_ok(), "{err:?}");
    // Scheduled first: an unscheduled pod never blocks a release (rules.md §3), and deleting the
    // claim before the scheduler placed it would race the release against the bind.
    running(cp, ns, "again").await;
    pvcs.delete("orphan-data", &DeleteParams::default())
        .await
        .expect("delete claim");
    let postponed = cp
        .eventually("DeletionPostponed after restart", WAIT, || {
            let c = c.clone();
            async move {
                events(&c, ns, "orphan-data", Some("DeletionPostponed"))
                    .await
                    .into_iter()
                    .next()
            }
        })
        .await;
    assert!(postponed.contains("again"), "{postponed}");
}

/// rules.md §2d "fail closed, narrowly", with volguard stopped: the apiserver itself refuses a
/// force delete (and a grace-0 eviction) of a running pod, while a graceful delete, the kubelet's
/// own final delete and an eviction with a negative grace period never call volguard and pass.
pub(super) async fn force_delete_fails_closed(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    for name in ["victim", "evictee"] {
        claim(cp, ns, &format!("{name}-data")).await;
        pods.create(
            &PostParams::default(),
            &claim_pod(name, &format!("{name}-data"), Some("kwok-1")),
        )
        .await
        .expect("pod");
        running(cp, ns, name).await;
    }
    let err = pods
        .delete("victim", &DeleteParams::default().grace_period(0))
        .await
        .expect_err("force delete of a running pod with volguard down");
    let (code, msg) = denial(err);
    assert!(
        code == 500 && msg.contains("failed calling webhook \"force-delete.volguard.io\""),
        "{code} {msg}"
    );
    let evict = |grace: i64| {
        let c = c.clone();
        let ns = ns.to_string();
        async move {
            let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "evictee", "namespace": ns},
                "deleteOptions": {"gracePeriodSeconds": grace}});
            let req = http::Request::post(format!("/api/v1/namespaces/{ns}/pods/evictee/eviction"))
                .header("Content-Type", "application/json")
                .body(serde_json::to_vec(&body).expect("body"))
                .expect("request");
            c.request_text(req).await
        }
    };
    let err = evict(0)
        .await
        .expect_err("grace-0 eviction with volguard down");
    let (_, evict_msg) = denial(err);
    assert!(
        evict_msg.contains("failed calling webhook \"eviction.volguard.io\""),
        "{evict_msg}"
    );
    // -1 becomes 1 s in the apiserver: graceful, never sent to volguard.
    evict(-1).await.expect("eviction with grace -1 is graceful");
    // Graceful delete; then kwok, as the node's kubelet, deletes it with grace 0.
    pods.delete("victim", &DeleteParams::default())
        .await
        .expect("graceful delete with volguard down");
    for name in ["victim", "evictee"] {
        gone_within(
            cp,
            &pods,
            "pod (kubelet's final delete, volguard down)",
            name,
            LONG,
        )
        .await;
    }
    println!(
        "webhook-down: force delete refused by the apiserver: {msg}; grace-0 eviction refused; graceful delete, kubelet's final delete and a grace -1 eviction passed"
    );
}

/// The apiserver's own `/metrics`.
/// `apiserver_admission_webhook_fail_open_count` summed over volguard's webhooks.
pub(super) fn fail_opens(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_admission_webhook_fail_open_count{"))
        .filter(|l| l.contains("volguard.io\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A rolling restart of the webhook (maxSurge 1, maxUnavailable 0) under pod churn, as the
/// Deployment, the endpoints and kube-proxy play it: the new replica starts and turns ready, the
/// old one gets SIGTERM while new connections still reach it for as long as endpoints take to
/// propagate, then they go to the new one; the old one drains (readiness false, still serving)
/// and closes its connections with GOAWAY. The apiserver's own counters must show no failed call.
pub(super) async fn webhook_rollout(cp: &mut ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let mut serving = cp.webhook_port;
    let fwd = harness::Forwarder::start(serving).await;
    cp.route_webhooks_to(fwd.port).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = tokio::spawn(rollout_churn(c.clone(), ns.to_string(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = apiserver_metrics(&c).await;
    for round in 1..=2 {
        let port = harness::free_port();
        let (next, probe) = cp
            .spawn_serve(
                &format!("volguard-serve-rollout-{round}"),
                port,
                &["--shutdown-drain=6s"],
            )
            .await;
        let mut old = cp
            .replace_serve(next, port, probe)
            .expect("a serving replica");
        old.signal("TERM");
        // Endpoints and kube-proxy notice the terminating replica only after a while.
        tokio::time::sleep(Duration::from_secs(2)).await;
        fwd.route_to(port);
        serving = port;
        let exited = tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + Duration::from_secs(45);
            while Instant::now() < deadline {
                if let Ok(Some(st)) = old.child.try_wait() {
                    return Some(st);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            None
        })
        .await
        .expect("join");
        let st = exited
            .expect("old replica still running 45 s after SIGTERM (terminationGracePeriodSeconds)");
        assert!(st.success(), "old replica exited with {st}");
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let churn = churn.await.expect("churn task");
    let after = apiserver_metrics(&c).await;
    let (lat, rejections) = webhook_figures(&before, &after);
    let calls: f64 = lat.iter().map(|l| l.count).sum();
    let failed: Vec<_> = rejections
        .iter()
        .filter(|(k, _)| !k.ends_with(" no_error"))
        .collect();
    let opened = fail_opens(&after) - fail_opens(&before);
    println!(
        "webhook-rollout: 2 rolling restarts under churn ({} pods created and deleted): {calls} calls to volguard's webhooks by the apiserver, failed calls {failed:?}, fail-open {opened}, connections refused {}",
        churn.pods,
        fwd.refused()
    );
    assert!(
        calls > 0.0,
        "the apiserver called no volguard webhook during the rollout"
    );
    assert!(
        failed.is_empty(),
        "failed webhook calls during the rollout: {failed:?}"
    );
    assert_eq!(opened, 0.0, "calls failed open during the rollout");
    assert_eq!(fwd.refused(), 0, "connections refused during the rollout");
    assert!(
        churn.errors.is_empty(),
        "requests failed during the rollout: {:?}",
        churn.errors
    );
    // Later scenarios dial the surviving replica directly.
    cp.route_webhooks_to(serving).await;
}

pub(super) struct Churned {
    pods: usize,
    errors: Vec<String>,
}

/// Pods with fresh claims created, scheduled, run by kwok and deleted gracefully, four at a time,
/// until `stop`: every request of it passes volguard's mutating and validating webhooks.
pub(super) async fn rollout_churn(
    c: kube::Client,
    ns: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Churned {
    use futures::StreamExt;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), &ns);
    let pods = Api::<Pod>::namespaced(c.clone(), &ns);
    let mut out = Churned {
        pods: 0,
        errors: Vec::new(),
    };
    let mut i = 0;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let batch: Vec<Result<(), String>> = futures::stream::iter(i..i + 4)
            .map(|k| {
                let (pvcs, pods) = (pvcs.clone(), pods.clone());
                async move {
                    let name = format!("r-{k}");
                    let p: PersistentVolumeClaim = serde_json::from_value(json!({
                        "metadata": {"name": name},
                        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
                    }))
                    .expect("pvc");
                    pvcs.create(&PostParams::default(), &p)
                        .await
                        .map_err(|e| format!("create claim {name}: {e}"))?;
                    pods.create(&PostParams::default(), &claim_pod(&name, &name, None))
                        .await
                        .map_err(|e| format!("create pod {name}: {e}"))?;
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    pods.delete(&name, &DeleteParams::default())
                        .await
                        .map_err(|e| format!("delete pod {name}: {e}"))?;
                    pvcs.delete(&name, &DeleteParams::default())
                        .await
                        .map_err(|e| format!("delete claim {name}: {e}"))?;
                    Ok(())
                }
            })
            .buffer_unordered(4)
            .collect()
            .await;
        i += 4;
        out.pods += batch.len();
        out.errors.extend(batch.into_iter().filter_map(Result::err));
    }
    out
}

/// Churn pods with claims through StatefulSets (`rounds` × `sets` × `replicas` pod creations)
/// and print the apiserver's own view of volguard's webhooks.
pub(super) async fn apiserver_latency(
    cp: &ControlPlane,
    ns: &str,
    sets: usize,
    replicas: i32,
    rounds: usize,
) {
    let c = cp.admin().await;
    let api = Api::<StatefulSet>::namespaced(c.clone(), ns);
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let before = apiserver_metrics(&c).await;
    let started = Instant::now();
    create_statefulsets(&api, "churn", 0..sets, 0).await;
    let want = sets * replicas as usize;
    for round in 0..rounds {
        let up = format!("round {round}: {want} pods running");
        scale_all(cp, &api, &pods, "churn", sets, replicas, &up).await;
        let down = format!("round {round}: pods gone");
        scale_all(cp, &api, &pods, "churn", sets, 0, &down).await;
    }
    // Counters since the churn began (earlier scenarios refuse and fail calls on purpose).
    let (lat, rejections) = webhook_figures(&before, &apiserver_metrics(&c).await);
    println!(
        "apiserver-latency: {} pods with claims churned through {sets} StatefulSets in {:.1}s",
        want * rounds,
        started.elapsed().as_secs_f64()
    );
    println!(
        "{:<34} {:>8} {:>9} {:>9}",
        "webhook (apiserver's histogram)", "calls", "p50 ms", "p99 ms"
    );
    for l in &lat {
        println!(
            "{:<34} {:>8.0} {:>9.2} {:>9.2}",
            l.webhook, l.count, l.p50, l.p99
        );
    }
    println!("rejections during the churn, by webhook and error type: {rejections:?}");
    let pod_create = lat
        .iter()
        .find(|l| l.webhook == "pod-create.volguard.io")
        .expect("pod-create webhook measured");
    assert!(
        pod_create.count >= (want * rounds) as f64,
        "fewer pod-create calls ({}) than pods created ({})",
        pod_create.count,
        want * rounds
    );
    assert!(
        !rejections
            .keys()
            .any(|k| k.contains("calling_webhook_error")),
        "webhook call errors during churn: {rejections:?}"
    );
}

/// A forced renewal of the serving certificate (what `cmctl renew` does: the `Issuing`
/// condition) while admission calls run back to back: the new key pair reaches volguard's files,
/// volguard reloads it, and not one call fails (the apiserver's own fail-open and rejection
/// counters, and every call counted by volguard).
pub(super) async fn cert_manager_renewal(cp: &ControlPlane, ns: &str) {
    use k8s_openapi::api::core::v1::Secret;
    let c = cp.admin().await;
    let secrets = Api::<Secret>::namespaced(c.clone(), "volguard-system");
    let serial = |s: Secret| {
        s.data
            .and_then(|d| d.get("tls.crt").map(|b| b.0.clone()))
            .unwrap_or_default()
    };
    let before_cert = serial(secrets.get("volguard-webhook-tls").await.expect("secret"));
    let reloads = |text: &str| {
        text.lines()
            .filter(|l| {
                l.starts_with("volguard_tls_reloads_total{") && l.contains("result=\"success\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let failures = |text: &str| {
        text.lines()
            .filter(|l| {
                (l.starts_with("apiserver_admission_webhook_fail_open_count{")
                    || (l.starts_with("apiserver_admission_webhook_rejection_count{")
                        && l.contains("calling_webhook_error")))
                    && l.contains("volguard.io")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let failed_before = failures(&apiserver_metrics(&c).await);
    let reloads_before = reloads(&metrics_text(cp.serve_probe).await);
    // Pod creates (dry run) on a claim: each is judged by the pod-create webhook. (A claim create
    // would not do: the apiserver's StorageObjectInUseProtection plugin adds the finalizer first,
    // and the mutating webhook's matchCondition then skips it.)
    claim(cp, ns, "renewal-data").await;
    let reached_before = reached(cp, "pod-on-terminating-claim").await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        let pods = Api::<Pod>::namespaced(c.clone(), ns);
        tokio::spawn(async move {
            let mut calls = 0u32;
            let p = claim_pod("probe", "renewal-data", None);
            let dry = PostParams {
                dry_run: true,
                ..Default::default()
            };
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                pods.create(&dry, &p).await.expect("dry-run pod");
                calls += 1;
            }
            calls
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let renew = json!({"status": {"conditions": [{"type": "Issuing", "status": "True",
        "reason": "ManuallyTriggered", "message": "e2e: forced renewal",
        "lastTransitionTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}]}});
    let ar = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
        "certificates",
    );
    Api::<kube::api::DynamicObject>::namespaced_with(c.clone(), "volguard-system", &ar)
        .patch_status(
            "volguard-webhook",
            &PatchParams::default(),
            &Patch::Merge(renew),
        )
        .await
        .expect("trigger renewal");
    cp.eventually("a renewed certificate in the Secret", LONG, || {
        let secrets = secrets.clone();
        let before_cert = before_cert.clone();
        async move {
            let now = serial(secrets.get("volguard-webhook-tls").await.ok()?);
            (now != before_cert).then_some(())
        }
    })
    .await;
    cp.eventually("volguard reloads the renewed certificate", WAIT, || async {
        (reloads(&metrics_text(cp.serve_probe).await) > reloads_before).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let calls = load.await.expect("load");
    let failed = failures(&apiserver_metrics(&c).await) - failed_before;
    let judged = reached(cp, "pod-on-terminating-claim").await - reached_before;
    println!(
        "cert-manager-renewal: certificate renewed and reloaded; {calls} admission calls across it, {failed} failed (apiserver's counters), {judged} judged by volguard"
    );
    assert_eq!(failed, 0.0, "admission calls failed across the renewal");
    assert!(
        judged >= f64::from(calls),
        "{judged} of {calls} calls reached volguard"
    );
}

// ---------------------------------------------------------------- the shared cluster

/// Pod start latency as a client sees it: first seen (ADDED by a watch) → first seen Running,
/// in ms, for the pods of `ns` created while `until` is not yet set.
/// Per pod uid: when it was first seen, and when first seen Running.
pub(super) type PodStarts =
    std::sync::Arc<std::sync::Mutex<BTreeMap<String, (Instant, Option<Instant>)>>>;

pub(super) fn watch_pod_starts(
    c: kube::Client,
    ns: &str,
) -> (tokio::task::JoinHandle<()>, PodStarts) {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let seen = PodStarts::default();
    let out = seen.clone();
    let api = Api::<Pod>::namespaced(c, ns);
    let task = tokio::spawn(async move {
        let mut w = watcher(api, watcher::Config::default()).boxed();
        while let Some(ev) = w.next().await {
            let pods = match ev {
                Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => vec![p],
                _ => continue,
            };
            let now = Instant::now();
            let mut m = out.lock().unwrap_or_else(|e| e.into_inner());
            for p in pods {
                let uid = p.metadata.uid.clone().unwrap_or_default();
                let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                let e = m.entry(uid).or_insert((now, None));
                if running && e.1.is_none() {
                    e.1 = Some(now);
                }
            }
        }
    });
    (task, seen)
}

/// `make bench`: the same churn (StatefulSets scaled up and down, the scheduler binding, kwok
/// starting and deleting pods) with no webhook, with a no-op webhook registered exactly like
/// volguard, and with volguard, rounds interleaved so that the machine's drift hits all three
/// alike. The apiserver's own histogram gives each webhook's latency; a pod watch gives pod
/// start latency. Figures go to target/bench/report.json (`apiserver.side_by_side`).
pub(super) async fn s_side_by_side(
    cp: &mut ControlPlane,
    ns: &str,
    sets: usize,
    replicas: i32,
    rounds: usize,
) {
    let (_floor, floor_port) = cp.spawn_floor();
    let (_writer, writing_port) = cp.spawn_writing_floor();
    let volguard_port = cp.webhook_port;
    let c = cp.admin().await;
    let api = Api::<StatefulSet>::namespaced(c.clone(), ns);
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    create_statefulsets(&api, "sbs", 0..sets, 0).await;
    let (watch, seen) = watch_pod_starts(c.clone(), ns);
    let want = sets * replicas as usize;
    // A round not measured: the StatefulSets' claims are created and provisioned once (they are
    // retained across scale-downs), so no mode's first round pays for them.
    cp.route_webhooks_to(volguard_port).await;
    scale_all(
        cp,
        &api,
        &pods,
        "sbs",
        sets,
        replicas,
        "warm-up: pods running",
    )
    .await;
    scale_all(cp, &api, &pods, "sbs", sets, 0, "warm-up: pods gone").await;
    let mut buckets: BTreeMap<&str, Buckets> = BTreeMap::new();
    let mut starts: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut rejected: BTreeMap<String, f64> = BTreeMap::new();
    let modes = [
        Hooks::None,
        Hooks::Noop,
        Hooks::WritingNoop,
        Hooks::Volguard,
    ];
    for round in 0..rounds {
        for mode in modes {
            mode.register(cp, floor_port, writing_port, volguard_port)
                .await;
            seen.lock().unwrap_or_else(|e| e.into_inner()).clear();
            let before = apiserver_metrics(&c).await;
            let up = format!("round {round} ({}): {want} pods running", mode.name());
            scale_all(cp, &api, &pods, "sbs", sets, replicas, &up).await;
            // The watch may trail the LIST a little.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let after = apiserver_metrics(&c).await;
            add_delta(buckets.entry(mode.name()).or_default(), &before, &after);
            let (_, r0) = webhook_series(&before);
            let (_, r1) = webhook_series(&after);
            for (k, v) in r1 {
                let delta = v - r0.get(&k).copied().unwrap_or(0.0);
                if delta > 0.0 {
                    *rejected.entry(format!("{} {k}", mode.name())).or_default() += delta;
                }
            }
            let m = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
            starts.entry(mode.name()).or_default().extend(
                m.values()
                    .filter_map(|(a, r)| r.map(|r| r.duration_since(*a).as_secs_f64() * 1e3)),
            );
            let down = format!("round {round} ({}): pods gone", mode.name());
            scale_all(cp, &api, &pods, "sbs", sets, 0, &down).await;
        }
    }
    watch.abort();
    cp.route_webhooks_to(volguard_port).await;
    // Per webhook: the no-op's and volguard's p50/p99 as the apiserver measured them.
    let (noop, _) = latencies(
        &buckets.get("noop").cloned().unwrap_or_default(),
        BTreeMap::new(),
    );
    let (vg, _) = latencies(
        &buckets.get("volguard").cloned().unwrap_or_default(),
        BTreeMap::new(),
    );
    let (writing, _) = latencies(
        &buckets.get("writing-noop").cloned().unwrap_or_default(),
        BTreeMap::new(),
    );
    assert!(
        buckets.get("none").is_none_or(|b| b.values().all(|s| s
            .values()
            .last()
            .copied()
            .unwrap_or(0.0)
            == 0.0)),
        "with no registration the apiserver still called a volguard webhook"
    );
    println!(
        "side-by-side: {} churn rounds of {want} pods per mode (none / no-op webhook / writing no-op / volguard), interleaved",
        rounds
    );
    println!(
        "{:<34} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9}",
        "webhook (apiserver's histogram)",
        "calls",
        "noop p50",
        "noop p99",
        "vg p50",
        "vg p99",
        "p50 ×",
        "p99 ×",
        "wr p50",
        "wr p99"
    );
    let mut per_webhook = serde_json::Map::new();
    for v in vg.iter().filter(|v| v.count > 0.0) {
        let Some(n) = noop.iter().find(|n| n.webhook == v.webhook) else {
            continue;
        };
        let (r50, r99) = (v.p50 / n.p50.max(1e-9), v.p99 / n.p99.max(1e-9));
        let w = writing
            .iter()
            .find(|w| w.webhook == v.webhook && w.count > 0.0);
        println!(
            "{:<34} {:>7.0} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>8.2} {:>8.2} {:>9.2} {:>9.2}",
            v.webhook,
            v.count,
            n.p50,
            n.p99,
            v.p50,
            v.p99,
            r50,
            r99,
            w.map_or(0.0, |w| w.p50),
            w.map_or(0.0, |w| w.p99)
        );
        let mut row = json!({"calls": v.count, "noop_p50_ms": n.p50, "noop_p99_ms": n.p99, "volguard_p50_ms": v.p50,
                   "volguard_p99_ms": v.p99, "p50_ratio": r50, "p99_ratio": r99});
        if let Some(w) = writing
            .iter()
            .find(|w| w.webhook == v.webhook && w.count > 0.0)
        {
            row["writing_noop_p50_ms"] = json!(w.p50);
            row["writing_noop_p99_ms"] = json!(w.p99);
            row["histogram_p50_ratio_vs_writing_noop"] = json!(v.p50 / w.p50.max(1e-9));
            row["histogram_p99_ratio_vs_writing_noop"] = json!(v.p99 / w.p99.max(1e-9));
        }
        per_webhook.insert(v.webhook.clone(), row);
    }
    let mut pod_start = serde_json::Map::new();
    let none_p = {
        let mut v = starts.get("none").cloned().unwrap_or_default();
        (percentile(&mut v, 0.5), percentile(&mut v, 0.99))
    };
    println!(
        "{:<34} {:>7} {:>9} {:>9} {:>11} {:>11}",
        "pod start (create → Running)", "pods", "p50 ms", "p99 ms", "p50 ×none", "p99 ×none"
    );
    for mode in modes {
        let mut v = starts.get(mode.name()).cloned().unwrap_or_default();
        let n = v.len();
        let (p50, p99) = (percentile(&mut v, 0.5), percentile(&mut v, 0.99));
        let (r50, r99) = (p50 / none_p.0.max(1e-9), p99 / none_p.1.max(1e-9));
        println!(
            "{:<34} {:>7} {:>9.1} {:>9.1} {:>11.2} {:>11.2}",
            mode.name(),
            n,
            p50,
            p99,
            r50,
            r99
        );
        pod_start.insert(
            mode.name().to_string(),
            json!({"pods": n, "p50_ms": p50, "p99_ms": p99, "p50_ratio_vs_none": r50, "p99_ratio_vs_none": r99}),
        );
        assert!(
            n >= want * rounds / 2,
            "{}: only {n} pod starts observed",
            mode.name()
        );
    }
    println!("call errors and refusals by mode, webhook and type: {rejected:?}");
    // The measures that resolve a p99 (tests/cluster/direct.rs), in the same run.
    let ports = super::direct::Ports {
        floor: floor_port,
        writing: writing_port,
        volguard: volguard_port,
    };
    let direct = |title: &str,
                  rows: &BTreeMap<&'static str, super::direct::Samples>,
                  base: &str| {
        println!(
            "{title:<34} {:>7} {:>9} {:>9} {:>10} {:>10} {:>11} {:>11}",
            "calls",
            "p50 ms",
            "p99 ms",
            format!("p50 ×{base}"),
            format!("p99 ×{base}"),
            "p50 halves",
            "p99 halves"
        );
        let (_, b50, b99, _, _) = rows.get(base).map(|s| s.figures()).unwrap_or_default();
        let mut out = serde_json::Map::new();
        for (mode, samples) in rows {
            let (n, p50, p99, h50, h99) = samples.figures();
            let (r50, r99) = (p50 / b50.max(1e-9), p99 / b99.max(1e-9));
            println!(
                "{mode:<34} {n:>7} {p50:>9.2} {p99:>9.2} {r50:>10.2} {r99:>10.2} {:>10.0}% {:>10.0}%",
                h50 * 100.0,
                h99 * 100.0
            );
            out.insert(
                mode.to_string(),
                json!({"calls": n, "p50_ms": p50, "p99_ms": p99,
                "halves_p50_apart": h50, "halves_p99_apart": h99}),
            );
        }
        out
    };
    let binds = super::direct::binds(cp, ns, ports, rounds, 250).await;
    let binds_json = direct("bind, timed by the client", &binds, "writing-noop");
    let creates = super::direct::claim_creates(cp, ns, volguard_port, rounds, 250).await;
    let creates_json = direct("claim create, timed by the client", &creates, "none");
    let (restarts, lock_writes) = super::direct::same_node_restarts(cp, ns, 10, 10).await;
    let per_100 = lock_writes / restarts.max(1) as f64 * 100.0;
    println!(
        "lock writes per 100 same-node StatefulSet pod restarts (webhook and controller): {per_100:.1} ({lock_writes} writes in {restarts} restarts)"
    );
    // The figures of record for the lock: the whole bind as the client timed it (the apiserver's
    // histogram cannot resolve them), volguard against the writing no-op.
    let fig = |mode: &str| binds.get(mode).map(|s| s.figures()).unwrap_or_default();
    let (vg_b, wr_b) = (fig("volguard"), fig("writing-noop"));
    let rwo = per_webhook
        .entry("rwo-single-node.volguard.io".to_string())
        .or_insert_with(|| json!({}));
    rwo["p50_ratio_vs_writing_noop"] = json!(vg_b.1 / wr_b.1.max(1e-9));
    rwo["p99_ratio_vs_writing_noop"] = json!(vg_b.2 / wr_b.2.max(1e-9));
    rwo["lock_writes_per_100_same_node_restarts"] = json!(per_100);
    rwo["ratio_measure"] =
        json!("pods/binding timed by the client, fresh RWO claims (every bind takes a lock)");
    // Merged into the report `cargo bench` wrote (or a new one).
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench/report.json");
    let mut report: serde_json::Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}));
    report["apiserver"]["side_by_side"] = json!({
        "rounds": rounds, "pods_per_round": want,
        "webhooks": per_webhook, "pod_start": pod_start,
        "binds": binds_json, "claim_creates": creates_json,
        "lock_writes_per_100_same_node_restarts": per_100,
    });
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    std::fs::write(&path, serde_json::to_string_pretty(&report).expect("json"))
        .expect("write report");
    println!("wrote {} (apiserver.side_by_side)", path.display());
}
