//! The ReadWriteOnce lock on the real scheduler, kubelets and apiserver: one node per claim, races between replicas, stale caches, missing claims.

use super::*;

/// A pod on `claim` that no scheduler picks up: it stays Pending until a test binds it.
pub(super) fn unscheduled_pod(name: &str, claim: &str) -> Pod {
    let mut p = claim_pod(name, claim, None);
    if let Some(spec) = p.spec.as_mut() {
        spec.scheduler_name = Some("e2e-nobody".into());
    }
    p
}

/// The AdmissionReview the apiserver sends for the scheduler's bind of `pod` (UID `uid`) to `node`.
pub(super) fn bind_review(ns: &str, pod: &str, uid: &str, node: &str) -> String {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": format!("bind-{pod}"), "kind": {"group": "", "version": "v1", "kind": "Binding"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "binding",
        "name": pod, "namespace": ns, "operation": "CREATE",
        "userInfo": {"username": "system:kube-scheduler", "groups": ["system:authenticated"]},
        "object": {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "namespace": ns, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}},
        "oldObject": null}})
    .to_string()
}

/// volguard's webhook over `store` as it is (no watch keeps it current; pods count as watched),
/// reading live through `client`: a replica whose watches stopped.
pub(super) fn frozen_replica(
    client: kube::Client,
    store: volguard::state::Store,
) -> volguard::admission::Admission {
    use volguard::state::{Needs, View};
    let view = View::from_store(client, std::sync::Arc::new(store), Needs::admission(true));
    volguard::admission::Admission::new(view, Default::default(), vec![])
}

/// This process's LISTs of pods "not older than" a version (`volguard_live_reads_total{read=
/// "list_since"}`): (found, every other result).
fn list_since_reads() -> (u64, u64) {
    let since = "read=\"list_since\"";
    let found = reads_of("volguard_live_reads_total", &[since, "result=\"found\""]);
    let all = reads_of("volguard_live_reads_total", &[since]);
    (found, all - found)
}

/// Every series of this process's metric `name` (`volguard_live_reads_total`,
/// `volguard_cache_since_reads_total`) whose labels contain each of `labels`, summed.
fn reads_of(name: &str, labels: &[&str]) -> u64 {
    let registry = volguard::runtime::MetricsRegistry::default();
    volguard::state::live_reads::register(&registry);
    registry
        .render_prometheus()
        .lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix('{'))
        .filter(|rest| labels.iter().all(|l| rest.contains(l)))
        .filter_map(|rest| rest.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// `o` as volguard's model of it (what a watch would have stored).
pub(super) fn modelled<T: serde::Serialize, M: serde::de::DeserializeOwned>(o: &T) -> M {
    serde_json::from_value(serde_json::to_value(o).expect("json")).expect("model")
}

/// A take-over's LIST of the lock's node reads every page: more pods of the namespace run on the
/// lock's node than one page holds (`NODE_PAGE`, kept small for the apiserver's priority and
/// fairness), the claim's user sorting after them. The lock names a later pod on that node, since
/// deleted, so only the LIST can show the user. A replica whose cache shows no user (its pod watch
/// stopped before the user came) judges a bind to another node when the lock's grace is long over:
/// only the LIST's second page shows the user, so it refuses, the lock unmoved. Reading the first
/// page alone, it would take the lock over (the named pod is gone).
pub(super) async fn rwo_takeover_reads_every_page(cp: &ControlPlane, ns: &str) {
    use volguard::admission::{Endpoint, decode};
    use volguard::rules::rwo_lock::{RWO_LOCK, RwoLock};
    let c = cp.admin().await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    claim(cp, ns, "data").await;
    let fillers = volguard::state::NODE_PAGE as usize + 10;
    for i in 0..fillers {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("a-filler-{i:03}")},
            "spec": {"nodeName": "kwok-1", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "app", "image": "example.invalid/app:1"}]}}))
        .expect("filler");
        pods.create(&PostParams::default(), &p)
            .await
            .expect("filler");
    }
    let lock_of = |pvc: &PersistentVolumeClaim| {
        pvc.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(RWO_LOCK))
            .cloned()
    };
    for name in ["zz-user", "mid"] {
        pods.create(
            &PostParams::default(),
            &claim_pod(name, "data", Some("kwok-1")),
        )
        .await
        .expect("pod on the claim");
        running(cp, ns, name).await;
    }
    let raw = lock_of(&pvcs.get("data").await.expect("claim")).expect("a lock");
    let lock = RwoLock::parse(&raw).expect("lock");
    assert_eq!(
        (lock.node.as_str(), lock.pod.as_str()),
        ("kwok-1", "mid"),
        "the second placement on the lock's node renames it"
    );
    pods.delete("mid", &DeleteParams::default())
        .await
        .expect("delete mid");
    gone_within(cp, &pods, "pod", "mid", LONG).await;
    let locked = pvcs.get("data").await.expect("claim");
    assert_eq!(lock_of(&locked).as_deref(), Some(raw.as_str()));
    let on_node = ListParams::default().fields("spec.nodeName=kwok-1");
    let listed = pods.list(&on_node).await.expect("pods on kwok-1").items;
    let last = listed.last().and_then(|p| p.metadata.name.clone());
    assert!(
        listed.len() > volguard::state::NODE_PAGE as usize && last.as_deref() == Some("zz-user"),
        "the user must sort after a whole page of pods: {} pods, last {last:?}",
        listed.len()
    );
    let rival = pods
        .create(&PostParams::default(), &unscheduled_pod("rival", "data"))
        .await
        .expect("rival");
    let uid = rival.metadata.uid.clone().expect("uid");

    // The cache: the claim as stored, its lock dated a day back, and no pod at all.
    let mut old = lock.clone();
    old.at -= jiff::SignedDuration::from_hours(24);
    let mut stale = serde_json::to_value(&locked).expect("json");
    stale["metadata"]["annotations"][RWO_LOCK] = json!(old.encode());
    let store = volguard::state::Store::default();
    store
        .pvcs
        .apply(serde_json::from_value(stale).expect("claim"));
    let replica = frozen_replica(c.clone(), store);
    let body = bind_review(ns, "rival", &uid, "kwok-2");
    let req = decode(body.as_bytes()).expect("review");
    let since_before = list_since_reads();
    let v = replica
        .decide(Endpoint::Validate, &req, Duration::from_secs(9))
        .await;
    let msg = v.decision.message.clone().unwrap_or_default();
    // The lock's pod was read (missing): the users were listed "not older than" the claim, by the
    // watch cache, every page of it, and that LIST was answered (not read again consistently).
    let since = list_since_reads();
    assert_eq!(
        (since.0 - since_before.0, since.1 - since_before.1),
        (1, 0),
        "one LIST not older than the claim, answered: {since_before:?} -> {since:?}"
    );
    assert_eq!(
        (v.decision.allowed, v.decision.row),
        (false, "rwo-locked-on-other-node"),
        "the user on the LIST's second page must hold the lock: {v:?}"
    );
    assert!(msg.contains("it holds: in use on its node"), "{msg}");
    let now = pvcs.get("data").await.expect("claim");
    assert_eq!(
        lock_of(&now).as_deref(),
        Some(raw.as_str()),
        "the lock moved"
    );
    println!(
        "rwo-takeover-every-page: {} pods on kwok-1, the user last, the lock's pod gone: refused: {msg}",
        listed.len()
    );
}

/// Trust review points 3, 4 and 6 on the real apiserver. A replica whose pod watch stopped long
/// ago (its cache shows neither the holder nor the pod being bound, only an older pod of that name,
/// recreated since) and whose clock runs a day ahead of the replica that wrote the lock (its copy of
/// the lock is dated a day back) judges a bind to another node: the live reads show the real pod
/// and the holder, so it refuses. Then a replica that loses the lock's swap and cannot read the
/// claim back (RBAC lets it patch claims, not get them) refuses too: the scheduler retries.
pub(super) async fn rwo_stale_replica(cp: &ControlPlane, ns: &str) {
    use volguard::admission::{Endpoint, decode};
    use volguard::rules::rwo_lock::{RWO_LOCK, RwoLock};
    let c = cp.admin().await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    claim(cp, ns, "data").await;
    pods.create(
        &PostParams::default(),
        &claim_pod("holder", "data", Some("kwok-1")),
    )
    .await
    .expect("holder");
    running(cp, ns, "holder").await;
    let locked = pvcs.get("data").await.expect("claim");
    let raw = locked
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RWO_LOCK))
        .expect("the webhook locked the claim to kwok-1");
    let mut lock = RwoLock::parse(raw).expect("lock");
    assert_eq!(lock.node, "kwok-1");
    let rival = pods
        .create(&PostParams::default(), &unscheduled_pod("rival", "data"))
        .await
        .expect("rival");
    let uid = rival.metadata.uid.clone().expect("uid");

    // The frozen cache: the claim with its lock dated a day back, the rival's predecessor.
    lock.at -= jiff::SignedDuration::from_hours(24);
    let mut stale = serde_json::to_value(&locked).expect("json");
    stale["metadata"]["annotations"][RWO_LOCK] = json!(lock.encode());
    let store = volguard::state::Store::default();
    store
        .pvcs
        .apply(serde_json::from_value(stale).expect("claim"));
    let old: volguard::model::Pod = serde_json::from_value(json!({
        "metadata": {"name": "rival", "namespace": ns, "uid": "00000000-0000-4000-8000-0000000000aa"},
        "spec": {"containers": [{"name": "app", "image": "example.invalid/app:1"}]}}))
    .expect("pod");
    store.claims.add(&old);
    store.pods.apply(old);
    let replica = frozen_replica(c.clone(), store);
    let body = bind_review(ns, "rival", &uid, "kwok-2");
    let req = decode(body.as_bytes()).expect("review");
    let v = replica
        .decide(Endpoint::Validate, &req, Duration::from_secs(2))
        .await;
    assert_eq!(
        (v.decision.allowed, v.decision.row),
        (false, "rwo-locked-on-other-node"),
        "a frozen replica with a clock a day ahead must not move a live lock: {v:?}"
    );
    let msg = v.decision.message.clone().unwrap_or_default();
    assert!(msg.contains("kwok-1"), "{msg}");
    let now = pvcs.get("data").await.expect("claim");
    assert_eq!(
        now.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(RWO_LOCK)),
        Some(raw),
        "the lock moved"
    );
    println!("rwo-stale-replica: frozen cache, old pod UID, clock +24 h: refused: {msg}");

    // Point 6: the swap lost (the cache's claim is a version behind), the read back forbidden.
    claim(cp, ns, "fresh").await;
    let before = pvcs.get("fresh").await.expect("claim");
    pvcs.patch(
        "fresh",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"moved": "on"}}})),
    )
    .await
    .expect("a newer version of the claim");
    let taker = pods
        .create(&PostParams::default(), &unscheduled_pod("taker", "fresh"))
        .await
        .expect("taker");
    let uid = taker.metadata.uid.clone().expect("uid");
    let rbac = json!([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "patch-claims-only", "namespace": ns},
         "rules": [{"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "patch-claims-only", "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "patch-claims-only"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "e2e-lossy"}]}
    ]);
    for o in rbac.as_array().expect("list") {
        let o: kube::api::DynamicObject = serde_json::from_value(o.clone()).expect("object");
        let kind = o.types.as_ref().expect("types").kind.clone();
        let ar = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            &kind,
        ));
        Api::<kube::api::DynamicObject>::namespaced_with(c.clone(), ns, &ar)
            .create(&PostParams::default(), &o)
            .await
            .expect("rbac");
    }
    let store = volguard::state::Store::default();
    store.pvcs.apply(modelled(&before));
    let taker: volguard::model::Pod = modelled(&taker);
    store.claims.add(&taker);
    store.pods.apply(taker);
    let lossy = frozen_replica(cp.client_as("e2e-lossy", &[]).await, store);
    let body = bind_review(ns, "taker", &uid, "kwok-2");
    let req = decode(body.as_bytes()).expect("review");
    let v = cp
        .eventually("the patch-only role in force", WAIT, || {
            let (lossy, req) = (&lossy, &req);
            async move {
                let v = lossy
                    .decide(Endpoint::Validate, req, Duration::from_secs(2))
                    .await;
                (v.decision.row != "rwo-unknown").then_some(v)
            }
        })
        .await;
    assert_eq!(
        (v.decision.allowed, v.decision.row),
        (false, "rwo-lock-lost-unread"),
        "a lost swap then a failed read must refuse: {v:?}"
    );
    let fresh = pvcs.get("fresh").await.expect("claim");
    assert!(
        fresh
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(RWO_LOCK))
            .is_none(),
        "the stale swap wrote a lock"
    );
    println!(
        "rwo-stale-replica: swap lost, read back forbidden: refused ({})",
        v.decision.message.unwrap_or_default()
    );
}

pub(super) async fn rwo_missing_claim(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    let mut refused = Vec::new();
    for (name, node) in [("ghost-a", "kwok-1"), ("ghost-b", "kwok-2")] {
        let e = pod(&c, ns, name, Some(node), &["ghost"])
            .await
            .expect_err("a direct placement on a missing claim must be refused");
        let (code, msg) = denial(e);
        assert_eq!(code, 403, "{msg}");
        assert!(msg.contains("Create the claim first"), "{msg}");
        refused.push(name);
    }
    let mut eph = pod_template(
        "eph",
        json!({"name": "data", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}),
    );
    eph["metadata"]["name"] = json!("eph");
    eph["spec"]["nodeName"] = json!("kwok-1");
    let eph: Pod = serde_json::from_value(eph).expect("pod");
    Api::<Pod>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &eph)
        .await
        .expect("an ephemeral claim is created after its pod");
    // Once the claim exists, the first placement takes it.
    pvc(&c, ns, "ghost", None).await.expect("pvc");
    cp.eventually("placed once the claim exists", WAIT, || {
        let c = c.clone();
        async move {
            pod(&c, ns, "ghost-a", Some("kwok-1"), &["ghost"])
                .await
                .ok()
                .map(|_| ())
        }
    })
    .await;
    println!(
        "rwo-missing-claim: {refused:?} refused while the claim was missing; placed once it existed"
    );
}

/// Claim `held` used by the running pod `holder` on kwok-1: a strip of its finalizer is a Fail
/// rule's refusal, volguard's own answer.
pub(super) async fn held_claim(cp: &ControlPlane, ns: &str) {
    claim(cp, ns, "held").await;
    Api::<Pod>::namespaced(cp.admin().await, ns)
        .create(
            &PostParams::default(),
            &claim_pod("holder", "held", Some("kwok-1")),
        )
        .await
        .expect("holder");
    running(cp, ns, "holder").await;
}

pub(super) fn deployment(
    name: &str,
    claim: &str,
    strategy: serde_json::Value,
) -> k8s_openapi::api::apps::v1::Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": 1, "strategy": strategy, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "example.invalid/app:1"}],
                    "automountServiceAccountToken": false,
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}}
    }))
    .expect("deployment")
}

/// The pods of app `name`: (pod name, node) for each, oldest first.
pub(super) async fn app_pods(
    c: &kube::Client,
    ns: &str,
    name: &str,
) -> Vec<(String, Option<String>)> {
    let mut pods = Api::<Pod>::namespaced(c.clone(), ns)
        .list(&kube::api::ListParams::default().labels(&format!("app={name}")))
        .await
        .expect("list")
        .items;
    pods.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
    pods.into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.spec.and_then(|s| s.node_name),
            )
        })
        .collect()
}

/// A new revision of a Deployment's pod template (what `kubectl rollout restart` does).
pub(super) async fn roll_out(deploys: &Api<k8s_openapi::api::apps::v1::Deployment>, name: &str) {
    deploys
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}}),
            ),
        )
        .await
        .expect("rollout");
}

/// A Deployment of `replicas` pods on `claim` that must sit on distinct nodes (required pod
/// anti-affinity): the scheduler binds them to two nodes milliseconds apart.
pub(super) fn spread_deployment(
    name: &str,
    claim: &str,
    replicas: i32,
) -> k8s_openapi::api::apps::v1::Deployment {
    let mut d = deployment(name, claim, json!({"type": "Recreate"}));
    let v = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": "kubernetes.io/hostname"}]}});
    if let Some(spec) = d.spec.as_mut() {
        spec.replicas = Some(replicas);
        if let Some(ps) = spec.template.spec.as_mut() {
            ps.affinity = Some(serde_json::from_value(v).expect("affinity"));
            // Rounds end by deleting the pods: kwok finishes them after this grace.
            ps.termination_grace_period_seconds = Some(1);
        }
    }
    d
}

/// The running pods (name, node) and the refused ones (name, refusal) of a race.
pub(super) type RaceState = (Vec<(String, String)>, Vec<(String, String)>);

/// rules.md §2f's promise, checked on every look: the app's non-terminal pods sit on one node.
pub(super) fn assert_one_node(pods: &[Pod], app: &str) {
    if let Err(e) = split_nodes(pods, app) {
        panic!("{e}");
    }
}

/// `Err` naming the nodes when the app's non-terminal pods sit on more than one.
pub(super) fn split_nodes(pods: &[Pod], app: &str) -> Result<(), String> {
    let mut nodes: Vec<&str> = pods
        .iter()
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .filter_map(|p| p.spec.as_ref()?.node_name.as_deref())
        .collect();
    nodes.sort();
    nodes.dedup();
    match nodes.len() {
        0 | 1 => Ok(()),
        _ => Err(format!("{app}: pods on {nodes:?} share one RWO claim")),
    }
}

/// The scheduler's events for a pod that mention volguard's RWO rule.
pub(super) async fn rwo_refusals(c: &kube::Client, ns: &str, pod: &str) -> Vec<String> {
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(c.clone(), ns)
        .list(&kube::api::ListParams::default().fields(&format!("involvedObject.name={pod}")))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter_map(|e| e.message)
        .filter(|m| m.contains("rwo-single-node.volguard.io"))
        .collect()
}

/// rules.md §2f with the real kube-scheduler and Deployment controller: a RollingUpdate's new
/// pod waits Pending (the scheduler's events carry volguard's message) while the old pod runs on
/// another node, and runs once the old pod has ended; a Recreate rollout is never refused.
pub(super) async fn rwo_single_node(cp: &ControlPlane, ns: &str) {
    use k8s_openapi::api::apps::v1::Deployment;
    let c = cp.admin().await;
    claim(cp, ns, "data").await;
    let deploys = Api::<Deployment>::namespaced(c.clone(), ns);
    let rolling =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    deploys
        .create(
            &PostParams::default(),
            &deployment("roll", "data", rolling.clone()),
        )
        .await
        .expect("deployment");
    let (old, old_node) = cp
        .eventually("first pod scheduled", WAIT, || {
            let c = c.clone();
            async move {
                let pods = app_pods(&c, ns, "roll").await;
                let (name, node) = pods.into_iter().next()?;
                Some((name, node?))
            }
        })
        .await;
    running(cp, ns, &old).await;
    // Its node is cordoned: the rollout's new pod can only go to the other node.
    Api::<Node>::all(c.clone())
        .patch(
            &old_node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .expect("cordon");
    roll_out(&deploys, "roll").await;
    let (new, refusal) = cp
        .eventually("new pod refused by volguard at bind time", WAIT, || {
            let c = c.clone();
            let old = old.clone();
            async move {
                let pods = app_pods(&c, ns, "roll").await;
                let (new, node) = pods.into_iter().find(|(n, _)| *n != old)?;
                assert!(
                    node.is_none(),
                    "{new} bound to {node:?} while {old} holds the volume"
                );
                let msg = rwo_refusals(&c, ns, &new).await.into_iter().next()?;
                Some((new, msg))
            }
        })
        .await;
    assert!(
        refusal.contains(&format!("pod \"{old}\" uses it on node \"{old_node}\"")),
        "{refusal}"
    );
    println!("rwo: {new} waits Pending; scheduler event: {refusal}");
    // The old pod ends (its kubelet reports it finished): the volume is free. What volguard
    // guarantees from here: never two nodes on the claim, and the rollout completes. Which pod
    // binds first (the new one on its retry, or the old ReplicaSet's replacement) is a race
    // between two ReplicaSets that volguard does not decide.
    Api::<Pod>::namespaced(cp.kubelet(&old_node).await, ns)
        .patch_status(
            &old,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
        )
        .await
        .expect("old pod finished");
    // Either the new revision runs, or the old ReplicaSet's replacement won the claim first and
    // the new pod waits, told by volguard which pod holds the claim on which node (with a third
    // schedulable node the scheduler may keep scoring the new pod there: docs/reference.md "what cannot roll").
    let outcome = cp
        .eventually("rollout: new revision runs, or waits told why", LONG, || {
            let c = c.clone();
            let old_node = old_node.clone();
            async move {
                let pods = Api::<Pod>::namespaced(c.clone(), ns)
                    .list(&ListParams::default().labels("app=roll"))
                    .await
                    .ok()?
                    .items;
                assert_one_node(&pods, "roll");
                let live = |p: &&Pod| {
                    p.metadata.deletion_timestamp.is_none()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                };
                let rev2 = |p: &Pod| {
                    p.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get("rev"))
                        .is_some_and(|r| r == "2")
                };
                if let Some(p) = pods.iter().filter(live).find(|p| rev2(p)) {
                    let node = p.spec.as_ref()?.node_name.clone()?;
                    assert_ne!(node, old_node, "bound to the cordoned node");
                    return Some(format!(
                        "{} (new revision) runs on {node}",
                        p.metadata.name.clone()?
                    ));
                }
                let holder = pods.iter().find(live)?;
                let (h, hn) = (
                    holder.metadata.name.clone()?,
                    holder.spec.as_ref()?.node_name.clone()?,
                );
                let waiting = pods
                    .iter()
                    .find(|p| rev2(p) && p.spec.as_ref().is_some_and(|s| s.node_name.is_none()))?;
                let w = waiting.metadata.name.clone()?;
                let named = format!("pod \"{h}\" uses it on node \"{hn}\"");
                let locked = format!("locked to node \"{hn}\" by pod \"{h}\"");
                rwo_refusals(&c, ns, &w)
                    .await
                    .iter()
                    .any(|m| m.contains(&named) || m.contains(&locked))
                    .then(|| {
                        format!(
                            "the old ReplicaSet's {h} took the claim on {hn} first; {w} waits, refused naming it"
                        )
                    })
            }
        })
        .await;
    println!("rwo: after {old} ended: {outcome}; never two nodes");

    // RollingUpdate with room on the lock's node: the placement hint steers the new pod beside
    // the old one, and the rollout rolls without a refusal.
    Api::<Node>::all(c.clone())
        .patch(
            &old_node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": false}})),
        )
        .await
        .expect("uncordon");
    claim(cp, ns, "data3").await;
    deploys
        .create(
            &PostParams::default(),
            &deployment("hinted", "data3", rolling.clone()),
        )
        .await
        .expect("deployment");
    let (h_old, h_node) = cp
        .eventually("hinted: first pod scheduled", WAIT, || {
            let c = c.clone();
            async move {
                let (name, node) = app_pods(&c, ns, "hinted").await.into_iter().next()?;
                Some((name, node?))
            }
        })
        .await;
    running(cp, ns, &h_old).await;
    // The lock names the Node object; its hostname label need not be its name (the hint once
    // matched the label and steered nowhere on such nodes).
    let relabel = |host: String| {
        let nodes = Api::<Node>::all(c.clone());
        let h_node = h_node.clone();
        async move {
            nodes
                .patch(
                    &h_node,
                    &PatchParams::default(),
                    &Patch::Merge(
                        json!({"metadata": {"labels": {"kubernetes.io/hostname": host}}}),
                    ),
                )
                .await
                .expect("relabel the node");
        }
    };
    relabel(format!("host-of-{h_node}")).await;
    roll_out(&deploys, "hinted").await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let (h_new, h_new_node, affinity) = cp
        .eventually("hinted: new pod runs", LONG, || {
            let pods = pods.clone();
            let h_old = h_old.clone();
            async move {
                let list = pods
                    .list(&ListParams::default().labels("app=hinted"))
                    .await
                    .ok()?
                    .items;
                assert_one_node(&list, "hinted");
                list.into_iter().find_map(|p| {
                    let name = p.metadata.name.clone()?;
                    let running = p.status.as_ref()?.phase.as_deref() == Some("Running");
                    let spec = p.spec?;
                    (name != h_old && running).then(|| {
                        (
                            name,
                            spec.node_name.unwrap_or_default(),
                            json!(spec.affinity),
                        )
                    })
                })
            }
        })
        .await;
    relabel(h_node.clone()).await;
    assert!(
        affinity
            .to_string()
            .contains(&format!("\"values\":[\"{h_node}\"]")),
        "no placement hint to {h_node}: {affinity}"
    );
    assert_eq!(h_new_node, h_node, "the hinted pod landed elsewhere");
    assert!(
        rwo_refusals(&c, ns, &h_new).await.is_empty(),
        "the hinted rollout was refused"
    );
    println!(
        "rwo: RollingUpdate with room on {h_node}: {h_new} got a preferred affinity to {h_node}, landed beside {h_old}, no refusal"
    );

    // Recreate: the old pod is gone before the new one exists; nothing is refused.
    claim(cp, ns, "data2").await;
    deploys
        .create(
            &PostParams::default(),
            &deployment("recreate", "data2", json!({"type": "Recreate"})),
        )
        .await
        .expect("deployment");
    let (first, first_node) = cp
        .eventually("recreate: first pod scheduled", WAIT, || {
            let c = c.clone();
            async move {
                let (name, node) = app_pods(&c, ns, "recreate").await.into_iter().next()?;
                Some((name, node?))
            }
        })
        .await;
    running(cp, ns, &first).await;
    roll_out(&deploys, "recreate").await;
    // The Deployment controller deletes the old pod; its kubelet (kwok) finishes the delete.
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    cp.eventually("recreate: old pod being deleted", WAIT, || {
        let pods = pods.clone();
        let first = first.clone();
        async move {
            pods.get(&first)
                .await
                .ok()?
                .metadata
                .deletion_timestamp
                .map(|_| ())
        }
    })
    .await;
    let (second, second_node) = cp
        .eventually("recreate: new pod scheduled", WAIT, || {
            let c = c.clone();
            let first = first.clone();
            async move {
                let (name, node) = app_pods(&c, ns, "recreate")
                    .await
                    .into_iter()
                    .find(|(n, _)| *n != first)?;
                Some((name, node?))
            }
        })
        .await;
    assert!(
        rwo_refusals(&c, ns, &second).await.is_empty(),
        "Recreate was refused"
    );
    println!(
        "rwo: Recreate rolled {first} ({first_node}) -> {second} ({second_node}) without a refusal"
    );

    // A StatefulSet pod moved off a cordoned node: the controller creates the successor (same
    // name) only once its predecessor is gone, so the successor never meets a holder.
    let sets = Api::<StatefulSet>::namespaced(c.clone(), ns);
    sets.create(
        &PostParams::default(),
        &statefulset(
            "db",
            1,
            json!({"whenScaled": "Retain", "whenDeleted": "Retain"}),
        ),
    )
    .await
    .expect("statefulset");
    let before = running(cp, ns, "db-0").await;
    let from = before
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("node");
    let (ok, out) = kubectl(cp, &["cordon", &from]);
    assert!(ok, "{out}");
    pods.delete("db-0", &DeleteParams::default())
        .await
        .expect("delete db-0");
    let moved = cp
        .eventually("db-0 recreated on another node", LONG, || {
            let pods = pods.clone();
            let uid = before.metadata.uid.clone();
            async move {
                let p = pods.get("db-0").await.ok()?;
                let running = p.status.as_ref()?.phase.as_deref() == Some("Running");
                (p.metadata.uid != uid && running).then_some(p)
            }
        })
        .await;
    let to = moved.spec.and_then(|s| s.node_name).unwrap_or_default();
    assert_ne!(to, from);
    assert!(
        rwo_refusals(&c, ns, "db-0").await.is_empty(),
        "the successor met a holder"
    );
    let (ok, out) = kubectl(cp, &["uncordon", &from]);
    assert!(ok, "{out}");
    println!(
        "rwo: StatefulSet db-0 moved off cordoned {from} to {to} after its predecessor was gone, no refusal"
    );
}

/// rules.md §2f liveness: two pods created at once with `spec.nodeName` on one node, naming one
/// ReadWriteOnce claim, both twice in their volumes. Nothing retries a refused create, so the one
/// that meets the other in flight waits inside the webhook's time instead of being refused, and
/// a claim named in two volumes takes its lock once. Both must be admitted, on the same node.
pub(super) async fn rwo_same_node_creates(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    pvc(&c, ns, "shared-node", None).await.expect("pvc");
    let (a, b) = tokio::join!(
        pod(
            &c,
            ns,
            "first",
            Some("kwok-1"),
            &["shared-node", "shared-node"]
        ),
        pod(
            &c,
            ns,
            "second",
            Some("kwok-1"),
            &["shared-node", "shared-node"]
        ),
    );
    a.expect("the first direct placement is admitted");
    b.expect("the second direct placement on the same node waits and is admitted");
    // The lock names one of them, on kwok-1.
    let lock = Api::<PersistentVolumeClaim>::namespaced(c, ns)
        .get("shared-node")
        .await
        .expect("claim")
        .metadata
        .annotations
        .unwrap_or_default()
        .get("volguard.io/rwo-lock")
        .cloned()
        .unwrap_or_default();
    assert!(lock.contains("\"node\":\"kwok-1\""), "{lock}");
    println!(
        "rwo-same-node-creates: two direct placements on kwok-1 at once, each naming the claim twice: both admitted; {lock}"
    );
}

/// A webhook replica started a moment ago judges a bind against a lock written for a pod created
/// with `spec.nodeName` and since deleted. A pod missing after a create proves nothing while the
/// create may be in flight, so a replica that knows nothing more refuses while the lock is young;
/// one that saw that pod stored and go knows its create landed, and takes the lock over at once.
pub(super) async fn rwo_restarted_replica(cp: &ControlPlane, ns: &str) {
    use volguard::admission::{Endpoint, decode};
    use volguard::rules::rwo_lock::{DEFAULT_GRACE as BIND_GRACE, RWO_LOCK, RwoLock, Via};
    let c = cp.admin().await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    claim(cp, ns, "data").await;
    let mut first = claim_pod("first", "data", None);
    if let Some(spec) = first.spec.as_mut() {
        spec.node_name = Some("kwok-1".into());
    }
    let written = std::time::Instant::now();
    let first = pods
        .create(&PostParams::default(), &first)
        .await
        .expect("first");
    let first_uid = first.metadata.uid.clone().expect("uid");
    running(cp, ns, "first").await;
    let raw = pvcs
        .get("data")
        .await
        .expect("claim")
        .metadata
        .annotations
        .and_then(|a| a.get(RWO_LOCK).cloned())
        .expect("the webhook locked the claim to kwok-1");
    let lock = RwoLock::parse(&raw).expect("lock");
    assert_eq!(
        (lock.node.as_str(), lock.via),
        ("kwok-1", Some(Via::Create))
    );
    pods.delete("first", &Default::default())
        .await
        .expect("delete first");
    gone_within(cp, &pods, "pod", "first", LONG).await;
    let second = pods
        .create(&PostParams::default(), &unscheduled_pod("second", "data"))
        .await
        .expect("second");
    let uid = second.metadata.uid.clone().expect("uid");
    let review = |dry_run: bool| {
        let mut r: serde_json::Value =
            serde_json::from_str(&bind_review(ns, "second", &uid, "kwok-2")).expect("review");
        r["request"]["dryRun"] = json!(dry_run);
        r.to_string()
    };
    let judge = |replica: volguard::admission::Admission, body: String| async move {
        let req = decode(body.as_bytes()).expect("review");
        let v = replica
            .decide(Endpoint::Validate, &req, Duration::from_secs(2))
            .await;
        (v.decision.allowed, v.decision.row)
    };
    let age = written.elapsed();
    assert!(
        age < BIND_GRACE - Duration::from_secs(10),
        "the setup took {age:?}: too long to judge a young lock"
    );
    assert_eq!(
        judge(fresh_replica(&c, &pvcs, None).await, review(true)).await,
        (false, "rwo-locked-on-other-node"),
        "a young lock whose created pod is missing may still be in flight (age {age:?})"
    );
    assert_eq!(
        judge(
            fresh_replica(&c, &pvcs, Some(&first_uid)).await,
            review(true)
        )
        .await,
        (true, "rwo-lock-dry-run"),
        "a replica that saw the created pod stored and gone knows it was deleted"
    );
    println!("rwo-restarted-replica: young lock ({age:?}): refused unseen, taken over seen stored");
    let _ = pods.delete("second", &Default::default()).await;
}

/// A replica just started: the claim as stored, its clock at zero, and the pod of `gone` seen
/// stored and gone when given.
async fn fresh_replica(
    c: &kube::Client,
    pvcs: &Api<PersistentVolumeClaim>,
    gone: Option<&str>,
) -> volguard::admission::Admission {
    let store = volguard::state::Store::default();
    store
        .pvcs
        .apply(modelled(&pvcs.get("data").await.expect("claim")));
    if let Some(uid) = gone {
        store.gone_pods.note(uid);
    }
    frozen_replica(c.clone(), store)
}

/// A webhook replica started after a lock's pod was deleted (it never saw it go) judges a bind
/// to another node from its own cache once its pod watch has applied the claim's version: a
/// bind's pod was stored before its lock, so absent there it was deleted; the users on the lock's
/// node are what that cache shows. The take-over reads nothing from the apiserver. A lock written
/// by a pod CREATE with `spec.nodeName`, its pod deleted too, is not judged so (that pod is stored
/// after its lock: absent, it may still land): the replica reads it live and refuses the young
/// lock.
pub(super) async fn rwo_restarted_replica_reads_its_cache(cp: &ControlPlane, ns: &str) {
    use volguard::admission::{Admission, Endpoint, decode};
    use volguard::rules::rwo_lock::{RWO_LOCK, RwoLock, Via};
    use volguard::state::{Needs, Source};
    let c = cp.admin().await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let lock_of = |pvc: PersistentVolumeClaim| {
        let raw = pvc
            .metadata
            .annotations
            .and_then(|a| a.get(RWO_LOCK).cloned());
        RwoLock::parse(&raw.expect("the webhook locked the claim")).expect("lock")
    };
    // A bind's lock: "first" bound to kwok-1 through pods/binding (the webhook writes the lock).
    claim(cp, ns, "bound").await;
    let first = pods
        .create(&PostParams::default(), &unscheduled_pod("first", "bound"))
        .await
        .expect("first");
    // Naming the pod's UID, as the scheduler does (a bind without one is locked as a create).
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
                         "metadata": {"name": "first", "uid": first.metadata.uid},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": "kwok-1"}});
    pods.create_subresource::<_, serde_json::Value>(
        "binding",
        "first",
        &PostParams::default(),
        &binding,
    )
    .await
    .expect("bind first");
    running(cp, ns, "first").await;
    let lock = lock_of(pvcs.get("bound").await.expect("claim"));
    assert_eq!(
        (lock.node.as_str(), lock.pod.as_str(), lock.via),
        ("kwok-1", "first", Some(Via::Bind))
    );
    // A create's lock: "made" created on kwok-1.
    claim(cp, ns, "created").await;
    let mut made = claim_pod("made", "created", None);
    if let Some(spec) = made.spec.as_mut() {
        spec.node_name = Some("kwok-1".into());
    }
    pods.create(&PostParams::default(), &made)
        .await
        .expect("made");
    running(cp, ns, "made").await;
    let made = lock_of(pvcs.get("created").await.expect("claim"));
    assert_eq!(made.via, Some(Via::Create));
    for name in ["first", "made"] {
        pods.delete(name, &DeleteParams::default())
            .await
            .expect("delete");
        gone_within(cp, &pods, "pod", name, LONG).await;
    }
    // The replica starts now: its pod watch never saw either pod.
    let view =
        volguard::state::open(Source::Live(c.clone()), Needs::admission(true)).expect("view");
    let replica = Admission::new(view.clone(), Default::default(), vec![]);
    let mut uids = Vec::new();
    for (pod, claim) in [("second", "bound"), ("other", "created")] {
        let p = pods
            .create(&PostParams::default(), &unscheduled_pod(pod, claim))
            .await
            .expect("pod");
        uids.push(p.metadata.uid.expect("uid"));
    }
    let judge = |pod: &'static str, uid: String| {
        let replica = &replica;
        async move {
            let mut r: serde_json::Value =
                serde_json::from_str(&bind_review(ns, pod, &uid, "kwok-2")).expect("review");
            r["request"]["dryRun"] = json!(true);
            let body = r.to_string();
            let req = decode(body.as_bytes()).expect("review");
            let v = replica
                .decide(Endpoint::Validate, &req, Duration::from_secs(9))
                .await;
            (v.decision.allowed, v.decision.row)
        }
    };
    let live = || reads_of("volguard_live_reads_total", &["kind=\"Pod\""]);
    let cached = |read: &str| {
        reads_of(
            "volguard_cache_since_reads_total",
            &[&format!("read=\"{read}\"")],
        )
    };
    // The claim's version as the replica holds it (the controller may still write the claim, its
    // "unused since", after "first" went).
    let claim_version = || {
        view.held::<volguard::model::Pvc>(ns, "bound")
            .and_then(|p| p.metadata.resource_version.as_deref()?.parse::<u64>().ok())
    };
    let first_uid = first.metadata.uid.clone().expect("uid");
    let (mut before, mut after) = ((0, 0, 0), (0, 0, 0));
    for attempt in 0.. {
        // Until the replica's pod watch has applied the claim's version (a pod event after it:
        // "other" is touched until one arrives).
        let mut version = None;
        for poke in 0..60 {
            if let Some(v) = claim_version()
                && view.synced()
                && view.pod_absent_since(ns, "first", &first_uid, v)
            {
                version = Some(v);
                break;
            }
            let touch = json!({"metadata": {"annotations": {"e2e-poke": poke.to_string()}}});
            let _ = pods
                .patch("other", &PatchParams::default(), &Patch::Merge(&touch))
                .await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let version = version.expect("the replica's pod watch never passed the claim's version");
        before = (live(), cached("list"), cached("absent"));
        assert_eq!(
            judge("second", uids[0].clone()).await,
            (true, "rwo-lock-dry-run"),
            "a bind's lock whose pod the caught-up cache lacks is taken over"
        );
        after = (live(), cached("list"), cached("absent"));
        // The claim written meanwhile (its version past the pod watch's again): judged again.
        if claim_version() == Some(version) || attempt == 3 {
            break;
        }
    }
    assert_eq!(
        (after.0 - before.0, after.1 - before.1, after.2 - before.2),
        (0, 1, 1),
        "no live pod read; the users and the lock's pod from the cache: {before:?} -> {after:?}"
    );
    assert_eq!(
        judge("other", uids[1].clone()).await,
        (false, "rwo-locked-on-other-node"),
        "a young create's lock whose pod is missing may still be in flight"
    );
    let last = (live(), cached("absent"));
    assert!(
        last.0 > after.0,
        "the create's pod read live: {after:?} -> {last:?}"
    );
    assert_eq!(last.1, after.2, "never taken as absent from the cache");
    println!(
        "rwo-restarted-replica-reads-its-cache: bind's lock taken over with no live pod read; create's lock refused after {} live pod reads",
        last.0 - after.0
    );
    for name in ["second", "other"] {
        let _ = pods.delete(name, &DeleteParams::default()).await;
    }
}
