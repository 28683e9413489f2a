//! Synthetic objects of realistic size (labels, annotations, managedFields, status) for the
//! benchmarks. Deterministic: object i always looks the same.

use serde_json::{Value, json};

pub const NAMESPACES: usize = 100;

fn managed_fields() -> Value {
    json!([{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
            "time": "2026-11-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {"f:pv.kubernetes.io/bind-completed": {}}},
                         "f:spec": {"f:volumeName": {}}, "f:status": {"f:accessModes": {}, "f:capacity": {".": {}, "f:storage": {}}, "f:phase": {}}}}])
}

pub fn ns(i: usize) -> String {
    format!("ns-{}", i % NAMESPACES)
}

pub fn pvc(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": format!("data-{i}"), "namespace": ns(i), "uid": format!("00000000-0000-4000-8000-{i:012}"),
            "resourceVersion": format!("{}", 1000 + i), "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {"app.kubernetes.io/name": "db", "app.kubernetes.io/instance": format!("db-{}", i % 50)},
            "annotations": {"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
                "volume.kubernetes.io/storage-provisioner": "csi.example.com"},
            "finalizers": ["kubernetes.io/pvc-protection"], "managedFields": managed_fields()},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": "fast", "volumeMode": "Filesystem", "volumeName": format!("pv-{i}")},
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}}})
}

pub fn pv(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": format!("pv-{i}"), "uid": format!("10000000-0000-4000-8000-{i:012}"),
            "annotations": {"pv.kubernetes.io/provisioned-by": "csi.example.com"},
            "finalizers": ["kubernetes.io/pv-protection", "external-provisioner.volume.kubernetes.io/finalizer"],
            "managedFields": managed_fields()},
        "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": format!("data-{i}"), "namespace": ns(i)},
            "csi": {"driver": "csi.example.com", "volumeHandle": format!("vol-{i:08x}"), "fsType": "ext4"},
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "fast", "volumeMode": "Filesystem"},
        "status": {"phase": "Bound"}})
}

pub fn node(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("node-{i}"), "uid": format!("20000000-0000-4000-8000-{i:012}"),
            "labels": {"kubernetes.io/hostname": format!("node-{i}"), "topology.kubernetes.io/zone": format!("zone-{}", i % 3)}},
        "spec": {"podCIDR": "10.0.0.0/24", "taints": [{"key": "example.com/dedicated", "value": "db", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "16", "memory": "64Gi"}, "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// A running pod on a node that mounts `claims` plus the usual projected token and configMap.
pub fn pod(name: &str, namespace: &str, node: &str, claims: &[String]) -> Value {
    let mut vols: Vec<Value> = claims
        .iter()
        .enumerate()
        .map(|(k, c)| json!({"name": format!("data-{k}"), "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    vols.push(json!({"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}));
    vols.push(json!({"name": "config", "configMap": {"name": "app-config"}}));
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
            "labels": {"app.kubernetes.io/name": "db", "controller-revision-hash": "db-7d9f8b6c5", "statefulset.kubernetes.io/pod-name": name},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-01T00:00:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "uid-sts", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": managed_fields()},
        "spec": {"nodeName": node, "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "db", "image": "registry.example/db:16", "ports": [{"containerPort": 5432}],
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                "volumeMounts": vols.iter().map(|v| json!({"name": v["name"], "mountPath": format!("/mnt/{}", v["name"].as_str().unwrap_or_default())})).collect::<Vec<_>>()}],
            "volumes": vols},
        "status": {"phase": "Running", "podIP": "10.0.1.2", "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "db", "ready": true, "restartCount": 0, "image": "registry.example/db:16"}]}})
}

pub fn state(pvcs: usize, pvs: usize, nodes: usize) -> Value {
    let mut items = Vec::with_capacity(pvcs + pvs + nodes + 2);
    items.extend((0..pvcs).map(pvc));
    items.extend((0..pvs).map(pv));
    items.extend((0..nodes).map(node));
    // The binding review's pods: web-0 holds RWO claim data-1 on node-7; web-1 waits for a node.
    let claim = ["data-1".to_string()];
    items.push(pod("web-0", &ns(1), "node-7", &claim));
    let mut waiting = pod("web-1", &ns(1), "", &claim);
    waiting["spec"]
        .as_object_mut()
        .map(|m| m.remove("nodeName"));
    waiting["status"] = json!({"phase": "Pending"});
    items.push(waiting);
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

#[allow(clippy::too_many_arguments)] // one argument per AdmissionRequest field
fn review(
    uid: &str,
    kind: &str,
    resource: &str,
    op: &str,
    ns: &str,
    name: &str,
    object: Value,
    old: Value,
    options: Value,
    user: Value,
) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": kind}, "resource": {"group": "", "version": "v1", "resource": resource},
        "requestKind": {"group": "", "version": "v1", "kind": kind}, "requestResource": {"group": "", "version": "v1", "resource": resource},
        "name": name, "namespace": ns, "operation": op, "userInfo": user, "object": object, "oldObject": old, "dryRun": false, "options": options}})
}

/// The three reviews the admission benchmark drives: (name, path, body).
pub fn reviews() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let admin = json!({"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]});
    let sts = json!({"username": "system:serviceaccount:kube-system:statefulset-controller", "groups": ["system:serviceaccounts", "system:authenticated"]});
    let mut new_pvc = pvc(1_000_001);
    new_pvc["metadata"]
        .as_object_mut()
        .map(|m| m.remove("finalizers"));
    new_pvc["spec"]
        .as_object_mut()
        .map(|m| m.remove("volumeName"));
    new_pvc["status"] = json!({"phase": "Pending"});
    let pvc_create = review(
        "b0000000-0000-4000-8000-000000000001",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        "CREATE",
        "ns-1",
        "data-1000001",
        new_pvc,
        Value::Null,
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}),
        sts.clone(),
    );
    let claims: Vec<String> = [1, 101, 201].iter().map(|i| format!("data-{i}")).collect();
    let new_pod = pod("db-1", "ns-1", "node-7", &claims);
    let pod_create = review(
        "b0000000-0000-4000-8000-000000000002",
        "Pod",
        "pods",
        "CREATE",
        "ns-1",
        "db-1",
        new_pod.clone(),
        Value::Null,
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}),
        sts,
    );
    let pod_delete = review(
        "b0000000-0000-4000-8000-000000000003",
        "Pod",
        "pods",
        "DELETE",
        "ns-1",
        "db-1",
        Value::Null,
        new_pod,
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "propagationPolicy": "Background"}),
        admin,
    );
    // The scheduler binding web-1 to the node of the RWO claim's holder (allowed after the
    // whole check: pod, claim, holders).
    let binding = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "b0000000-0000-4000-8000-000000000004", "kind": {"group": "", "version": "v1", "kind": "Binding"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "binding",
        "requestKind": {"group": "", "version": "v1", "kind": "Binding"}, "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "requestSubResource": "binding", "name": "web-1", "namespace": ns(1), "operation": "CREATE",
        "userInfo": {"username": "system:kube-scheduler", "groups": ["system:authenticated"]},
        "object": {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web-1", "namespace": ns(1), "uid": "uid-web-1"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "node-7"}},
        "oldObject": null, "dryRun": false, "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}});
    // Each on the path its webhook entry posts to (manifests/base/webhooks.yaml), as the
    // apiserver calls them.
    [
        ("pvc_create_mutate", "/mutate/pvc-finalizer", pvc_create),
        (
            "pod_create_3_claims",
            "/validate/pod-on-terminating-claim",
            pod_create,
        ),
        (
            "pod_delete_force_deny",
            "/validate/force-delete",
            pod_delete,
        ),
        ("pod_binding_rwo", "/validate/rwo-single-node", binding),
    ]
    .into_iter()
    .map(|(n, p, v)| (n, p, serde_json::to_vec(&v).unwrap_or_default()))
    .collect()
}
