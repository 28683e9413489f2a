//! rules.md §2g exemptions and §8 expiry, on the real apiserver: an identity exempted from one
//! rule passes it (told, counted, recorded) in the webhook and in the CEL policies while another
//! is refused; a person's confirmation counts until `--break-glass-expiry` after volguard stamped
//! its time, then counts for nothing.

use super::*;

fn force() -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    }
}

/// Pod force deletes volguard's serve has decided, whatever the decision (its counter).
fn force_delete_calls(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with(
                "volguard_admission_requests_total{endpoint=\"force-delete\",kind=\"Pod\",operation=\"DELETE\"",
            )
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn running_pods(cp: &ControlPlane, c: &kube::Client, ns: &str, names: &[&str]) {
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    for name in names {
        let mut t = pod_template(name, json!({"name": "data", "emptyDir": {}}));
        t["metadata"]["name"] = json!(name);
        t["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "kwok-1"});
        let p: Pod = serde_json::from_value(t).expect("pod");
        pods.create(&PostParams::default(), &p).await.expect("pod");
    }
    for name in names {
        running(cp, ns, name).await;
    }
}

pub(super) async fn webhook_exemption_and_expiry(cp: &mut ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let velero = format!("system:serviceaccount:{ns}:velero");
    let fencer = format!("system:serviceaccount:{ns}:fencer");
    cp.serve_extra = vec![
        format!("--exempt=force-delete={velero}"),
        "--break-glass-expiry=6s".into(),
    ];
    // rules.md §2d row 7, registered as the chart's forceDeleteAllow does it: serve, the
    // registration and the controller (whose drift check expects the condition) alike.
    cp.force_delete_allow_users = vec![fencer.clone()];
    cp.stop_webhook();
    cp.ensure_running().await;
    restart_controllers(cp, &[]).await;
    running_pods(
        cp,
        &c,
        ns,
        &["backup-0", "other-0", "fresh-0", "stale-0", "fenced-0"],
    )
    .await;
    // Service accounts as their certificates name them (RBAC allows them everything: the answer
    // is admission's).
    let groups = ["system:serviceaccounts", "system:masters"];
    let sa_velero = cp.client_as(&velero, &groups).await;
    let sa_ci = cp
        .client_as(&format!("system:serviceaccount:{ns}:ci"), &groups)
        .await;
    // The exempted service account passes force-delete, with a warning, recorded; another does not.
    let pods_velero = Api::<Pod>::namespaced(sa_velero, ns);
    pods_velero
        .delete("backup-0", &force())
        .await
        .expect("the exempted service account's force delete");
    let pods_ci = Api::<Pod>::namespaced(sa_ci, ns);
    let before = force_delete_calls(&metrics_text(cp.serve_probe).await);
    let (code, msg) = denial(
        pods_ci
            .delete("other-0", &force())
            .await
            .expect_err("refused"),
    );
    assert_eq!(code, 403, "{msg}");
    // The allow-listed identity's force delete is answered by the apiserver's condition: allowed,
    // and volguard never called (its counter moved for the refusal above, not for this one).
    let probe = cp.serve_probe;
    let counted = cp
        .eventually(
            "serve counted the refusal",
            Duration::from_secs(10),
            || async move {
                let n = force_delete_calls(&metrics_text(probe).await);
                (n > before).then_some(n)
            },
        )
        .await;
    Api::<Pod>::namespaced(cp.client_as(&fencer, &groups).await, ns)
        .delete("fenced-0", &force())
        .await
        .expect("the allow-listed identity's force delete");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        force_delete_calls(&metrics_text(cp.serve_probe).await),
        counted,
        "an allow-listed force delete reached volguard"
    );
    // The controller, started with the same list, finds the registration as rendered for it:
    // a check after the restart reports no drift (neither the condition nor the annotation).
    let controller = *cp.controller_probes.last().expect("a controller runs");
    cp.eventually(
        "a registration check with the allow-list that finds no drift",
        Duration::from_secs(45),
        || async move {
            let t = metrics_text(controller).await;
            let checks = super::policies::series_value(&t, "volguard_registration_checks_total")
                .unwrap_or(0.0);
            let drifted = t
                .lines()
                .any(|l| l.starts_with("volguard_registration_drift{") && l.ends_with(" 1"));
            (checks > 0.0 && !drifted).then_some(())
        },
    )
    .await;
    println!(
        "allow-list: {fencer}'s force delete of a running pod answered by the apiserver; the controller reports no drift"
    );
    let note = event_note(cp, &c, ns, "backup-0", "Exempted").await;
    assert!(note.contains("force-delete"), "{note}");
    let metrics = metrics_text(cp.serve_probe).await;
    assert!(
        metrics.contains("decision=\"exempted\""),
        "the exempted request is counted: {metrics}"
    );
    println!(
        "exemption (webhook): {velero} force-deleted a running pod, recorded: {note}; another service account refused"
    );
    // Expiry: a person's confirmation counts when fresh, not 6 s after volguard stamped it.
    let alice = Api::<Pod>::namespaced(cp.client_as("alice", &["system:masters"]).await, ns);
    let confirm = Patch::Merge(
        json!({"metadata": {"annotations": {"volguard.io/confirm-force-delete": "true"}}}),
    );
    for name in ["fresh-0", "stale-0"] {
        let p = alice
            .patch(name, &PatchParams::default(), &confirm)
            .await
            .expect("a person confirms");
        let a = p.metadata.annotations.unwrap_or_default();
        assert_eq!(
            a.get("volguard.io/confirmed-by").map(String::as_str),
            Some("alice")
        );
        assert!(a.contains_key("volguard.io/confirmed-at"), "{a:?}");
    }
    alice
        .delete("fresh-0", &force())
        .await
        .expect("a fresh confirmation counts");
    tokio::time::sleep(Duration::from_secs(7)).await;
    let (code, msg) = denial(
        alice
            .delete("stale-0", &force())
            .await
            .expect_err("expired"),
    );
    assert_eq!(code, 403, "{msg}");
    println!(
        "break-glass expiry: a confirmation counted when fresh, refused 7 s later (expiry 6 s): {msg}"
    );
    // The policies: the same exemption as their parameter, volguard stopped and unregistered.
    // The parameters in a ConfigMap of their own, which the force-delete binding is pointed at:
    // after earlier scenarios installed and removed the policies, kube-apiserver 1.37.2 kept
    // evaluating the re-created bindings with `volguard-policies` as it was before (120 s and
    // more), where a ConfigMap it has never seen is read at once.
    let applied = install_policies(cp, &c, ns).await;
    let maps =
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(c.clone(), "volguard-system");
    let mut params = maps.get("volguard-policies").await.expect("parameters");
    params.metadata = kube::api::ObjectMeta {
        name: Some("volguard-policies-exempt".into()),
        ..Default::default()
    };
    params
        .data
        .get_or_insert_default()
        .insert("exempt-force-delete-users".into(), velero.clone());
    maps.create(&PostParams::default(), &params)
        .await
        .expect("the exemption's parameters");
    let ar = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
    ));
    Api::<kube::api::DynamicObject>::all_with(c.clone(), &ar)
        .patch(
            "volguard-force-delete",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paramRef": {"name": "volguard-policies-exempt"}}})),
        )
        .await
        .expect("point the binding at them");
    cp.unregister_webhooks().await;
    cp.stop_webhook();
    running_pods(cp, &c, ns, &["backup-1", "other-1"]).await;
    // The apiserver reads the parameters through an informer: after earlier scenarios installed
    // the policies with other parameters it may take a while (30 s and more seen on 1.37.2, see
    // proof_door_matrix) before the exemption is in force. Asked with dry runs until it is.
    let dry = DeleteParams {
        dry_run: true,
        ..force()
    };
    cp.eventually(
        "the policy's parameters carry the exemption",
        Duration::from_secs(120),
        || {
            let (pods, dry) = (pods_velero.clone(), dry.clone());
            async move { pods.delete("backup-1", &dry).await.ok().map(|_| ()) }
        },
    )
    .await;
    pods_velero
        .delete("backup-1", &force())
        .await
        .expect("the exempted service account, by the policy");
    let (code, msg) = denial(
        pods_ci
            .delete("other-1", &force())
            .await
            .expect_err("refused"),
    );
    assert_eq!(code, 403, "{msg}");
    assert!(
        msg.contains("ValidatingAdmissionPolicy 'volguard-force-delete'"),
        "{msg}"
    );
    println!("exemption (policy, volguard down): {velero} passed, another refused: {msg}");
    remove_policies(&c, applied).await;
    let _ = maps
        .delete("volguard-policies-exempt", &DeleteParams::default())
        .await;
    cp.serve_extra.clear();
    cp.force_delete_allow_users.clear();
    cp.ensure_running().await;
    restart_controllers(cp, &[]).await;
}

/// rules.md §8 "Audit that outlives Events": a refusal is in its namespace's AuditReport (summary
/// by rule and reason, one line per caller and object), and stays after every Event is deleted.
pub(super) async fn audit_report_outlives_events(cp: &mut ControlPlane, ns: &str) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let c = cp.admin().await;
    running_pods(cp, &c, ns, &["kept-0"]).await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    for _ in 0..2 {
        let (code, msg) = denial(pods.delete("kept-0", &force()).await.expect_err("refused"));
        assert_eq!(code, 403, "{msg}");
    }
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("volguard.io", "v1alpha1", "AuditReport"),
        "auditreports",
    );
    let reports: Api<DynamicObject> = Api::namespaced_with(c.clone(), ns, &ar);
    let report = cp
        .eventually(
            "the namespace's AuditReport lists the refusals",
            WAIT,
            || {
                let reports = reports.clone();
                async move {
                    let r = reports.get("volguard").await.ok()?;
                    (r.data["summary"]["force-delete"]["Denied"].as_u64() >= Some(2)).then_some(r)
                }
            },
        )
        .await;
    let line = &report.data["results"][0];
    assert_eq!(line["name"], "kept-0", "{line}");
    assert_eq!(line["count"], 2, "one line per caller and object: {line}");
    assert_eq!(line["row"], "force-delete-running-pod", "{line}");
    // The Events go (as --event-ttl would take them); the report stays.
    let events = Api::<Event>::namespaced(c.clone(), ns);
    events
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete the Events");
    assert!(
        events
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .is_empty()
    );
    let after = reports
        .get("volguard")
        .await
        .expect("the report outlives the Events");
    assert_eq!(after.data["results"][0]["name"], "kept-0");
    println!(
        "audit-report: after every Event of {ns} was deleted, AuditReport volguard still says: {}",
        serde_json::to_string(&after.data["summary"]).unwrap_or_default()
    );
}

/// rules.md §8 "renewing an override": once a person's override has certainly expired (its
/// expiry plus 30 s for two clocks) the controller lifts it, with an `OverrideLifted` Event, and
/// setting it again with the same merge patch `kubectl annotate --overwrite` sends is a new
/// setting: stamped with a new time, and it counts. Before the lift that patch changed nothing,
/// so nothing was stamped and the override stayed expired. One that has not expired stays.
pub(super) async fn override_renewed_after_expiry(cp: &mut ControlPlane, ns: &str) {
    const EXPIRY: &str = "--break-glass-expiry=4s";
    let c = cp.admin().await;
    cp.serve_extra = vec![EXPIRY.into()];
    cp.stop_webhook();
    cp.ensure_running().await;
    restart_controllers(cp, &[EXPIRY]).await;
    for claim in ["keep", "other"] {
        pvc(&c, ns, claim, None).await.expect("pvc");
        pod(&c, ns, &format!("{claim}-user"), Some("kwok-1"), &[claim])
            .await
            .expect("pod");
    }
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let key = "volguard.io/allow-finalizer-removal";
    let overwrite = Patch::Merge(json!({"metadata": {"annotations": {key: "true"}}}));
    let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let at = |p: &PersistentVolumeClaim| {
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("volguard.io/confirmed-at").cloned())
    };
    let holds = |name: &'static str| {
        let pvcs = pvcs.clone();
        async move {
            pvcs.get(name)
                .await
                .expect("claim")
                .metadata
                .annotations
                .unwrap_or_default()
                .contains_key(key)
        }
    };
    let first = pvcs
        .patch("keep", &PatchParams::default(), &overwrite)
        .await
        .expect("a person sets the override");
    let first_at = at(&first).expect("stamped with its time");
    let set = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (code, msg) = denial(
        pvcs.patch("keep", &PatchParams::default(), &strip)
            .await
            .expect_err("an expired override counts for nothing"),
    );
    assert_eq!(code, 403, "{msg}");
    assert!(
        holds("keep").await,
        "lifted before its expiry plus the margin"
    );
    cp.eventually(
        "the controller lifts the expired override",
        Duration::from_secs(90),
        || {
            let holds = holds("keep");
            async move { (!holds.await).then_some(()) }
        },
    )
    .await;
    let lifted_after = set.elapsed();
    assert!(
        lifted_after >= Duration::from_secs(34),
        "lifted {lifted_after:?} after it was set: before 4 s + the 30 s margin"
    );
    let note = event_note(cp, &c, ns, "keep", "OverrideLifted").await;
    assert!(note.contains(key) && note.contains("expired"), "{note}");
    // Renewed by the patch `kubectl annotate --overwrite` sends: a new time, and it counts.
    let renewed = pvcs
        .patch("keep", &PatchParams::default(), &overwrite)
        .await
        .expect("set again");
    let renewed_at = at(&renewed).expect("stamped again");
    assert!(renewed_at > first_at, "{renewed_at} after {first_at}");
    pvcs.patch("keep", &PatchParams::default(), &strip)
        .await
        .expect("the renewed override counts");
    // A fresh override stays through the controller's passes (one every 10 s).
    pvcs.patch("other", &PatchParams::default(), &overwrite)
        .await
        .expect("another override");
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert!(holds("other").await, "a fresh override was lifted");
    println!(
        "override renewal: expired after 4 s, lifted {:.0} s after it was set ({note}); set again with the same patch, stamped {renewed_at}, and counted; a fresh one stayed",
        lifted_after.as_secs_f64()
    );
    cp.serve_extra.clear();
    cp.stop_webhook();
    cp.ensure_running().await;
    restart_controllers(cp, &[]).await;
}

/// The note of the first Event with `reason` on object `name` in `ns`, once there is one.
async fn event_note(
    cp: &ControlPlane,
    c: &kube::Client,
    ns: &str,
    name: &str,
    reason: &str,
) -> String {
    let events = Api::<Event>::namespaced(c.clone(), ns);
    let field = format!("involvedObject.name={name}");
    cp.eventually(&format!("a {reason} Event on {name}"), WAIT, || {
        let (events, field) = (events.clone(), field.clone());
        async move {
            events
                .list(&ListParams::default().fields(&field))
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(reason))?
                .message
        }
    })
    .await
}

/// The harness's controller replaced by one started with `extra` flags (none: its defaults).
async fn restart_controllers(cp: &mut ControlPlane, extra: &[&str]) {
    for p in cp.controllers.iter_mut() {
        p.kill();
    }
    cp.controllers.clear();
    cp.controller_probes.clear();
    cp.controller_extra = extra.iter().map(|s| s.to_string()).collect();
    cp.start_controller("replica-a").await;
}
