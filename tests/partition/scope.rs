//! A fence's scope: a fence that covers only some of the node's volumes, and the csi-addons
//! NetworkFence backend.

use super::*;

/// What a storage system with csi-addons does, played by the test: a NetworkFence asking to fence
/// is carried out (the node's marker file) and reported `Succeeded`; a deleted one is unfenced.
pub(crate) fn storage_system(c: &kube::Client, fenced_dir: PathBuf) -> tokio::task::JoinHandle<()> {
    let api = support::objects::network_fence_api(c);
    tokio::spawn(async move {
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        loop {
            if let Ok(list) = api.list(&ListParams::default()).await {
                let mut now = BTreeMap::new();
                for o in list.items {
                    let name = o.metadata.name.clone().unwrap_or_default();
                    let node = o
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("volguard.io/node").cloned())
                        .unwrap_or_default();
                    now.insert(name.clone(), node.clone());
                    if o.data["spec"]["fenceState"] == "Fenced"
                        && o.data["status"]["result"].is_null()
                    {
                        let _ = std::fs::write(fenced_dir.join(&node), "");
                        let _ = api
                            .patch_status(
                                &name,
                                &PatchParams::default(),
                                &Patch::Merge(json!({"status": {"result": "Succeeded", "message": "fencing operation successful"}})),
                            )
                            .await;
                    }
                }
                for (gone, node) in seen.iter().filter(|(n, _)| !now.contains_key(*n)) {
                    let _ = std::fs::remove_file(fenced_dir.join(node));
                    println!(
                        "  (storage system: NetworkFence {gone} deleted, node {node} unfenced)"
                    );
                }
                seen = now;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}

/// A volume of the CSI driver the NetworkFence backend fences, pre-bound to the StatefulSet's
/// claim `data-<set>-0` (what the driver's provisioner would have made).
pub(crate) async fn csi_volume(c: &kube::Client, ns: &str, set: &str) {
    use k8s_openapi::api::core::v1::PersistentVolume;
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": format!("{ns}-{set}")},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "fence-network", "persistentVolumeReclaimPolicy": "Retain",
                 "claimRef": {"namespace": ns, "name": format!("data-{set}-0")},
                 "csi": {"driver": "e2e.csi.volguard.io", "volumeHandle": format!("{ns}-{set}")}}
    }))
    .expect("pv");
    Api::<PersistentVolume>::all(c.clone())
        .create(&PostParams::default(), &pv)
        .await
        .expect("csi volume");
}

/// Issue 40 point 1: a NetworkFence cuts one CSI driver's storage network, but the pod on the node
/// uses a hostPath volume the fence does not cover: the incident stays `Fenced`, never tainted,
/// saying what is not covered (status, `FenceScopeIncomplete` Event, `volguard_fencing_scope_held`).
pub(crate) async fn partition_partial_fence(s: &mut Shared) {
    let (ns, node) = ("p-partial", "partial");
    workload(&mut s.cp, ns, "db", "fence-network", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    let storage = storage_system(&c, s.agent_dir.join("fenced"));
    s.cp.stop_kwok(node);
    let f =
        s.cp.eventually("the incident held for its fence's scope", LONG, || {
            let c = c.clone();
            async move {
                incidents(&c, node)
                    .await
                    .into_iter()
                    .find(|f| f.status.phase == Phase::Fenced && !f.status.uncovered.is_empty())
            }
        })
        .await;
    let why = f.status.message.clone().unwrap_or_default();
    assert!(
        why.contains("covers CSI driver e2e.csi.volguard.io") && why.contains("hostPath"),
        "{why}"
    );
    s.cp.eventually("volguard_fencing_scope_held 1", LONG, || async {
        (controller_metric(&s.cp, "volguard_fencing_scope_held").await == 1.0).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !tainted(&c, node).await,
        "tainted with a fence that does not cover the node"
    );
    let reasons = Api::<Event>::namespaced(c.clone(), "default")
        .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect::<BTreeSet<_>>();
    assert!(reasons.contains("FenceScopeIncomplete"), "{reasons:?}");
    storage.abort();
    check.finish();
    println!("partition-partial-fence: held Fenced, no taint: {why}");
    print_record(&f);
    forget_node(&mut s.cp, node).await;
}

pub(crate) async fn partition_networkfence(s: &mut Shared) {
    let (ns, node) = ("p-netfence", "netfence");
    // The pod's volume is the fenced driver's: the NetworkFence covers it.
    csi_volume(&s.cp.admin().await, ns, "db").await;
    workload(&mut s.cp, ns, "db", "fence-network", node).await;
    let c = s.cp.admin().await;
    let check = Checker::start(&c, ns, s.agent_dir.join("fenced"));
    let storage = storage_system(&c, s.agent_dir.join("fenced"));
    s.cp.stop_kwok(node);
    let f = incident_in(&s.cp, node, Phase::Released, LONG).await;
    assert_eq!(
        f.spec.backends,
        [volguard::model::fence::BackendKind::Networkfence],
        "the class's own backends"
    );
    let nf_name = volguard::fencing::backend::network_fence_name(&f);
    let nf = support::objects::network_fence_api(&c)
        .get(&nf_name)
        .await
        .expect("the incident's NetworkFence");
    assert_eq!(nf.data["spec"]["driver"], "e2e.csi.volguard.io");
    assert!(
        nf.data["spec"]["cidrs"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "the node's addresses: {}",
        nf.data["spec"]
    );
    running_on(&s.cp, ns, "db-0", Some("kwok-1")).await;
    // The node returns: the NetworkFence is deleted (unfenced), then the taint goes.
    s.cp.restart_kwok(node);
    let done = incident_in(&s.cp, node, Phase::Done, LONG).await;
    assert!(!tainted(&c, node).await);
    assert!(
        support::objects::network_fence_api(&c)
            .get_opt(&nf_name)
            .await
            .expect("read")
            .is_none(),
        "unfencing deletes the NetworkFence"
    );
    storage.abort();
    check.finish();
    println!(
        "partition-networkfence: NetworkFence {nf_name} for {} Succeeded, released; the node returned: deleted, untainted",
        nf.data["spec"]["cidrs"]
    );
    print_record(&done);
    forget_node(&mut s.cp, node).await;
}
