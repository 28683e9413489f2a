//! A ReadWriteOnce claim on two nodes: a rolling update that moves its pod, and two pods
//! naming one claim placed at the same instant, on shared-filesystem storage (no attach step:
//! nothing in Kubernetes itself enforces ReadWriteOnce there) and on attachable storage (the
//! attach/detach controller refuses a second attachment: Multi-Attach).

use super::*;

fn pod_on(name: &str, node: &str) -> Pod {
    let mut spec = writer_spec("data");
    spec["nodeSelector"] = json!({"kubernetes.io/hostname": node});
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "w"}}, "spec": spec}),
    )
    .expect("pod")
}

/// How a pod that did not run is held: a refusal or a warning Event (Multi-Attach, scheduling).
async fn held(c: &kube::Client, ns: &str, pod: &str) -> String {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), ns);
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    list.iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter_map(|e| e.reason.clone())
        .next_back()
        .unwrap_or_else(|| "pending".into())
}

async fn phase(pods: &Api<Pod>, name: &str) -> String {
    pods.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|p| p.status?.phase)
        .unwrap_or_else(|| "absent".into())
}

/// Two pods naming one ReadWriteOnce claim, one for node-a and one for node-b, created at the
/// same instant (the scheduler binds both at once).
pub(super) async fn s_two_pods_one_claim(s: &mut Shared, driver: &Driver, scenario: &str) {
    for on in [false, true] {
        volguard(s, on).await;
        let ns = format!("dl-{scenario}-{}", mode(on));
        let c = s.cp.admin().await;
        namespace(&c, &ns).await;
        claim(&c, &ns, "data", driver).await;
        let pods: Api<Pod> = Api::namespaced(c.clone(), &ns);
        let (a, b) = (pod_on("w-a", "node-a"), pod_on("w-b", "node-b"));
        let pp = PostParams::default();
        let (ra, rb) = tokio::join!(pods.create(&pp, &a), pods.create(&pp, &b));
        let created = [refusal(ra), refusal(rb)];
        let path = log_path(s, &ns, "data").await;
        // Long enough for both to be placed, attached and started, had they been let.
        tokio::time::sleep(Duration::from_secs(20)).await;
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        let mut outcome = Vec::new();
        for (name, r) in ["w-a", "w-b"].into_iter().zip(&created) {
            let p = phase(&pods, name).await;
            outcome.push(match r {
                Some(m) => format!("{name} refused ({})", rule_of(m)),
                None if p == "Running" => format!("{name} Running"),
                None => format!("{name} {p} ({})", held(&c, &ns, name).await),
            });
        }
        let r = record(s, scenario, on, &path, &seen, &outcome.join(", ")).await;
        let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
            .delete(&ns, &DeleteParams::default())
            .await;
        let running = outcome.iter().filter(|o| o.ends_with("Running")).count();
        if on || driver.attach {
            assert_eq!((r.lost, r.overlaps), (0, 0), "{} volguard: {r:?}", mode(on));
            assert!(
                running <= 1,
                "two pods ran on one ReadWriteOnce claim: {outcome:?}"
            );
        } else {
            assert_eq!(running, 2, "{outcome:?}");
            assert!(
                r.overlaps > 0,
                "two writers on shared storage overlap: {r:?}"
            );
        }
    }
}

pub(super) async fn s_two_pods_shared_fs(s: &mut Shared) {
    s_two_pods_one_claim(s, &SHARED_FS, "two-pods-one-claim-sharedfs").await;
}

pub(super) async fn s_two_pods_attached(s: &mut Shared) {
    s_two_pods_one_claim(s, &ATTACHED, "two-pods-one-claim-attached").await;
}

/// A Deployment (RollingUpdate: maxSurge 1, maxUnavailable 0) with a ReadWriteOnce claim on
/// shared-filesystem storage, moved from node-a to node-b by a template change. Without
/// volguard the new pod starts on node-b while the old one still writes; with volguard its
/// binding to node-b is refused while the old pod holds the claim, and the rollout waits (the
/// user's fix is `strategy: Recreate`, docs/rules.md §5).
pub(super) async fn s_rolling_update(s: &mut Shared) {
    use k8s_openapi::api::apps::v1::Deployment;
    for on in [false, true] {
        volguard(s, on).await;
        let ns = format!("dl-rollout-{}", mode(on));
        let c = s.cp.admin().await;
        namespace(&c, &ns).await;
        claim(&c, &ns, "data", &SHARED_FS).await;
        let mut spec = writer_spec("data");
        spec["nodeSelector"] = json!({"kubernetes.io/hostname": "node-a"});
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "app"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "app"}},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                     "template": {"metadata": {"labels": {"app": "app"}}, "spec": spec}}
        }))
        .expect("deployment");
        let deployments: Api<Deployment> = Api::namespaced(c.clone(), &ns);
        deployments
            .create(&PostParams::default(), &d)
            .await
            .expect("create deployment");
        let pods: Api<Pod> = Api::namespaced(c.clone(), &ns);
        let first =
            s.cp.eventually("the first pod runs", Duration::from_secs(120), || async {
                pods.list(&ListParams::default())
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            })
            .await;
        let path = log_path(s, &ns, "data").await;
        records_of(&path, &uid(&first), 10, Duration::from_secs(60)).await;
        deployments
            .patch(
                "app",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": "node-b"}}}}})),
            )
            .await
            .expect("roll");
        tokio::time::sleep(Duration::from_secs(30)).await;
        let seen = records::snapshot(&read(&path).unwrap_or_default());
        let now = pods
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let on_b = now
            .iter()
            .find(|p| node_of(p) == "node-b" || uid(p) != uid(&first));
        let outcome = match on_b {
            Some(p) if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") => {
                "new pod ran on node-b; old pod ended after it".to_string()
            }
            Some(p) => format!(
                "new pod {} ({}); old pod writes on",
                p.status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default(),
                held(&c, &ns, p.metadata.name.as_deref().unwrap_or_default()).await
            ),
            None => "no new pod".into(),
        };
        let r = record(s, "rolling-update-rwo-sharedfs", on, &path, &seen, &outcome).await;
        let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
            .delete(&ns, &DeleteParams::default())
            .await;
        if on {
            assert_eq!((r.lost, r.overlaps), (0, 0), "with volguard: {r:?}");
        } else {
            assert!(
                r.overlaps > 0,
                "without volguard the rollout runs two writers: {r:?}"
            );
        }
    }
}
