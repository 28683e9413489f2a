//! rules.md §8 "Doors": the paths that can persist a guarded field are read from the live
//! apiserver's discovery, not listed by us. For every guarded field (each override of
//! `volguard::rules::proof::OVERRIDES` and its stamp, the RWO lock, a lifted deletion-protection
//! mark, the out-of-service taint, the protection finalizers of a volume in use, a running pod's
//! phase and container states, an ephemeral claim's pod owner, a NodeFence's release record and
//! status) and every resource and subresource of its kind that accepts a
//! patch or an update (and CREATE), the scenario writes the field as a service account and as a
//! namespace editor: first with volguard's registrations and policies removed (which paths persist
//! it?), then with them (is each such path judged?). It fails on any path that persists a field
//! unjudged, prints the matrix and writes `target/e2e/door-matrix.json`.

use super::*;
use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

/// The kinds whose metadata a guard trusts, by their discovery group/version and plural.
const KINDS: &[(&str, &str, &str, &str)] = &[
    ("", "v1", "Pod", "pods"),
    ("", "v1", "Node", "nodes"),
    ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    ("", "v1", "PersistentVolume", "persistentvolumes"),
    ("", "v1", "Namespace", "namespaces"),
    ("volguard.io", "v1alpha1", "NodeFence", "nodefences"),
];

/// The other kinds whose paths the issue names: create-only (a binding, an eviction) or storing no
/// guarded field (a VolumeAttachment). Discovered and printed, so a new write verb on one shows.
/// The two binding paths are tried like every door (`BINDING_PATHS`): the apiserver copies a
/// Binding's annotations onto the pod, so "create-only" is not "holds no guarded field".
const OTHER_PATHS: &[&str] = &[
    "bindings",
    "pods/binding",
    "pods/eviction",
    "volumeattachments",
    "volumeattachments/status",
];

/// The create-only paths that write a pod's metadata: a Binding's annotations are merged into
/// the pod it binds (`setPodNodeAndMetadata`). Each is tried with the field in the Binding's
/// metadata, and "persists" is read from the pod afterwards.
const BINDING_PATHS: [&str; 2] = ["pods/binding", "bindings"];

/// One path: the kind's plural and the subresource (`None`: the object itself).
#[derive(Debug, Clone)]
struct Door {
    kind: &'static str,
    plural: &'static str,
    group: &'static str,
    version: &'static str,
    sub: Option<String>,
    /// Served with `patch` (else only `update`: a read, then a replace).
    patch: bool,
}

impl Door {
    /// The object itself of the kind whose plural is `plural`.
    fn of(plural: &str) -> Door {
        let (group, version, kind, plural) = KINDS.iter().find(|k| k.3 == plural).expect("kind");
        Door {
            kind,
            plural,
            group,
            version,
            sub: None,
            patch: true,
        }
    }

    fn path(&self) -> String {
        match &self.sub {
            Some(s) => format!("{}/{s}", self.plural),
            None => self.plural.to_string(),
        }
    }
    fn api(&self, c: &kube::Client, ns: &str) -> Api<DynamicObject> {
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        );
        match self.kind {
            "Pod" | "PersistentVolumeClaim" => Api::namespaced_with(c.clone(), ns, &ar),
            _ => Api::all_with(c.clone(), &ar),
        }
    }
}

/// Every resource and subresource of the guarded kinds the apiserver serves with `patch` or
/// `update`, and the verbs of the other paths (`OTHER_PATHS`).
async fn discover(c: &kube::Client) -> (Vec<Door>, Vec<String>) {
    let mut lists = Vec::new();
    for gv in ["v1", "volguard.io/v1alpha1", "storage.k8s.io/v1"] {
        let list = match gv {
            "v1" => c.list_core_api_resources(gv).await,
            _ => c.list_api_group_resources(gv).await,
        };
        lists.push(list.unwrap_or_else(|e| panic!("discovery of {gv}: {e}")));
    }
    let mut out = Vec::new();
    let mut other = Vec::new();
    for r in lists.into_iter().flat_map(|l| l.resources) {
        if OTHER_PATHS.contains(&r.name.as_str()) {
            other.push(format!("{} [{}]", r.name, r.verbs.join(",")));
            continue;
        }
        let (base, sub) = match r.name.split_once('/') {
            Some((b, s)) => (b.to_string(), Some(s.to_string())),
            None => (r.name.clone(), None),
        };
        let Some((group, version, kind, plural)) = KINDS.iter().find(|k| k.3 == base) else {
            continue;
        };
        let patch = r.verbs.iter().any(|v| v == "patch");
        if patch || r.verbs.iter().any(|v| v == "update") {
            out.push(Door {
                kind,
                plural,
                group,
                version,
                sub,
                patch,
            });
        }
    }
    (out, other)
}

/// The object each kind's doors write to (created by the admin).
fn target_name(kind: &str, ns: &str) -> String {
    match kind {
        "Namespace" => format!("{ns}-target"),
        _ => format!("door-{}", kind.to_lowercase()),
    }
}

/// A pod on `door-node` (a Node with no kubelet, so nobody but the doors writes the pod's status)
/// that uses `door-inuse-claim` (bound to `door-inuse-volume`) and an ephemeral claim: what the
/// finalizer, phase, container-state and owner fields need (a volume in use, a running pod).
const RUNNING_CONTAINER: &str = r#"{"name": "c", "image": "busybox", "imageID": "", "ready": true,
    "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}"#;
const POD: &str = "door-pod";
const IN_USE_CLAIM: &str = "door-inuse-claim";
const IN_USE_VOLUME: &str = "door-inuse-volume";
const EPHEMERAL_CLAIM: &str = "door-pod-data";

fn pv(name: &str, ns: &str, claim: Option<&str>) -> Value {
    let mut v = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": "door-none", "hostPath": {"path": "/tmp/door"}}});
    if let Some(claim) = claim {
        v["spec"]["claimRef"] = json!({"namespace": ns, "name": claim});
    }
    v
}

fn pvc(name: &str, ns: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": ns},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "door-none",
            "resources": {"requests": {"storage": "1Gi"}}}})
}

/// The targets; returns the running pod's controller ownerReference (the ephemeral claim's owner).
async fn create_targets(c: &kube::Client, ns: &str) -> Value {
    let objects = [
        (
            "pvs",
            pv("door-persistentvolume", ns, Some("door-no-such-claim")),
        ),
        ("pvs", pv(IN_USE_VOLUME, ns, Some(IN_USE_CLAIM))),
        (
            "pvs",
            pv("door-ephemeral-volume", ns, Some(EPHEMERAL_CLAIM)),
        ),
        (
            "persistentvolumeclaims",
            pvc("door-persistentvolumeclaim", ns),
        ),
        ("persistentvolumeclaims", pvc(IN_USE_CLAIM, ns)),
        (
            "nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "door-node",
                "labels": {"door": "target"}}}),
        ),
        (
            "namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("{ns}-target")}}),
        ),
        (
            "nodefences",
            json!({"apiVersion": "volguard.io/v1alpha1", "kind": "NodeFence",
                "metadata": {"name": "door-nodefence"}, "spec": {"node": "door-ghost"}}),
        ),
        (
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD, "namespace": ns},
                "spec": {"schedulerName": "none", "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "c", "image": "busybox"}],
                    "volumes": [
                        {"name": "inuse", "persistentVolumeClaim": {"claimName": IN_USE_CLAIM}},
                        {"name": "data", "ephemeral": {"volumeClaimTemplate": {"spec": {
                            "accessModes": ["ReadWriteOnce"], "storageClassName": "door-none",
                            "resources": {"requests": {"storage": "1Gi"}}}}}}]}}),
        ),
    ];
    for (plural, o) in objects {
        let plural = if plural == "pvs" {
            "persistentvolumes"
        } else {
            plural
        };
        let obj: DynamicObject = serde_json::from_value(o).expect("object");
        Door::of(plural)
            .api(c, ns)
            .create(&PostParams::default(), &obj)
            .await
            .expect("create a door's target");
    }
    // The ephemeral-volume controller makes the pod's claim; the binder binds both claims to
    // their pre-bound volumes; then the pod is placed on door-node (a binding, as the scheduler).
    let claims = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    harness::eventually("the door claims bound", Duration::from_secs(60), || async {
        let mut bound = 0;
        for name in [IN_USE_CLAIM, EPHEMERAL_CLAIM] {
            if let Ok(p) = claims.get(name).await
                && p.status.and_then(|s| s.phase).as_deref() == Some("Bound")
            {
                bound += 1;
            }
        }
        (bound == 2).then_some(())
    })
    .await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": POD},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "door-node"}});
    pods.create_subresource::<_, Value>("binding", POD, &PostParams::default(), &binding)
        .await
        .expect("bind door-pod to door-node");
    let pod = pods.get(POD).await.expect("door-pod");
    json!({"apiVersion": "v1", "kind": "Pod", "name": POD, "uid": pod.metadata.uid,
        "controller": true, "blockOwnerDeletion": true})
}

/// One guarded field: where it lives, the write that sets it, what the admin does before each
/// try (`seed`) and after it (`undo`), and whether a try persisted it.
struct Field {
    name: String,
    plurals: &'static [&'static str],
    /// The object written, when not the kind's default target (`target_name`).
    target: Option<&'static str>,
    /// The subresource the admin's `seed` and `undo` go through (`status` for what only it stores).
    admin_sub: Option<&'static str>,
    /// Only these actors are judged (a person may lift a deletion-protection mark: that lift is
    /// recorded, not refused).
    actors: &'static [&'static str],
    write: Value,
    seed: Option<Value>,
    undo: Value,
    persisted: fn(&DynamicObject, &str) -> bool,
    /// A CEL policy holds it too (rules.md §9): it stays judged while volguard is down.
    policy: bool,
}

fn annotation_set(o: &DynamicObject, key: &str) -> bool {
    o.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}

fn annotation_gone(o: &DynamicObject, key: &str) -> bool {
    !annotation_set(o, key)
}

fn tainted(o: &DynamicObject, key: &str) -> bool {
    o.data["spec"]["taints"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["key"] == key))
}

const BOTH: &[&str] = &["service-account", "namespace-editor"];
const METADATA_KINDS: &[&str] = &[
    "pods",
    "nodes",
    "persistentvolumeclaims",
    "persistentvolumes",
    "namespaces",
];
const METADATA_AND_FENCES: &[&str] = &[
    "pods",
    "nodes",
    "persistentvolumeclaims",
    "persistentvolumes",
    "namespaces",
    "nodefences",
];

fn finalizer_gone(o: &DynamicObject, finalizer: &str) -> bool {
    !o.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == finalizer))
}

fn phase_failed(o: &DynamicObject, _: &str) -> bool {
    o.data["status"]["phase"] == "Failed"
}

fn containers_terminated(o: &DynamicObject, _: &str) -> bool {
    o.data["status"]["containerStatuses"]
        .as_array()
        .is_some_and(|c| c.iter().all(|c| c["state"]["terminated"].is_object()))
}

fn pod_owner_gone(o: &DynamicObject, _: &str) -> bool {
    !o.metadata
        .owner_references
        .as_ref()
        .is_some_and(|r| r.iter().any(|r| r.kind == "Pod" && r.name == POD))
}

fn release_written(o: &DynamicObject, _: &str) -> bool {
    o.data["spec"]["release"].is_object()
}

fn status_forged(o: &DynamicObject, _: &str) -> bool {
    o.data["status"]["releasedVolumes"]
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v == "forged"))
}

/// A field with the defaults: the kind's own target, seed and undo through the object.
fn field(
    name: impl Into<String>,
    plurals: &'static [&'static str],
    write: Value,
    undo: Value,
    persisted: fn(&DynamicObject, &str) -> bool,
    policy: bool,
) -> Field {
    Field {
        name: name.into(),
        plurals,
        target: None,
        admin_sub: None,
        actors: BOTH,
        write,
        seed: None,
        undo,
        persisted,
        policy,
    }
}

/// The table: every override and its stamp from volguard's own list, and the other guarded
/// fields a person or a script could write through a door. `owner`: the running pod's controller
/// ownerReference, which the owner field's undo puts back.
fn fields(owner: &Value) -> Vec<Field> {
    use volguard::rules::proof::{CONFIRMED_AT, CONFIRMED_BY};
    let mut out: Vec<Field> = volguard::rules::proof::OVERRIDES
        .iter()
        .map(|o| o.key)
        .chain([CONFIRMED_BY, CONFIRMED_AT])
        .map(|key| {
            // The attacker names a person as the setter: a stamp it wrote proves nothing. The
            // stamp's time, written alone, would move an override's expiry.
            let mut a = match key {
                CONFIRMED_AT => json!({CONFIRMED_AT: "2999-01-01T00:00:00Z"}),
                _ => json!({CONFIRMED_BY: "alice"}),
            };
            if key != CONFIRMED_BY && key != CONFIRMED_AT {
                a[key] = json!("true");
            }
            // Only the stamp means something on a NodeFence (`fence confirm` writes it).
            let plurals = if key == CONFIRMED_BY {
                METADATA_AND_FENCES
            } else {
                METADATA_KINDS
            };
            field(
                key,
                plurals,
                json!({"metadata": {"annotations": a}}),
                json!({"metadata": {"annotations": {key: null, CONFIRMED_BY: null, CONFIRMED_AT: null}}}),
                annotation_set,
                true,
            )
        })
        .collect();
    let lock = volguard::rules::rwo_lock::RWO_LOCK;
    out.push(field(
        lock,
        &["persistentvolumeclaims"],
        json!({"metadata": {"annotations": {lock:
            "{\"node\":\"door-node\",\"pod\":\"x\",\"at\":\"2026-01-01T00:00:00Z\"}"}}}),
        json!({"metadata": {"annotations": {lock: null}}}),
        annotation_set,
        true,
    ));
    let mark = volguard::model::DELETE_PROTECTION;
    out.push(Field {
        actors: &["service-account"],
        seed: Some(json!({"metadata": {"annotations": {mark: "true"}}})),
        ..field(
            format!("{mark} (lifted)"),
            &["persistentvolumeclaims", "persistentvolumes", "namespaces"],
            json!({"metadata": {"annotations": {mark: null}}}),
            json!({"metadata": {"annotations": {mark: null}}}),
            annotation_gone,
            true,
        )
    });
    let taint = volguard::model::OUT_OF_SERVICE_TAINT;
    out.push(field(
        taint,
        &["nodes"],
        json!({"spec": {"taints": [{"key": taint, "value": "nodeshutdown", "effect": "NoExecute"}]}}),
        json!({"spec": {"taints": null}}),
        tainted,
        // Ignore by design: a person must be able to heal a partition while volguard is down.
        false,
    ));
    // The protection finalizers of a claim and a volume a scheduled pod uses (the webhook reads
    // the pods: no policy can).
    for (finalizer, plural, target) in [
        (
            volguard::model::PVC_FINALIZER,
            "persistentvolumeclaims",
            IN_USE_CLAIM,
        ),
        (
            volguard::model::PV_FINALIZER,
            "persistentvolumes",
            IN_USE_VOLUME,
        ),
    ] {
        let keep = json!({"metadata": {"finalizers": [finalizer]}});
        out.push(Field {
            target: Some(target),
            seed: Some(keep.clone()),
            ..field(
                format!("{finalizer} (dropped, in use)"),
                if plural == "persistentvolumes" {
                    &["persistentvolumes"]
                } else {
                    &["persistentvolumeclaims"]
                },
                json!({"metadata": {"finalizers": null}}),
                keep,
                finalizer_gone,
                false,
            )
        });
    }
    // A running pod's end, written by someone other than its kubelet.
    let running: Value = serde_json::from_str(RUNNING_CONTAINER).expect("container status");
    let seed = json!({"status": {"phase": "Running", "containerStatuses": [running.clone()]}});
    let mut ended = running;
    ended["state"] = json!({"terminated": {"exitCode": 0,
        "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z"}});
    ended["ready"] = json!(false);
    for (name, write, persisted) in [
        (
            "status.phase (Failed)",
            json!({"status": {"phase": "Failed"}}),
            phase_failed as fn(&DynamicObject, &str) -> bool,
        ),
        (
            "status.containerStatuses (terminated)",
            json!({"status": {"containerStatuses": [ended.clone()]}}),
            containers_terminated,
        ),
    ] {
        out.push(Field {
            target: Some(POD),
            admin_sub: Some("status"),
            seed: Some(seed.clone()),
            ..field(name, &["pods"], write, seed.clone(), persisted, true)
        });
    }
    // The pod owner of its ephemeral claim (upstream's pvc-protection releases by it).
    out.push(Field {
        target: Some(EPHEMERAL_CLAIM),
        seed: Some(json!({"metadata": {"ownerReferences": [owner]}})),
        ..field(
            "metadata.ownerReferences (pod owner)",
            &["persistentvolumeclaims"],
            json!({"metadata": {"ownerReferences": null}}),
            json!({"metadata": {"ownerReferences": [owner]}}),
            pod_owner_gone,
            false,
        )
    });
    // A NodeFence's record and status: volguard's alone.
    out.push(field(
        "NodeFence spec.release",
        &["nodefences"],
        json!({"spec": {"release": {"action": "NodeDelete", "by": "alice", "proof": "forged"}}}),
        json!({"spec": {"release": null}}),
        release_written,
        true,
    ));
    out.push(Field {
        admin_sub: Some("status"),
        ..field(
            "NodeFence status",
            &["nodefences"],
            json!({"status": {"phase": "Released", "releasedVolumes": ["forged"]}}),
            json!({"status": null}),
            status_forged,
            true,
        )
    });
    out
}

impl Field {
    /// The key `persisted` looks for.
    fn key(&self) -> &str {
        self.name.split(' ').next().unwrap_or_default()
    }
}

/// RFC 7386 merge of `patch` into `target` (a CREATE's body carrying the field).
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// What one write did: persisted (the object the apiserver answered with, as it stored it: a
/// later read could race the controllers that repair the field), refused (and by whom), or
/// failed otherwise (the path does not take this write: not a door).
#[derive(Debug, Clone)]
struct Outcome {
    persisted: bool,
    refused_by: Option<String>,
    error: Option<String>,
}

/// A write's outcome: refused by admission (403 that is not RBAC's), or anything else.
fn outcome(field: &Field, result: Result<DynamicObject, kube::Error>) -> Outcome {
    let persisted = false;
    match result {
        Ok(o) => Outcome {
            persisted: (field.persisted)(&o, field.key()),
            refused_by: None,
            error: None,
        },
        Err(kube::Error::Api(e)) if e.code == 403 && !e.message.contains("cannot ") => {
            let by = if e.message.contains("ValidatingAdmissionPolicy") {
                "policy"
            } else if e.message.contains("admission webhook") {
                "webhook"
            } else {
                "apiserver"
            };
            Outcome {
                persisted,
                refused_by: Some(format!("{by}: {}", e.message)),
                error: None,
            }
        }
        Err(e) => Outcome {
            persisted,
            refused_by: None,
            error: Some(e.to_string()),
        },
    }
}

/// The admin's write before and after a try (errors ignored: a layer may refuse an undo that
/// has nothing to undo).
async fn admin_patch(api: &Api<DynamicObject>, name: &str, sub: Option<&str>, patch: &Value) {
    let pp = PatchParams::default();
    let _ = match sub {
        Some(sub) => api
            .patch_subresource(sub, name, &pp, &Patch::Merge(patch))
            .await
            .map(|_| ()),
        None => api.patch(name, &pp, &Patch::Merge(patch)).await.map(|_| ()),
    };
}

async fn try_patch(
    door: &Door,
    field: &Field,
    actor: &kube::Client,
    admin: &kube::Client,
    ns: &str,
) -> Outcome {
    let name = field
        .target
        .map(str::to_string)
        .unwrap_or_else(|| target_name(door.kind, ns));
    let api = door.api(actor, ns);
    let admin_api = door.api(admin, ns);
    if let Some(seed) = &field.seed {
        admin_patch(&admin_api, &name, field.admin_sub, seed).await;
    }
    let result = match (&door.sub, door.patch) {
        (None, _) => {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&field.write))
                .await
        }
        (Some(sub), true) => {
            api.patch_subresource(
                sub,
                &name,
                &PatchParams::default(),
                &Patch::Merge(&field.write),
            )
            .await
        }
        // `update` only (a namespace's finalize): the object read, the field merged, replaced.
        (Some(sub), false) => match admin_api.get(&name).await {
            Ok(o) => {
                let mut v = serde_json::to_value(&o).expect("object");
                merge(&mut v, &field.write);
                let o: DynamicObject = serde_json::from_value(v).expect("object");
                api.replace_subresource(sub, &name, &PostParams::default(), &o)
                    .await
            }
            Err(e) => Err(e),
        },
    };
    admin_patch(&admin_api, &name, field.admin_sub, &field.undo).await;
    outcome(field, result)
}

/// CREATE carrying the field, for the kinds an actor creates here: a pod and a claim in the
/// scenario's namespace, a Node, a NodeFence.
async fn try_create(
    plural: &'static str,
    field: &Field,
    actor: &kube::Client,
    admin: &kube::Client,
    ns: &str,
    n: usize,
) -> Outcome {
    let name = format!("door-new-{n}");
    let mut body = match plural {
        "pods" => pending_pod(&name, ns),
        "nodes" => json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
        "nodefences" => json!({"apiVersion": "volguard.io/v1alpha1", "kind": "NodeFence",
            "metadata": {"name": name}, "spec": {"node": "door-ghost"}}),
        _ => json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "door-none",
                "resources": {"requests": {"storage": "1Gi"}}}}),
    };
    merge(&mut body, &field.write);
    let door = Door::of(plural);
    let obj: DynamicObject = serde_json::from_value(body).expect("object");
    let result = door
        .api(actor, ns)
        .create(&PostParams::default(), &obj)
        .await;
    remove(&door, admin, ns, &name).await;
    outcome(field, result)
}

/// A pod no node may take (nothing runs it): what a CREATE or a bind is tried on.
fn pending_pod(name: &str, ns: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"nodeSelector": {"door": "nowhere"}, "containers": [{"name": "c", "image": "busybox"}]}})
}

/// The admin's cleanup of an object a try made (at once: no kubelet runs these pods).
async fn remove(door: &Door, admin: &kube::Client, ns: &str, name: &str) {
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let _ = door.api(admin, ns).delete(name, &now).await;
}

/// A Binding carrying `field`'s annotations, through `path`, of a fresh pending pod; the pod as
/// stored afterwards is what the field is read from (the bind answers with a Status, not the pod).
async fn try_bind(
    path: &str,
    field: &Field,
    actor: &kube::Client,
    admin: &kube::Client,
    ns: &str,
    n: usize,
) -> Outcome {
    let name = format!("door-bind-{n}");
    let pods = Door::of("pods");
    let pod: DynamicObject = serde_json::from_value(pending_pod(&name, ns)).expect("pod");
    // A pod that cannot be made would leave the door untried and read as "held".
    pods.api(admin, ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("the pod to bind through {path}: {e}"));
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": ns, "annotations": field.write["metadata"]["annotations"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "door-node"}});
    let url = match path {
        "pods/binding" => format!("/api/v1/namespaces/{ns}/pods/{name}/binding"),
        _ => format!("/api/v1/namespaces/{ns}/bindings"),
    };
    let req = http::Request::post(url)
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&binding).expect("binding"))
        .expect("request");
    let result = match actor.request::<Value>(req).await {
        Ok(_) => pods.api(admin, ns).get(&name).await,
        Err(e) => Err(e),
    };
    remove(&pods, admin, ns, &name).await;
    outcome(field, result)
}

/// RBAC for both actors: every discovered path, create/update/patch (what an editor may do).
async fn grant(c: &kube::Client, doors: &[Door]) {
    let mut by_group: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for d in doors {
        by_group.entry(d.group).or_default().push(d.path());
    }
    let mut rules: Vec<Value> = by_group
        .into_iter()
        .map(|(group, mut resources)| {
            resources.sort();
            resources.dedup();
            json!({"apiGroups": [group], "resources": resources,
                "verbs": ["get", "list", "create", "update", "patch"]})
        })
        .collect();
    // What a scheduler-like identity may do: bind.
    rules.push(json!({"apiGroups": [""], "resources": BINDING_PATHS, "verbs": ["create"]}));
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "door-writer"}, "rules": rules});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
    "metadata": {"name": "door-writer"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "door-writer"},
    "subjects": [
        {"kind": "ServiceAccount", "name": "door-sa", "namespace": "volguard-system"},
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "door-editors"}
    ]});
    for (kind, plural, o) in [
        ("ClusterRole", "clusterroles", role),
        ("ClusterRoleBinding", "clusterrolebindings", binding),
    ] {
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind),
            plural,
        );
        let obj: DynamicObject = serde_json::from_value(o).expect("rbac");
        Api::<DynamicObject>::all_with(c.clone(), &ar)
            .patch(
                obj.metadata.name.as_deref().unwrap_or_default(),
                &PatchParams::apply("door-matrix").force(),
                &Patch::Apply(&obj),
            )
            .await
            .expect("grant");
    }
}

pub(super) async fn proof_door_matrix(cp: &mut ControlPlane, ns: &str) {
    let admin = cp.admin().await;
    let (doors, other) = discover(&admin).await;
    let names: Vec<String> = doors.iter().map(Door::path).collect();
    println!(
        "door-matrix: the apiserver serves with patch or update: {}",
        names.join(", ")
    );
    println!(
        "door-matrix: create-only or holding no guarded field: {}",
        other.join(", ")
    );
    for want in [
        "pods/status",
        "nodes/status",
        "namespaces/finalize",
        "nodefences/status",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} not discovered: {names:?}"
        );
    }
    grant(&admin, &doors).await;
    let owner = create_targets(&admin, ns).await;
    let actors = [
        ("service-account", cp.sa_client("door-sa").await),
        (
            "namespace-editor",
            cp.client_as("door-editor", &["door-editors"]).await,
        ),
    ];
    // The RBAC just granted may take a moment to reach the authorizer's cache.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fields = fields(&owner);
    type Key = (String, String, String, String);
    let mut unguarded: Vec<Key> = Vec::new();
    // Each layer alone: the webhook (the policies removed), then the policies (volguard stopped
    // and unregistered). A request either refuses is refused where both are installed.
    let mut seen: std::collections::BTreeMap<Key, [Option<Outcome>; 2]> = Default::default();
    // Numbers the objects the tries make, across the phases: a pod of an earlier phase may
    // still be going when the next phase makes its own.
    let mut n = 0;
    for (p, phase) in ["without-volguard", "webhook", "policies"]
        .into_iter()
        .enumerate()
    {
        let applied = match phase {
            "webhook" => {
                cp.ensure_running().await;
                Vec::new()
            }
            _ => {
                cp.unregister_webhooks().await;
                cp.stop_webhook();
                match phase {
                    "policies" => install_policies(cp, &admin, ns).await,
                    _ => Vec::new(),
                }
            }
        };
        for (who, actor) in &actors {
            for field in fields.iter().filter(|f| f.actors.contains(who)) {
                let mut tries: Vec<(String, &str, Outcome)> = Vec::new();
                for door in doors.iter().filter(|d| field.plurals.contains(&d.plural)) {
                    tries.push((
                        door.path(),
                        "PATCH",
                        try_patch(door, field, actor, &admin, ns).await,
                    ));
                }
                for plural in ["pods", "persistentvolumeclaims", "nodes", "nodefences"] {
                    if field.seed.is_some() || !field.plurals.contains(&plural) {
                        continue;
                    }
                    n += 1;
                    let o = try_create(plural, field, actor, &admin, ns, n).await;
                    tries.push((plural.to_string(), "CREATE", o));
                }
                let annotations = &field.write["metadata"]["annotations"];
                if field.seed.is_none()
                    && field.plurals.contains(&"pods")
                    && annotations.is_object()
                {
                    for path in BINDING_PATHS {
                        n += 1;
                        let o = try_bind(path, field, actor, &admin, ns, n).await;
                        tries.push((path.to_string(), "CREATE", o));
                    }
                }
                for (path, verb, o) in tries {
                    let key = (field.name.clone(), path, verb.to_string(), who.to_string());
                    match p {
                        0 if o.persisted => unguarded.push(key),
                        0 => {}
                        _ => seen.entry(key).or_default()[p - 1] = Some(o),
                    }
                }
            }
        }
        if phase == "policies" {
            remove_policies(&admin, applied).await;
        }
    }
    let mut rows: Vec<Value> = Vec::new();
    let mut open = Vec::new();
    for ((field, path, verb, who), [webhook, policy]) in &seen {
        let def = fields.iter().find(|f| &f.name == field).expect("field");
        let key = (field.clone(), path.clone(), verb.clone(), who.clone());
        let persists = unguarded.contains(&key);
        let held = |o: &Option<Outcome>| o.as_ref().is_some_and(|o| !o.persisted);
        let refused = |o: &Option<Outcome>| o.as_ref().is_some_and(|o| o.refused_by.is_some());
        let judged_by = match (held(webhook), held(policy) && def.policy) {
            _ if !persists => "-",
            (true, true) => "both",
            (true, false) => "webhook",
            (false, true) => "policy",
            (false, false) => "none",
        };
        // What must hold: the webhook judges every door; the policies every door of the fields
        // they carry.
        if persists && (!held(webhook) || (def.policy && !held(policy))) {
            open.push(format!(
                "{field} via {verb} {path} as {who}: webhook {webhook:?}, policy {policy:?}"
            ));
        }
        let errors: Vec<String> = [webhook, policy]
            .iter()
            .filter_map(|o| o.as_ref()?.error.clone())
            .collect();
        rows.push(json!({
            "field": field, "path": path, "verb": verb, "actor": who,
            "persists_unguarded": persists,
            "judged_by": judged_by,
            "refused": refused(webhook) || refused(policy),
            "refused_by_webhook": refused(webhook),
            "refused_by_policy": refused(policy),
            "errors": errors,
        }));
    }
    // The binding paths are doors: each persisted a proof onto the pod without volguard, and the
    // matrix has their rows (issue 68: once assumed to hold no guarded field).
    for path in BINDING_PATHS {
        assert!(
            unguarded.iter().any(|(_, p, _, _)| p == path),
            "no field persisted through {path} without volguard: the try does not reach the pod"
        );
    }
    // The doors nobody listed are doors: some subresource besides the object itself persists a
    // field without volguard (otherwise this scenario would be checking nothing).
    assert!(
        unguarded.iter().any(|(_, p, _, _)| p.contains('/')),
        "no subresource persisted a field without volguard: {unguarded:?}"
    );
    println!(
        "door-matrix: field × path × verb × actor (persists without volguard; each layer alone: judged by, refused)"
    );
    for r in &rows {
        println!(
            "  {:<40} {:<30} {:<6} {:<16} persists_unguarded={:<5} judged_by={:<7} refused={}",
            r["field"].as_str().unwrap_or_default(),
            r["path"].as_str().unwrap_or_default(),
            r["verb"].as_str().unwrap_or_default(),
            r["actor"].as_str().unwrap_or_default(),
            r["persists_unguarded"],
            r["judged_by"].as_str().unwrap_or("-"),
            r["refused"]
        );
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e");
    std::fs::create_dir_all(&dir).expect("target/e2e");
    std::fs::write(
        dir.join("door-matrix.json"),
        serde_json::to_string_pretty(&rows).expect("json"),
    )
    .expect("write door-matrix.json");
    assert!(
        open.is_empty(),
        "paths that persisted a guarded field past a layer that must judge it:\n{}",
        open.join("\n")
    );
    let count = |by: &str| {
        rows.iter()
            .filter(|r| r["persists_unguarded"] == json!(true) && r["judged_by"] == by)
            .count()
    };
    let webhook_only: Vec<&str> = fields
        .iter()
        .filter(|f| !f.policy)
        .map(|f| f.name.as_str())
        .collect();
    println!(
        "door-matrix: {} fields, {} doors discovered, {} writes that persist a field without volguard, every one \
         judged (by both layers {}, the webhook alone {}: {}, which read other objects or are Ignore by design); \
         target/e2e/door-matrix.json",
        fields.len(),
        doors.len(),
        unguarded.len(),
        count("both"),
        count("webhook"),
        webhook_only.join(", "),
    );
}
