//! Nodes played by kwok: one process per node, or one for a fleet.

use super::*;

impl ControlPlane {
    /// A Node played by its own kwok, authenticated as the node's kubelet: kwok reports it Ready,
    /// renews its lease, runs its pods through kwok's stages (pending, running, completed for
    /// Job pods) and removes them once they are deleted, as a kubelet does. Returns once the
    /// node is Ready and untainted (the node-lifecycle controller lifts the not-ready taint).
    pub async fn kwok_node(&mut self, name: &str) {
        // Each node its own address (a network fence names the node's addresses).
        static NEXT_IP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let n = NEXT_IP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ip = format!("10.250.{}.{}", n / 250, n % 250 + 1);
        self.kwok_node_at(name, &ip).await;
    }

    /// As `kwok_node`, with the node's InternalIP (kwok gives a hostNetwork pod its node's IP).
    pub async fn kwok_node_at(&mut self, name: &str, ip: &str) {
        use k8s_openapi::api::core::v1::Node;
        self.kwok_stages("kwok-stages.yaml", "");
        let node = kwok_node_object(name, ip, &[]);
        let admin = self.admin().await;
        if self.kwoks.is_empty() {
            kwok_startup_grant(&admin).await;
        }
        let nodes = Api::<Node>::all(admin);
        nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        self.kubeconfig_file(
            &format!("kwok-{name}"),
            &format!("system:node:{name}"),
            &["system:nodes"],
        );
        let p = self.spawn_kwok(name);
        self.kwoks.push((name.to_string(), p));
        self.eventually(
            &format!("node {name} Ready and untainted"),
            Duration::from_secs(60),
            || {
                let nodes = nodes.clone();
                async move {
                    let n = nodes.get(name).await.ok()?;
                    let ready = n
                        .status?
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True");
                    let tainted = n.spec.and_then(|s| s.taints).is_some_and(|t| !t.is_empty());
                    (ready && !tainted).then_some(())
                }
            },
        )
        .await;
    }

    /// kwok's configuration `file` in the cluster's directory: the stages `make e2e` copied from
    /// kwok's module, then `extra` documents. Written once.
    pub(super) fn kwok_stages(&self, file: &str, extra: &str) -> PathBuf {
        let config = self.dir.path().join(file);
        if !config.exists() {
            let stages = made("VOLGUARD_KWOK_DIR").join("stages");
            let mut files: Vec<_> = std::fs::read_dir(&stages)
                .unwrap_or_else(|e| panic!("{}: {e}", stages.display()))
                .filter_map(Result::ok)
                .map(|e| e.path())
                .collect();
            files.sort();
            let mut docs: Vec<String> = files
                .iter()
                .map(|f| std::fs::read_to_string(f).expect("stage"))
                .collect();
            assert!(!docs.is_empty(), "no kwok stages in {}", stages.display());
            if !extra.is_empty() {
                docs.push(extra.to_string());
            }
            std::fs::write(&config, docs.join("\n---\n")).expect("write stages");
        }
        config
    }

    /// One kwok that plays every node labelled `volguard.io/kwok-fleet=true` (`fleet_nodes`), as
    /// kwok runs thousands of nodes on one machine: it reports them Ready, renews their Leases
    /// (40 s, the kubelet's default) and runs their pods through the same stages as `kwok_node`.
    /// One process cannot hold each node's kubelet identity, so it acts as the user `FLEET_USER`
    /// (cluster admin): a webhook in front of it must allow-list that user for the final force
    /// deletes a kubelet makes (`force_delete_allow_users`, set before volguard starts).
    pub fn spawn_kwok_fleet(&mut self) {
        let d = self.dir.path().to_path_buf();
        let kc = self.kubeconfig_file("kwok-fleet", FLEET_USER, &["system:masters"]);
        let config = self.kwok_stages(
            "kwok-fleet.yaml",
            "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n  \
             podPlayStageParallelism: 16\n  nodePlayStageParallelism: 8\n  nodeLeaseParallelism: 16\n",
        );
        // Ahead of the control plane for the CPU (nice -10; where it may not raise its priority,
        // `nice` says so and runs it as is): thousands of kubelets each have a machine of their
        // own, and when this one process fell behind the apiserver closed its pod watch, it listed
        // every pod again and played their stages twice, and that, not the setup under test, set a
        // churn window's time (`make bench-scale`, docs/performance.md).
        let p = Proc::spawn(
            "kwok-fleet",
            Command::new("nice")
                .args(["-n", "-10"])
                .arg(made("VOLGUARD_KWOK_DIR").join("kwok"))
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg(format!("--config={}", config.display()))
                .arg("--manage-nodes-with-label-selector=volguard.io/kwok-fleet=true")
                // Warnings and errors only: at INFO it logged every lease renewal and pod status
                // patch (228 MB in one run of 5,000 nodes), CPU its pod watch then lacked to keep
                // up (`make bench-scale`, docs/performance.md).
                .arg("--v=WARN")
                .arg(format!(
                    "--node-lease-duration-seconds={FLEET_LEASE_SECONDS}"
                ))
                .arg("--cidr=10.128.0.0/9"),
            &d,
        );
        self.kwoks.push(("fleet".to_string(), p));
    }

    /// Create the nodes `names` for the kwok fleet (16 at a time) and wait until all are Ready
    /// and untainted.
    pub async fn fleet_nodes(&self, names: &[String]) {
        use futures::StreamExt;
        use k8s_openapi::api::core::v1::Node;
        let nodes = Api::<Node>::all(self.admin().await);
        let created: Vec<_> = futures::stream::iter(names.iter().enumerate())
            .map(|(i, name)| {
                let nodes = nodes.clone();
                // 10.0.0.0/9 holds 8 Mi addresses: one per node, never the pods' range.
                let ip = format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256);
                async move {
                    let node = kwok_node_object(name, &ip, &[("volguard.io/kwok-fleet", "true")]);
                    nodes.create(&PostParams::default(), &node).await
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        for r in created {
            r.expect("create fleet node");
        }
        let want: std::collections::BTreeSet<&str> = names.iter().map(String::as_str).collect();
        self.eventually(
            &format!("{} fleet nodes Ready and untainted", names.len()),
            Duration::from_secs(600),
            || {
                let nodes = nodes.clone();
                let want = want.clone();
                async move {
                    let list = nodes
                        .list(&ListParams::default().labels("volguard.io/kwok-fleet=true"))
                        .await
                        .ok()?;
                    let ready = list
                        .items
                        .iter()
                        .filter(|n| want.contains(n.metadata.name.as_deref().unwrap_or_default()))
                        .filter(|n| {
                            let ready = n
                                .status
                                .as_ref()
                                .and_then(|s| s.conditions.as_ref())
                                .is_some_and(|c| {
                                    c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                                });
                            let tainted = n
                                .spec
                                .as_ref()
                                .and_then(|s| s.taints.as_ref())
                                .is_some_and(|t| !t.is_empty());
                            ready && !tainted
                        })
                        .count();
                    (ready == want.len()).then_some(())
                }
            },
        )
        .await;
    }

    /// Cordon (`true`) or uncordon a node, as `kubectl cordon` / `uncordon` do.
    pub async fn cordon(&self, node: &str, on: bool) -> Result<(), kube::Error> {
        use k8s_openapi::api::core::v1::Node;
        use kube::api::{Patch, PatchParams};
        let v = if on {
            serde_json::json!(true)
        } else {
            serde_json::json!(null)
        };
        Api::<Node>::all(self.admin().await)
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"unschedulable": v}})),
            )
            .await
            .map(|_| ())
    }

    /// Start a stopped node's kwok again (the node object is still there): the node returns.
    pub fn restart_kwok(&mut self, name: &str) {
        let p = self.spawn_kwok(name);
        self.kwoks.push((name.to_string(), p));
    }

    /// The kwok process that plays node `name`'s kubelet (its kubeconfig and stages written by
    /// `kwok_node`).
    pub(super) fn spawn_kwok(&self, name: &str) -> Proc {
        let d = self.dir.path().to_path_buf();
        let kc = d.join(format!("kwok-{name}.kubeconfig"));
        assert!(
            kc.exists(),
            "no kubeconfig for kwok {name}: start it with kwok_node first"
        );
        Proc::spawn(
            &format!("kwok-{name}"),
            Command::new(made("VOLGUARD_KWOK_DIR").join("kwok"))
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg(format!("--config={}", d.join("kwok-stages.yaml").display()))
                .arg(format!("--manage-single-node={name}"))
                .arg("--node-lease-duration-seconds=8")
                .arg("--cidr=10.244.0.0/16"),
            &d,
        )
    }

    /// Stop a node's kwok: the node's "kubelet" is gone, its lease expires.
    pub fn stop_kwok(&mut self, name: &str) {
        if let Some(i) = self.kwoks.iter().position(|(n, _)| n == name) {
            let (_, mut p) = self.kwoks.remove(i);
            p.kill();
        }
    }
}

/// A Node as kwok's node-initialize stage expects it: 8 CPUs, 32 Gi, 110 pods, its address.
pub(super) fn kwok_node_object(
    name: &str,
    ip: &str,
    labels: &[(&str, &str)],
) -> k8s_openapi::api::core::v1::Node {
    let mut l = serde_json::json!({"kubernetes.io/hostname": name, "type": "kwok"});
    for (k, v) in labels {
        l[*k] = serde_json::json!(v);
    }
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": l},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   // Both kinds, or kwok's node-initialize stage replaces the list.
                   "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]}
    }))
    .expect("node")
}

/// What kwok needs beyond a kubelet's rights, and nothing that writes: its start-up probe lists
/// nodes without a field selector (the Node authorizer lets a kubelet list only its own Node),
/// and it watches its node's Lease through an informer where a kubelet only gets it. Every write
/// (node status, lease renewals, pod status, final pod deletes) stays within the kubelet's own.
pub(super) async fn kwok_startup_grant(admin: &kube::Client) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "e2e:kwok-startup"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
                  {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list", "watch"]}]
    }))
    .expect("role");
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "e2e:kwok-startup"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e:kwok-startup"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]
    }))
    .expect("binding");
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("kwok role");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("kwok binding");
}
