//! Installing and removing volguard's CEL policies on the shared cluster, for the scenarios
//! about them (the harness registers the webhooks alone).

use super::*;

/// Apply the policies of `manifests/base` (the policies, their parameters and Deny bindings) and wait until
/// the apiserver enforces them; returns what was applied (`Kind/name`).
pub(super) async fn install_policies(cp: &ControlPlane, c: &kube::Client, ns: &str) -> Vec<String> {
    install_policies_where(cp, c, ns, None, None).await
}

/// As `install_policies`; with `only` (a `(label, value)`), every binding is limited to the
/// namespaces that carry that label (`make bench`'s interleaved claim creates), and `ns` must be
/// one of them; with `params`, the parameters ConfigMap is installed holding those values, before
/// the policies that read it.
pub(super) async fn install_policies_where(
    cp: &ControlPlane,
    c: &kube::Client,
    ns: &str,
    only: Option<(&str, &str)>,
    params: Option<serde_json::Value>,
) -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base");
    let write = |file: &str, docs: Vec<serde_json::Value>| {
        let text: Vec<String> = docs
            .iter()
            .map(|d| serde_yaml::to_string(d).expect("yaml"))
            .collect();
        let path = cp.dir.path().join(file);
        std::fs::write(&path, text.join("---\n")).expect("write policies");
        path
    };
    let mut bindings = probe_last(&dir.join("policy-bindings.yaml"));
    for v in &mut bindings {
        if let Some((label, value)) = only
            && v["kind"].as_str().is_some_and(|k| k.ends_with("Binding"))
        {
            v["spec"]["matchResources"]["namespaceSelector"] =
                json!({"matchLabels": {label: value}});
        }
        if let Some(p) = &params
            && v["kind"] == "ConfigMap"
        {
            for (k, val) in p.as_object().into_iter().flatten() {
                v["data"][k] = val.clone();
            }
        }
    }
    let bindings = write("bindings-installed.yaml", bindings);
    let policies = write(
        "policies-installed.yaml",
        probe_last(&dir.join("policies.yaml")),
    );
    // With parameters, they (and the bindings) go in before the policies, so the policies are
    // created against the parameters they are to read.
    let order = match params {
        Some(_) => [&bindings, &policies],
        None => [&policies, &bindings],
    };
    let mut applied = Vec::new();
    for file in order {
        applied.extend(harness::apply_file(c, file, false).await);
    }
    // Enforced once the apiserver's informers have the policies, the bindings and the
    // parameters (until then a binding without its parameters is skipped): a dry-run force
    // delete of a placed pod, by a person without confirmation, is refused by the policy itself.
    // The probe's policy and binding were applied last of their kinds, and each informer sees
    // its kind's writes in order, so once the probe is refused every other validating policy
    // and binding is in force too (with the probe in the middle, the door matrix once met the proof policy
    // a few seconds before its binding had arrived).
    // A probe of its own per install: a pod on a node that does not exist stays terminating
    // after its graceful delete, so a name used twice would collide (`make bench` installs them
    // once per round).
    static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let probe_name = format!(
        "policy-probe-{}",
        PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let mut t = pod_template("policy-probe", json!({"name": "data", "emptyDir": {}}));
    t["metadata"]["name"] = json!(probe_name);
    t["spec"]["nodeName"] = json!("policy-probe-node");
    let probe: Pod = serde_json::from_value(t).expect("pod");
    pods.create(&PostParams::default(), &probe)
        .await
        .expect("probe pod");
    let dry = DeleteParams {
        grace_period_seconds: Some(0),
        dry_run: true,
        ..Default::default()
    };
    cp.eventually("the policies enforced", WAIT, || {
        let (pods, dry, probe_name) = (pods.clone(), dry.clone(), probe_name.clone());
        async move {
            match pods.delete(&probe_name, &dry).await {
                Err(kube::Error::Api(e)) => (e.message.contains("ValidatingAdmissionPolicy")
                    && e.message
                        .contains(&format!("force delete of pod \"{probe_name}\" refused")))
                .then_some(()),
                _ => None,
            }
        }
    })
    .await;
    pods.delete(&probe_name, &DeleteParams::default())
        .await
        .expect("delete probe");
    // The mutating policies have informers of their own: a dry-run claim carrying an old
    // unused-since mark comes back without it once the claim's policy (applied last of them) is
    // in force.
    let claims = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let marked: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": format!("{probe_name}-claim"),
            "annotations": {"volguard.io/unused-since": "2020-01-01T00:00:00Z"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("pvc");
    let dry_create = PostParams {
        dry_run: true,
        ..Default::default()
    };
    cp.eventually("the mutating policies in force", WAIT, || {
        let (claims, marked, dry_create) = (claims.clone(), marked.clone(), dry_create.clone());
        async move {
            let made = claims.create(&dry_create, &marked).await.ok()?;
            (!made
                .metadata
                .annotations
                .unwrap_or_default()
                .contains_key("volguard.io/unused-since"))
            .then_some(())
        }
    })
    .await;
    applied
}

/// The documents of a manifest file with the probes' (`volguard-force-delete`,
/// `volguard-pvc-finalizer`) moved to the end: each is then the last of its kind.
fn probe_last(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut docs: Vec<serde_json::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("yaml"))
        .filter(|v: &serde_json::Value| !v.is_null())
        .collect();
    // A stable sort: every other document keeps its order.
    docs.sort_by_key(|v| {
        ["volguard-force-delete", "volguard-pvc-finalizer"]
            .contains(&v["metadata"]["name"].as_str().unwrap_or_default())
    });
    docs
}

/// Before a scenario: no volguard policy left by one that stopped half-way (the webhooks judge).
pub(super) async fn no_policies_left(c: &kube::Client) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    for kind in [
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicy",
        "MutatingAdmissionPolicy",
    ] {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            kind,
        ));
        let api: Api<DynamicObject> = Api::all_with(c.clone(), &ar);
        let Ok(left) = api
            .list(&ListParams::default().labels("volguard.io/rule"))
            .await
        else {
            continue;
        };
        for o in left.items {
            let name = o.metadata.name.unwrap_or_default();
            println!("(removing {kind} {name}, left by a scenario that stopped half-way)");
            let _ = api.delete(&name, &DeleteParams::default()).await;
        }
    }
}

/// Delete the policies and bindings `install_policies` applied. The parameters stay: on
/// kube-apiserver 1.36.3 a parameters ConfigMap deleted and created again was never seen by the
/// policies bound to it again (their bindings skipped as without parameters), where 1.37.2 saw it.
pub(super) async fn remove_policies(c: &kube::Client, applied: Vec<String>) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    for doc in applied {
        let (kind, name) = doc.split_once('/').expect("kind/name");
        if kind == "ConfigMap" {
            continue;
        }
        let (group, version) = match kind {
            "ConfigMap" => ("", "v1"),
            _ => ("admissionregistration.k8s.io", "v1"),
        };
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        let api: Api<DynamicObject> = match kind {
            "ConfigMap" => Api::namespaced_with(c.clone(), "volguard-system", &ar),
            _ => Api::all_with(c.clone(), &ar),
        };
        api.delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("delete {doc}: {e}"));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
}
