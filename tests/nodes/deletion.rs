//! Deleting storage under a running writer: claims, volumes and namespaces, with and without
//! volguard, measured on the volume's bytes.

use super::*;

/// A claim deleted (and its finalizers stripped with `finalizers: null`) under a running writer,
/// on shared-filesystem storage (no attach step, reclaim policy Delete). Without volguard the
/// claim is gone at once, the PV controller releases the volume and the provisioner deletes its
/// directory while the writer still writes: every record is lost. With volguard the strip is
/// refused (the claim is in use): the claim waits, Terminating, for its last pod, as the user's
/// delete asked, and the bytes stay while the writer runs. (On attachable storage the
/// provisioner itself waits for the VolumeAttachment to go, so the loss there comes later, when
/// the pod ends; this scenario measures the window volguard closes.)
pub(super) async fn s_claim_deleted(s: &mut Shared) {
    for on in [false, true] {
        volguard(s, on).await;
        let ns = format!("dl-claim-{}", mode(on));
        let c = s.cp.admin().await;
        namespace(&c, &ns).await;
        claim(&c, &ns, "data", &SHARED_FS).await;
        let pods: Api<Pod> = Api::namespaced(c.clone(), &ns);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "writer"}, "spec": writer_spec("data")}))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create writer");
        let p = running_pod(s, &ns, "writer").await;
        let path = log_path(s, &ns, "data").await;
        records_of(&path, &uid(&p), 10, Duration::from_secs(60)).await;

        let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.clone(), &ns);
        let deleted = refusal(claims.delete("data", &DeleteParams::default()).await);
        let stripped = refusal(
            claims
                .patch(
                    "data",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await,
        );
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        if on {
            // Time enough for the PV controller and the provisioner, had the claim gone.
            tokio::time::sleep(Duration::from_secs(15)).await;
        } else {
            s.cp.eventually(
                "the provisioner deletes the volume under the writer",
                Duration::from_secs(90),
                || async { (!path.exists()).then_some(()) },
            )
            .await;
        }
        let still = pods
            .get("writer")
            .await
            .ok()
            .and_then(|p| p.status?.phase)
            .unwrap_or_default();
        let outcome = match (&deleted, &stripped) {
            (None, None) => {
                format!("claim deleted, finalizers stripped; volume deleted, writer {still}")
            }
            (_, Some(m)) => format!("strip refused ({}); writer {still}", rule_of(m)),
            (Some(m), None) => format!("delete refused ({}); writer {still}", rule_of(m)),
        };
        let r = record(s, "claim-deleted", on, &path, &seen, &outcome).await;
        // The user's delete completes once the writer ends (kcm's pvc-protection).
        pods.delete("writer", &DeleteParams::default())
            .await
            .expect("delete writer");
        s.cp.eventually("the claim is gone", Duration::from_secs(90), || async {
            claims.get_opt("data").await.ok()?.is_none().then_some(())
        })
        .await;
        if on {
            assert!(
                stripped.is_some(),
                "volguard let the finalizers of a claim in use be stripped"
            );
            assert_eq!((r.lost, r.overlaps), (0, 0), "with volguard: {r:?}");
        } else {
            assert!(
                r.lost > 0,
                "without volguard the provisioner deletes the bytes: {r:?}"
            );
        }
    }
}

/// A namespace with a writer on a claim of `driver`; returns the writer, its log and the volume.
async fn writer_on_claim(
    s: &Shared,
    ns: &str,
    driver: &Driver,
    claim_ann: serde_json::Value,
) -> (Pod, PathBuf, String) {
    let c = s.cp.admin().await;
    namespace(&c, ns).await;
    claim(&c, ns, "data", driver).await;
    if claim_ann.is_object() {
        Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
            .patch(
                "data",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": claim_ann}})),
            )
            .await
            .expect("annotate claim");
    }
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "writer"}, "spec": writer_spec("data")}),
    )
    .expect("pod");
    Api::<Pod>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create writer");
    let p = running_pod(s, ns, "writer").await;
    let path = log_path(s, ns, "data").await;
    records_of(&path, &uid(&p), 10, Duration::from_secs(60)).await;
    let pv = Api::<PersistentVolumeClaim>::namespaced(c, ns)
        .get("data")
        .await
        .ok()
        .and_then(|p| p.spec?.volume_name)
        .expect("bound");
    (p, path, pv)
}

/// Without volguard: wait until the volume's directory is gone; with it, give the PV controller
/// and the provisioner the time they would have needed.
async fn volume_outcome(s: &Shared, on: bool, path: &std::path::Path, what: &str) {
    if on {
        tokio::time::sleep(Duration::from_secs(15)).await;
    } else {
        s.cp.eventually(what, Duration::from_secs(90), || async {
            (!path.exists()).then_some(())
        })
        .await;
    }
}

/// Undo a namespace of this file: marks lifted by a person, then the namespace deleted.
async fn clean_namespace(s: &Shared, ns: &str) {
    let c = s.cp.admin().await;
    let unmark =
        Patch::Merge(json!({"metadata": {"annotations": {"volguard.io/delete-protection": null}}}));
    let _ = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
        .patch("data", &PatchParams::default(), &unmark)
        .await;
    if let Some(pv) = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
        .get_opt("data")
        .await
        .ok()
        .flatten()
        .and_then(|p| p.spec?.volume_name)
    {
        let _ = Api::<PersistentVolume>::all(c.clone())
            .patch(&pv, &PatchParams::default(), &unmark)
            .await;
    }
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
        .patch(ns, &PatchParams::default(), &unmark)
        .await;
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(c)
        .delete(ns, &DeleteParams::default())
        .await;
}

fn outcome_of(steps: &[(&str, &Option<String>)], after: &str) -> String {
    let refused: Vec<String> = steps
        .iter()
        .filter_map(|(what, r)| {
            r.as_deref()
                .map(|m| format!("{what} refused ({})", rule_of(m)))
        })
        .collect();
    if refused.is_empty() {
        format!(
            "{} allowed; {after}",
            steps.iter().map(|(w, _)| *w).collect::<Vec<_>>().join(", ")
        )
    } else {
        refused.join(", ")
    }
}

/// A bound volume deleted and its finalizers stripped (`finalizers: null`) under a running
/// writer. Measured here: the external-provisioner deletes a volume's data only once the volume
/// is Released, so the bytes stay either way; without volguard the volume object is gone and
/// the claim is `Lost` (the data orphaned on the storage: no pod can mount it again until an
/// administrator rebuilds the volume object by hand); with volguard the strip is refused while
/// the claim is in use and the claim stays Bound.
pub(super) async fn s_volume_deleted(s: &mut Shared) {
    for on in [false, true] {
        volguard(s, on).await;
        let ns = format!("dl-volume-{}", mode(on));
        let (_, path, pv) = writer_on_claim(s, &ns, &SHARED_FS, json!(null)).await;
        let c = s.cp.admin().await;
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.clone(), &ns);
        let pvs: Api<PersistentVolume> = Api::all(c.clone());
        let deleted = refusal(pvs.delete(&pv, &DeleteParams::default()).await);
        let strip = json!({"metadata": {"finalizers": null}});
        let stripped = refusal(
            pvs.patch(&pv, &PatchParams::default(), &Patch::Merge(strip))
                .await,
        );
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        let phase = || async {
            claims
                .get("data")
                .await
                .ok()
                .and_then(|p| p.status?.phase)
                .unwrap_or_default()
        };
        if on {
            tokio::time::sleep(Duration::from_secs(10)).await;
        } else {
            s.cp.eventually("the claim is Lost", Duration::from_secs(60), || async {
                (phase().await == "Lost").then_some(())
            })
            .await;
        }
        let claim_phase = phase().await;
        let outcome = outcome_of(
            &[("volume delete", &deleted), ("finalizer strip", &stripped)],
            &format!("volume object gone, claim {claim_phase}: the bytes orphaned"),
        );
        let r = record(s, "volume-deleted", on, &path, &seen, &outcome).await;
        clean_namespace(s, &ns).await;
        assert_eq!((r.lost, r.overlaps), (0, 0), "{} volguard: {r:?}", mode(on));
        if on {
            assert!(
                stripped.is_some(),
                "volguard let the finalizers of a volume in use be stripped"
            );
            assert_eq!(claim_phase, "Bound");
        }
    }
}

/// A namespace deleted while it holds a claim marked `volguard.io/delete-protection`. Without
/// volguard the namespace controller deletes the writer and the claim, and the provisioner the
/// data; with volguard the namespace's DELETE is refused and nothing goes.
pub(super) async fn s_namespace_deleted(s: &mut Shared) {
    for on in [false, true] {
        volguard(s, on).await;
        let ns = format!("dl-namespace-{}", mode(on));
        let (_, path, _) = writer_on_claim(
            s,
            &ns,
            &SHARED_FS,
            json!({"volguard.io/delete-protection": "true"}),
        )
        .await;
        let c = s.cp.admin().await;
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        let deleted = refusal(
            Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
                .delete(&ns, &DeleteParams::default())
                .await,
        );
        volume_outcome(
            s,
            on,
            &path,
            "the namespace's claim and its data are deleted",
        )
        .await;
        let seen = {
            let mut all = seen;
            all.extend(records::snapshot(&read(&path).unwrap_or_default()));
            all
        };
        let outcome = outcome_of(&[("namespace delete", &deleted)], "claim and data deleted");
        let r = record(s, "namespace-deleted", on, &path, &seen, &outcome).await;
        clean_namespace(s, &ns).await;
        if on {
            assert!(
                deleted.is_some(),
                "volguard let a namespace holding a protected claim be deleted"
            );
            assert_eq!((r.lost, r.overlaps), (0, 0), "with volguard: {r:?}");
        } else {
            assert!(
                r.lost > 0,
                "without volguard the namespace takes the bytes: {r:?}"
            );
        }
    }
}

/// A volume marked `volguard.io/delete-protection` (reclaim policy Delete) whose claim is
/// deleted; the writer's pod then ends (the app is removed; the data was meant to stay).
/// Without volguard the claim goes once unused and the provisioner deletes the marked volume's
/// data before the volume object's own DELETE could be judged; with volguard the claim's DELETE
/// is refused (`delete-protection-volume-behind`).
pub(super) async fn s_protected_volume_claim_deleted(s: &mut Shared) {
    for on in [false, true] {
        volguard(s, on).await;
        let ns = format!("dl-protected-{}", mode(on));
        let (_, path, pv) = writer_on_claim(s, &ns, &SHARED_FS, json!(null)).await;
        let c = s.cp.admin().await;
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.clone(), &ns);
        Api::<PersistentVolume>::all(c.clone())
            .patch(
                &pv,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {"volguard.io/delete-protection": "true"}}}),
                ),
            )
            .await
            .expect("mark the volume");
        let deleted = refusal(claims.delete("data", &DeleteParams::default()).await);
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        let pods: Api<Pod> = Api::namespaced(c.clone(), &ns);
        pods.delete("writer", &DeleteParams::default())
            .await
            .expect("delete writer");
        s.cp.eventually(
            "the writer's pod is gone",
            Duration::from_secs(60),
            || async { pods.get_opt("writer").await.ok()?.is_none().then_some(()) },
        )
        .await;
        volume_outcome(
            s,
            on,
            &path,
            "the provisioner deletes the marked volume's data",
        )
        .await;
        let outcome = outcome_of(
            &[("claim delete", &deleted)],
            "the writer ended; marked volume's data deleted",
        );
        let r = record(
            s,
            "protected-volume-claim-deleted",
            on,
            &path,
            &seen,
            &outcome,
        )
        .await;
        clean_namespace(s, &ns).await;
        if on {
            assert!(
                deleted.is_some(),
                "volguard let the claim of a protected Delete volume be deleted"
            );
            assert_eq!((r.lost, r.overlaps), (0, 0), "with volguard: {r:?}");
        } else {
            assert!(
                r.lost > 0,
                "without volguard the marked volume's data goes: {r:?}"
            );
        }
    }
}
