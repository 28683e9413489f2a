//! The CEL policies in the apiserver, the registration watched, and deletion protection.

use super::*;

/// A pod's container status lists, as upstream's `IsPodTerminated` reads them.
const STATUS_LISTS: [&str; 3] = [
    "initContainerStatuses",
    "containerStatuses",
    "ephemeralContainerStatuses",
];

/// The policies issue (rules.md §9) on the real apiserver: with volguard's webhooks unregistered
/// and its server stopped, the CEL policies generated from the rule table (the file the chart
/// ships) refuse in the apiserver itself a force delete of a running pod, a forged `Failed` and a
/// forged lock, let a graceful delete and a confirmed force delete through, and drop a carried
/// unused-since mark from a new claim. Both admission-policy APIs must be served (v1).
pub(super) async fn policy_webhook_down(cp: &mut ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let served = kube::discovery::Discovery::new(c.clone())
        .filter(&["admissionregistration.k8s.io"])
        .run()
        .await
        .expect("discovery");
    let kinds: Vec<String> = served
        .groups()
        .flat_map(|g| g.recommended_resources())
        .map(|(ar, _)| format!("{}/{}", ar.version, ar.kind))
        .collect();
    for k in ["v1/ValidatingAdmissionPolicy", "v1/MutatingAdmissionPolicy"] {
        assert!(kinds.contains(&k.to_string()), "{k} not served: {kinds:?}");
    }
    cp.unregister_webhooks().await;
    cp.stop_webhook();
    let applied = install_policies(cp, &c, ns).await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    for name in ["victim", "confirmed", "graceful"] {
        let mut t = pod_template(name, json!({"name": "data", "emptyDir": {}}));
        t["metadata"]["name"] = json!(name);
        t["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "kwok-1"});
        let p: Pod = serde_json::from_value(t).expect("pod");
        pods.create(&PostParams::default(), &p).await.expect("pod");
    }
    for name in ["victim", "confirmed", "graceful"] {
        running(cp, ns, name).await;
    }
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    // Force delete of a running pod by a person without confirmation: the apiserver refuses.
    let (code, msg) = denial(
        pods.delete("victim", &force)
            .await
            .expect_err("force delete"),
    );
    assert_eq!(code, 403, "{msg}");
    assert!(
        msg.contains("ValidatingAdmissionPolicy 'volguard-force-delete'")
            && msg.contains(
                "force delete of pod \"victim\" refused: it is Running on node \"kwok-1\""
            ),
        "{msg}"
    );
    println!("policy-webhook-down: force delete refused by the apiserver: {msg}");
    // A forged Failed through pods/status: refused.
    let forged = Patch::Merge(json!({"status": {"phase": "Failed"}}));
    let (code, msg) = denial(
        pods.patch_status("victim", &PatchParams::default(), &forged)
            .await
            .expect_err("forged Failed"),
    );
    assert_eq!(code, 403, "{msg}");
    assert!(
        msg.contains("volguard-pod-status") && msg.contains("only its kubelet may end it"),
        "{msg}"
    );
    println!("policy-webhook-down: forged Failed refused: {msg}");
    // A forged lock on a claim: refused.
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    claim(cp, ns, "locked").await;
    let lock = Patch::Merge(json!({"metadata": {"annotations": {
        "volguard.io/rwo-lock": "{\"node\":\"kwok-2\",\"pod\":\"x\",\"at\":\"2026-01-01T00:00:00Z\"}"}}}));
    let (code, msg) = denial(
        pvcs.patch("locked", &PatchParams::default(), &lock)
            .await
            .expect_err("forged lock"),
    );
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("only volguard writes it"), "{msg}");
    println!("policy-webhook-down: forged lock refused: {msg}");
    // The person's stored confirmation lets the force delete through; a graceful delete passes.
    pods.patch(
        "confirmed",
        &PatchParams::default(),
        &Patch::Merge(
            // volguard is down: the person names themselves (the proof policy checks the name
            // is the caller's, and asks the apiserver's authorizer whether they may break glass).
            json!({"metadata": {"annotations": {"volguard.io/confirm-force-delete": "true",
                "volguard.io/confirmed-by": "e2e-admin"}}}),
        ),
    )
    .await
    .expect("confirm");
    pods.delete("confirmed", &force)
        .await
        .expect("a confirmed force delete passes");
    pods.delete("graceful", &DeleteParams::default())
        .await
        .expect("a graceful delete passes");
    // A new claim carrying an old unused-since mark loses it (the MutatingAdmissionPolicy).
    let marked: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "restored", "annotations": {"volguard.io/unused-since": "2020-01-01T00:00:00Z"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("pvc");
    let created = pvcs
        .create(&PostParams::default(), &marked)
        .await
        .expect("create claim");
    let annotations = created.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key("volguard.io/unused-since"),
        "the mark survived: {annotations:?}"
    );
    assert!(
        created
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&PVCF.to_string())
    );
    // The controller's unused-since mark is a merge patch carrying the claim's uid: the
    // apiserver refuses one whose uid is another's (uid is immutable), so a claim made again
    // under the same name is never marked on the strength of its predecessor; tried and read back.
    let uid = pvcs
        .get("restored")
        .await
        .expect("claim")
        .metadata
        .uid
        .expect("uid");
    let probe = |uid: &str| {
        Patch::Merge(json!({"metadata": {"uid": uid,
            "annotations": {"e2e.volguard.io/uid-probe": uid}}}))
    };
    let other = pvcs
        .patch(
            "restored",
            &PatchParams::default(),
            &probe("another-claims-uid"),
        )
        .await;
    assert!(
        matches!(&other, Err(kube::Error::Api(e)) if e.code == 422 || e.code == 409),
        "a merge patch naming another uid: {other:?}"
    );
    let kept = pvcs.get("restored").await.expect("claim").metadata;
    assert!(
        !kept
            .annotations
            .unwrap_or_default()
            .contains_key("e2e.volguard.io/uid-probe")
            && kept.uid.as_deref() == Some(uid.as_str()),
        "the refused patch left its mark"
    );
    pvcs.patch("restored", &PatchParams::default(), &probe(&uid))
        .await
        .expect("a merge patch naming the claim's own uid lands");
    // The out-of-service taint on a node that reports Ready: refused by the apiserver (its
    // webhook entry is Ignore); on a node that reports no Ready, the way to heal a partition
    // while volguard is down stays open.
    let nodes = Api::<Node>::all(c.clone());
    let taint = |has: bool| {
        let t = json!({"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"});
        Patch::Json::<()>(
            serde_json::from_value(if has {
                json!([{"op": "add", "path": "/spec/taints/-", "value": t}])
            } else {
                json!([{"op": "add", "path": "/spec/taints", "value": [t]}])
            })
            .expect("patch"),
        )
    };
    let has_taints = |n: &Node| n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some();
    let ready = nodes.get("kwok-1").await.expect("kwok-1");
    let (code, msg) = denial(
        nodes
            .patch(
                "kwok-1",
                &PatchParams::default(),
                &taint(has_taints(&ready)),
            )
            .await
            .expect_err("the out-of-service taint on a Ready node"),
    );
    assert_eq!(code, 403, "{msg}");
    assert!(
        msg.contains("ValidatingAdmissionPolicy 'volguard-out-of-service-taint'")
            && msg.contains("it reports Ready"),
        "{msg}"
    );
    println!("policy-webhook-down: out-of-service taint on a Ready node refused: {msg}");
    let gone: Node = serde_json::from_value(json!({"metadata": {"name": "gone-1"}})).expect("node");
    nodes
        .create(&PostParams::default(), &gone)
        .await
        .expect("a node that never reported");
    // Not Ready, but nobody proved it down: refused too (PodGC would delete its pods at once).
    let (code, msg) = denial(
        nodes
            .patch("gone-1", &PatchParams::default(), &taint(false))
            .await
            .expect_err("an unconfirmed out-of-service taint"),
    );
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("nothing proves the node is down"), "{msg}");
    // A person confirms first (volguard is down: naming themselves, as the proof policy asks),
    // then the taint passes: the way to heal a partition while volguard is down.
    nodes
        .patch(
            "gone-1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"volguard.io/confirm-node-down": "true",
                "volguard.io/confirmed-by": "e2e-admin"}}}),
            ),
        )
        .await
        .expect("a person's confirmation of a node not Ready");
    nodes
        .patch("gone-1", &PatchParams::default(), &taint(false))
        .await
        .expect("the taint on a confirmed node not Ready passes while volguard is down");
    nodes
        .delete("gone-1", &DeleteParams::default())
        .await
        .expect("delete gone-1");
    println!(
        "policy-webhook-down: {} applied; with volguard stopped and unregistered: force delete, forged Failed, \
         forged lock, the out-of-service taint on a Ready node and an unconfirmed one refused by the apiserver; \
         confirmed force delete, graceful delete and the taint on a confirmed node not Ready passed; a restored \
         claim's unused-since mark dropped",
        applied.len()
    );
    let graceful = pods.delete("victim", &DeleteParams::default()).await;
    assert!(graceful.is_ok(), "graceful delete of victim: {graceful:?}");
    // Leave the cluster as the other scenarios expect it: no policies (the next scenario's
    // preparation starts volguard and registers its webhooks again).
    remove_policies(&c, applied).await;
}

/// The policies issue, point 3: each fixture a policy judges, replayed through the real apiserver
/// with volguard's webhooks unregistered, gets the fixture's answer (allowed or refused) from
/// the policies alone. The fixture's old object is created first (in namespace `ns`, as it was
/// stored: its node, phase, annotations, grace period); the request is then made as the
/// fixture's user and groups (a client certificate; RBAC grants them what the request needs).
/// The parameters are those of the fixture server's flags. Fixtures of a webhook-only row are
/// replayed too: there the policy must let through what the webhook allows (PodGC by identity).
pub(super) async fn policy_agrees(cp: &mut ControlPlane, ns: &str) {
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    let c = cp.admin().await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reviews");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    // (fixture, user, groups, expected allowed, request)
    let mut cases = Vec::new();
    for f in files {
        let name = f
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let fx: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&f).expect("read")).expect("json");
        let r = &fx["body"]["request"];
        let (kind, op, sub) = (
            r["kind"]["kind"].as_str().unwrap_or_default(),
            r["operation"].as_str().unwrap_or_default(),
            r["subResource"].as_str().unwrap_or_default(),
        );
        let judged = matches!(
            (kind, op, sub),
            ("Pod", "DELETE", "")
                | ("Pod", "UPDATE", "status")
                | ("PersistentVolumeClaim", "UPDATE", "")
        );
        let row = fx["expect"]["row"].as_str().unwrap_or_default();
        // Warn-mode fixtures run on a warn server; malformed ones cannot be sent. The proof rule's
        // fixtures write metadata, which this replay (phase, deletes, the lock) does not send: the
        // door matrix writes them through every path with both layers installed.
        if !judged
            || name.contains("warn-mode")
            || row == "bad-request"
            || r["oldObject"].is_null()
            || fx["expect"]["rule"] == "proof"
            // Expiry is the webhook's: CEL has no clock. Exemptions are replayed with their
            // parameters by the scenario webhook-exemption-and-expiry.
            || fx["server"] == "expiry"
            || fx["server"] == "exempt"
        {
            continue;
        }
        if kind == "PersistentVolumeClaim" && !row.starts_with("rwo-lock") {
            continue;
        }
        cases.push((
            name,
            r.clone(),
            fx["expect"]["allowed"].as_bool().unwrap_or(false),
            row.to_string(),
        ));
    }
    assert!(cases.len() >= 20, "only {} fixtures to replay", cases.len());
    // RBAC for every fixture user, what the requests need and no more (not volguard's break-glass
    // verb: a person holds it only through system:masters, as in the fixtures): the answer must
    // come from admission, not authorization.
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "policy-agrees"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "pods/status", "persistentvolumeclaims"],
             "verbs": ["get", "delete", "patch", "update"]},
        ],
    }))
    .expect("role");
    let roles = Api::<ClusterRole>::all(c.clone());
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let users: std::collections::BTreeSet<String> = cases
        .iter()
        .map(|(_, r, _, _)| {
            r["userInfo"]["username"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "policy-agrees"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "policy-agrees"},
        "subjects": users.iter().map(|u| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u})).collect::<Vec<_>>(),
    }))
    .expect("binding");
    let crbs = Api::<ClusterRoleBinding>::all(c.clone());
    crbs.create(&PostParams::default(), &crb)
        .await
        .expect("rbac");
    cp.unregister_webhooks().await;
    cp.stop_webhook();
    // The old objects, as stored (created before the policies, which judge updates of them).
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    for (i, (_, r, _, _)) in cases.iter().enumerate() {
        let mut old = r["oldObject"].clone();
        let name = format!("a{i}");
        old["metadata"] = json!({
            "name": name,
            "annotations": old["metadata"]["annotations"].clone(),
            "labels": old["metadata"]["labels"].clone(),
        });
        let status = old["status"].take();
        if r["kind"]["kind"] == "Pod" {
            if old["spec"]["containers"].is_null() {
                old["spec"]["containers"] = json!([{"name": "app", "image": "app:1"}]);
            }
            // Unscheduled as stored: no scheduler may place it.
            if old["spec"]["nodeName"].is_null() {
                old["spec"]["schedulerName"] = json!("none");
            }
            // Ephemeral containers are added through their subresource, never at CREATE.
            let ephemeral = old["spec"]["ephemeralContainers"].take();
            let p: Pod = serde_json::from_value(old).expect("pod");
            pods.create(&PostParams::default(), &p).await.expect("pod");
            if !ephemeral.is_null() {
                pods.patch_subresource(
                    "ephemeralcontainers",
                    &name,
                    &PatchParams::default(),
                    &Patch::Strategic(json!({"spec": {"ephemeralContainers": ephemeral}})),
                )
                .await
                .expect("ephemeral containers");
            }
            if let Some(phase) = status["phase"].as_str().filter(|p| *p != "Pending") {
                // The phase and, where the fixture has them, its containers' states (rules.md §2h).
                let mut st = json!({"phase": phase});
                // Every list upstream's IsPodTerminated reads (rules.md §2h).
                for list in STATUS_LISTS {
                    if !status[list].is_null() {
                        st[list] = status[list].clone();
                    }
                }
                pods.patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": st})),
                )
                .await
                .expect("phase");
            }
        } else {
            old["spec"] = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": "none"});
            let p: PersistentVolumeClaim = serde_json::from_value(old).expect("pvc");
            pvcs.create(&PostParams::default(), &p).await.expect("pvc");
        }
    }
    // The fixture server's flags, as the chart writes them, in the parameters from the start.
    let applied = install_policies_where(
        cp,
        &c,
        ns,
        None,
        Some(json!({
            "force-delete-users": "system:serviceaccount:ops:fencer",
            "force-delete-groups": "storage-admins",
        })),
    )
    .await;
    // Check the parameters are in force: an allow-listed group's dry-run force delete of a
    // running pod passes.
    if let Some(i) = cases
        .iter()
        .position(|(f, _, want, _)| f.contains("allow-listed-group") && *want)
    {
        let who = as_fixture_user(cp, &cases[i].1).await;
        let name = format!("a{i}");
        let api = Api::<Pod>::namespaced(who, ns);
        let dry = DeleteParams {
            dry_run: true,
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        let deadline = Instant::now() + WAIT;
        loop {
            match api.delete(&name, &dry).await {
                Ok(_) => break,
                Err(e) if Instant::now() > deadline => {
                    panic!("the policies' parameters not in force after {WAIT:?}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }
    let (mut agreed, mut refused_by_policy, mut skipped) = (Vec::new(), 0, Vec::new());
    for (i, (fixture, r, want, row)) in cases.iter().enumerate() {
        let name = format!("a{i}");
        let user = r["userInfo"]["username"].as_str().unwrap_or_default();
        let as_user = as_fixture_user(cp, r).await;
        let result: Result<(), kube::Error> =
            match (r["kind"]["kind"].as_str(), r["operation"].as_str()) {
                (Some("Pod"), Some("DELETE")) => {
                    // A negative grace period is graceful (the apiserver makes it 1 s): sent as none.
                    let grace = r["options"]["gracePeriodSeconds"]
                        .as_i64()
                        .and_then(|g| u32::try_from(g).ok());
                    Api::<Pod>::namespaced(as_user, ns)
                        .delete(
                            &name,
                            &DeleteParams {
                                grace_period_seconds: grace,
                                ..Default::default()
                            },
                        )
                        .await
                        .map(|_| ())
                }
                (Some("Pod"), _) => {
                    let mut st = json!({"phase": r["object"]["status"]["phase"].clone()});
                    for list in STATUS_LISTS {
                        if !r["object"]["status"][list].is_null() {
                            st[list] = r["object"]["status"][list].clone();
                        }
                    }
                    Api::<Pod>::namespaced(as_user, ns)
                        .patch_status(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"status": st})),
                        )
                        .await
                        .map(|_| ())
                }
                _ => {
                    let annotations = r["object"]["metadata"]["annotations"].clone();
                    let mut cleared = json!({});
                    // Annotations the new object drops are removed (a merge patch sets them null).
                    for (k, _) in r["oldObject"]["metadata"]["annotations"]
                        .as_object()
                        .into_iter()
                        .flatten()
                    {
                        if annotations.get(k).is_none() {
                            cleared[k] = serde_json::Value::Null;
                        }
                    }
                    for (k, v) in annotations.as_object().into_iter().flatten() {
                        cleared[k] = v.clone();
                    }
                    Api::<PersistentVolumeClaim>::namespaced(as_user, ns)
                        .patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"metadata": {"annotations": cleared}})),
                        )
                        .await
                        .map(|_| ())
                }
            };
        let got = match &result {
            Ok(()) => true,
            Err(kube::Error::Api(e))
                if e.message.contains("ValidatingAdmissionPolicy 'volguard-") =>
            {
                refused_by_policy += 1;
                false
            }
            Err(e) => {
                // Refused before the policies (NodeRestriction for another node's kubelet).
                skipped.push(format!("{fixture}: {e}"));
                continue;
            }
        };
        // A webhook-only row (the Node gone or out of service) may be allowed by the policy
        // and refused by the webhook, never the other way round.
        // PodGC and volguard's controller pass the policies by identity: whether the node is gone
        // on record or out of service is the webhook's to read.
        let webhook_only = row.contains("node-gone")
            || row.contains("node-out-of-service")
            || user == "system:serviceaccount:kube-system:pod-garbage-collector"
            || user == "system:serviceaccount:volguard-system:volguard-controller";
        let ok = if webhook_only {
            got || !want
        } else {
            got == *want
        };
        assert!(
            ok,
            "{fixture} (row {row}): the policies answered allowed={got}, the webhook allowed={want}: {result:?}"
        );
        agreed.push(fixture.clone());
    }
    println!(
        "policy-agrees: {} fixtures replayed through the apiserver with volguard stopped agree with the webhook \
         ({refused_by_policy} refused by a volguard policy); not replayable: {skipped:?}",
        agreed.len()
    );
    assert!(
        refused_by_policy >= 5 && agreed.len() >= 15,
        "too few replayed: {agreed:?}"
    );
    remove_policies(&c, applied).await;
    crbs.delete("policy-agrees", &DeleteParams::default())
        .await
        .expect("rbac");
    roles
        .delete("policy-agrees", &DeleteParams::default())
        .await
        .expect("role");
    for (i, _) in cases.iter().enumerate() {
        let _ = pods
            .delete(
                &format!("a{i}"),
                &DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await;
    }
}

/// A client acting as a fixture request's user, with its groups (the apiserver adds
/// `system:authenticated` itself).
async fn as_fixture_user(cp: &ControlPlane, r: &serde_json::Value) -> kube::Client {
    let groups: Vec<&str> = r["userInfo"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str())
        .filter(|g| *g != "system:authenticated")
        .collect();
    cp.client_as(
        r["userInfo"]["username"].as_str().unwrap_or_default(),
        &groups,
    )
    .await
}

/// Trust review point 1 on the real apiserver: two pods placed directly (`spec.nodeName`) on two
/// nodes, naming one claim that does not exist, are both refused (neither can carry a lock); an
/// ephemeral claim, which its controller creates after the pod, is not refused for being missing.
/// The value of one series in a metrics text (the first line that starts with `series`).
pub(super) fn series_value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// rules.md §9 "The registration, watched": cainjector before cert-manager 1.12 erases every
/// matchCondition. The leader reports it within one check (metric, Warning Event, /readyz), and
/// with --repair-registration puts the conditions back.
pub(super) async fn registration_drift(cp: &mut ControlPlane, ns: &str) {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let _ = ns;
    let c = cp.admin().await;
    let before = cp.match_conditions().await;
    let probe = *cp.controller_probes.last().expect("a controller runs");
    let drift = r#"volguard_registration_drift{webhook="force-delete.volguard.io",field="matchConditions"}"#;
    // A check after this scenario began finds nothing (an earlier scenario unregistered the
    // webhooks for a while: the gauges then said `missing` until the harness registered them
    // again, and a check reads them afresh).
    let checked = series_value(
        &metrics_text(probe).await,
        "volguard_registration_checks_total",
    )
    .unwrap_or(0.0);
    let text = cp
        .eventually(
            "a registration check that finds no drift",
            Duration::from_secs(45),
            || async {
                let t = metrics_text(probe).await;
                let checks = series_value(&t, "volguard_registration_checks_total").unwrap_or(0.0);
                let drifted = t
                    .lines()
                    .any(|l| l.starts_with("volguard_registration_drift{") && l.ends_with(" 1"));
                (checks > checked && !drifted).then_some(t)
            },
        )
        .await;
    assert!(text.contains("volguard_registration_checks_total"));
    // What old cainjector does: the configuration written back without any matchConditions.
    let configs = Api::<ValidatingWebhookConfiguration>::all(c.clone());
    let live = configs
        .get("volguard-validating")
        .await
        .expect("validating");
    let erase: Vec<serde_json::Value> = live
        .webhooks
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter(|(_, w)| w.match_conditions.as_ref().is_some_and(|m| !m.is_empty()))
        .map(|(i, _)| json!({"op": "remove", "path": format!("/webhooks/{i}/matchConditions")}))
        .collect();
    let erased_at = Instant::now();
    configs
        .patch(
            "volguard-validating",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(json!(erase)).expect("patch")),
        )
        .await
        .expect("erase matchConditions");
    cp.eventually(
        "drift reported in the metric",
        Duration::from_secs(30),
        || async { (series_value(&metrics_text(probe).await, drift) == Some(1.0)).then_some(()) },
    )
    .await;
    let seen = erased_at.elapsed();
    let event = cp
        .eventually(
            "a RegistrationDrift event",
            Duration::from_secs(15),
            || async {
                events(
                    &c,
                    "default",
                    "volguard-validating",
                    Some("RegistrationDrift"),
                )
                .await
                .into_iter()
                .find(|m| {
                    m.contains("force-delete.volguard.io")
                        && m.contains("matchConditions: none (erased")
                })
            },
        )
        .await;
    let ready = reqwest::get(format!("http://127.0.0.1:{probe}/readyz"))
        .await
        .expect("readyz");
    assert_eq!(
        ready.status(),
        200,
        "drift does not make the controller unready"
    );
    let body = ready.text().await.expect("body");
    assert!(
        body.contains("registration drift: ")
            && body.contains("force-delete.volguard.io")
            && body.contains("matchConditions: none (erased"),
        "{body}"
    );
    println!(
        "registration-drift: reported {seen:?} after the erase\n  event: {event}\n  /readyz: {}",
        body.trim()
    );

    // Repair: the controller may update its two configurations, and is asked to.
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "registration-repair"},
        "rules": [{"apiGroups": ["admissionregistration.k8s.io"],
                   "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                   "resourceNames": ["volguard-mutating", "volguard-validating"],
                   "verbs": ["get", "update"]}],
    }))
    .expect("role");
    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "registration-repair"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "registration-repair"},
        "subjects": [{"kind": "ServiceAccount", "name": "volguard-controller", "namespace": "volguard-system"}],
    }))
    .expect("binding");
    let roles = Api::<ClusterRole>::all(c.clone());
    let crbs = Api::<ClusterRoleBinding>::all(c.clone());
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    crbs.create(&PostParams::default(), &crb)
        .await
        .expect("binding");
    for p in cp.controllers.iter_mut() {
        p.kill();
    }
    cp.controllers.clear();
    cp.controller_probes.clear();
    cp.controller_extra.push("--repair-registration".into());
    cp.start_controller("replica-a").await;
    let repaired_from = Instant::now();
    cp.eventually(
        "matchConditions put back",
        Duration::from_secs(60),
        || async { (cp.match_conditions().await == before).then_some(()) },
    )
    .await;
    let took = repaired_from.elapsed();
    let probe = *cp.controller_probes.last().expect("a controller runs");
    cp.eventually(
        "the drift metric back to 0",
        Duration::from_secs(30),
        || async { (series_value(&metrics_text(probe).await, drift) == Some(0.0)).then_some(()) },
    )
    .await;
    let repaired = cp
        .eventually(
            "a RegistrationRepaired event",
            Duration::from_secs(15),
            || async {
                events(
                    &c,
                    "default",
                    "volguard-validating",
                    Some("RegistrationRepaired"),
                )
                .await
                .into_iter()
                .next()
            },
        )
        .await;
    println!(
        "registration-drift: repaired {took:?} after the controller started with --repair-registration\n  event: {repaired}"
    );
    // Back to the harness's controller.
    for p in cp.controllers.iter_mut() {
        p.kill();
    }
    cp.controllers.clear();
    cp.controller_probes.clear();
    cp.controller_extra.retain(|a| a != "--repair-registration");
    let _ = crbs
        .delete("registration-repair", &DeleteParams::default())
        .await;
    let _ = roles
        .delete("registration-repair", &DeleteParams::default())
        .await;
    cp.start_controller("replica-a").await;
}

/// rules.md §2i on the real apiserver: a marked claim is not deleted, nor is its namespace; a
/// service account cannot lift the mark; a person can, recorded by an Event; then the claim goes.
pub(super) async fn delete_protection(cp: &ControlPlane, ns: &str) {
    claim(cp, ns, "ledger").await;
    let (ok, out) = kubectl(
        cp,
        &[
            "annotate",
            "pvc",
            "ledger",
            "-n",
            ns,
            "volguard.io/delete-protection=true",
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = kubectl(cp, &["delete", "pvc", "ledger", "-n", ns, "--wait=false"]);
    assert!(!ok, "a protected claim was deleted: {out}");
    assert!(
        out.contains("it carries volguard.io/delete-protection=true")
            && out.contains(&format!(
                "kubectl annotate pvc ledger -n {ns} volguard.io/delete-protection-"
            )),
        "{out}"
    );
    println!(
        "delete-protection: $ kubectl delete pvc ledger\n{}",
        out.trim()
    );
    // The namespace holding it: refused by the namespace entry (volguard reads its claim cache).
    let (ok, out) = cp
        .eventually(
            "the namespace's DELETE refused",
            Duration::from_secs(20),
            || async {
                let (ok, out) = kubectl(cp, &["delete", "namespace", ns, "--wait=false"]);
                (!ok || out.contains("deleted")).then_some((ok, out))
            },
        )
        .await;
    assert!(
        !ok,
        "a namespace holding a protected claim was deleted: {out}"
    );
    assert!(
        out.contains("ledger") && out.contains("delete-protection"),
        "{out}"
    );
    // A GitOps controller's service account syncing the mark away.
    let kc = cp.kubeconfig_file(
        "gitops",
        "system:serviceaccount:gitops:sync",
        &["system:serviceaccounts", "system:masters"],
    );
    let sa = std::process::Command::new(harness::bin_dir().join("kubectl"))
        .arg(format!("--kubeconfig={}", kc.display()))
        .args([
            "annotate",
            "pvc",
            "ledger",
            "-n",
            ns,
            "volguard.io/delete-protection-",
        ])
        .output()
        .expect("run kubectl");
    let said = String::from_utf8_lossy(&sa.stderr).into_owned();
    assert!(!sa.status.success(), "a service account lifted the mark");
    assert!(said.contains("a person's decision"), "{said}");
    // A person lifts it: allowed with a warning, recorded.
    let (ok, out) = kubectl(
        cp,
        &[
            "annotate",
            "pvc",
            "ledger",
            "-n",
            ns,
            "volguard.io/delete-protection-",
        ],
    );
    assert!(ok, "{out}");
    assert!(out.contains("no longer protected from deletion"), "{out}");
    let c = cp.admin().await;
    let recorded = cp
        .eventually(
            "a DeleteProtectionLifted event",
            Duration::from_secs(15),
            || async {
                events(&c, ns, "ledger", Some("DeleteProtectionLifted"))
                    .await
                    .into_iter()
                    .next()
            },
        )
        .await;
    assert!(recorded.contains("e2e-user"), "{recorded}");
    let (ok, out) = kubectl(cp, &["delete", "pvc", "ledger", "-n", ns, "--wait=false"]);
    assert!(ok, "{out}");
    println!("delete-protection: lifted by a person, recorded: {recorded}");
    // A StatefulSet's claim template carries the mark: each claim its controller creates is born
    // protected.
    let mut set = statefulset(
        "vault",
        1,
        json!({"whenScaled": "Retain", "whenDeleted": "Delete"}),
    );
    if let Some(t) = set
        .spec
        .as_mut()
        .and_then(|s| s.volume_claim_templates.as_mut())
        .and_then(|t| t.first_mut())
    {
        t.metadata.annotations = Some(
            [(
                "volguard.io/delete-protection".to_string(),
                "true".to_string(),
            )]
            .into(),
        );
    }
    let sets = Api::<StatefulSet>::namespaced(c.clone(), ns);
    sets.create(&PostParams::default(), &set)
        .await
        .expect("statefulset");
    let claims = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    cp.eventually("the StatefulSet's claim", WAIT, || async {
        claims.get_opt("data-vault-0").await.ok().flatten()
    })
    .await;
    let (ok, out) = kubectl(
        cp,
        &["delete", "pvc", "data-vault-0", "-n", ns, "--wait=false"],
    );
    assert!(!ok, "a claim from a protected template was deleted: {out}");
    assert!(out.contains("delete-protection"), "{out}");
    println!(
        "delete-protection: a claim from a protected StatefulSet template refused: {}",
        out.trim()
    );
    let (ok, out) = kubectl(
        cp,
        &[
            "annotate",
            "pvc",
            "data-vault-0",
            "-n",
            ns,
            "volguard.io/delete-protection-",
        ],
    );
    assert!(ok, "{out}");
    sets.delete("vault", &DeleteParams::default())
        .await
        .expect("delete statefulset");
    // The data behind a claim (rules.md §2i): a claim bound to a marked volume whose reclaim
    // policy is Delete is not deleted (the PV controller and the provisioner would delete the
    // volume's data before the PV's own DELETE is judged); with Retain it may go.
    claim(cp, ns, "backed").await;
    let pv = claims
        .get("backed")
        .await
        .expect("claim")
        .spec
        .and_then(|s| s.volume_name)
        .expect("bound");
    let pvs = Api::<k8s_openapi::api::core::v1::PersistentVolume>::all(c.clone());
    let reclaim = pvs
        .get(&pv)
        .await
        .expect("pv")
        .spec
        .and_then(|s| s.persistent_volume_reclaim_policy)
        .unwrap_or_default();
    assert_eq!(
        reclaim, "Delete",
        "the default class provisions with Delete"
    );
    pvs.patch(
        &pv,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"volguard.io/delete-protection": "true"}}}),
        ),
    )
    .await
    .expect("mark the volume");
    let (ok, out) = kubectl(cp, &["delete", "pvc", "backed", "-n", ns, "--wait=false"]);
    assert!(
        !ok,
        "a claim on a protected Delete-policy volume was deleted: {out}"
    );
    assert!(out.contains("reclaim policy is Delete"), "{out}");
    pvs.patch(
        &pv,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}})),
    )
    .await
    .expect("retain");
    let (ok, out) = kubectl(cp, &["delete", "pvc", "backed", "-n", ns, "--wait=false"]);
    assert!(ok, "with Retain the claim may go: {out}");
    println!(
        "delete-protection: a claim on a protected volume with reclaim Delete refused; with Retain deleted"
    );
}
