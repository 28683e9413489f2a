//! Waiting for a condition, with every component's log when it does not come; applying files.

use super::*;

/// Write the Secret's `tls.crt` / `tls.key` into `dir` when they changed, each file replaced
/// atomically (as the kubelet's secret volume swaps its data directory).
pub async fn sync_secret_once(secrets: &Api<k8s_openapi::api::core::v1::Secret>, dir: &Path) {
    let Ok(secret) = secrets.get("volguard-webhook-tls").await else {
        return;
    };
    let data = secret.data.unwrap_or_default();
    let (Some(crt), Some(key)) = (data.get("tls.crt"), data.get("tls.key")) else {
        return;
    };
    if std::fs::read(dir.join("tls.crt")).ok().as_deref() == Some(crt.0.as_slice()) {
        return;
    }
    for (name, bytes) in [("tls.key", &key.0), ("tls.crt", &crt.0)] {
        let tmp = dir.join(format!(".{name}.tmp"));
        let written =
            std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, dir.join(name)));
        match written {
            Ok(()) => {}
            // Teardown removed the cluster's temp dir under a sync in flight: nothing to keep.
            Err(_) if !dir.is_dir() => return,
            Err(e) => panic!("writing {name} into {}: {e}", dir.display()),
        }
    }
}

pub(super) async fn replace_or_create<K>(api: Api<K>, obj: K)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    if let Ok(Some(mut existing)) = api.get_opt(&name).await {
        let mut o = obj;
        o.meta_mut().resource_version = existing.meta_mut().resource_version.take();
        api.replace(&name, &PostParams::default(), &o)
            .await
            .expect("replace webhook config");
    } else {
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create webhook config");
    }
}

/// Poll a plain-HTTP URL until it answers 200.
pub async fn wait_http_ok(url: &str, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    let mut last = String::new();
    while Instant::now() < deadline {
        match reqwest::get(url).await {
            Ok(r) if r.status() == 200 => return Ok(()),
            Ok(r) => last = format!("status {}", r.status()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last)
}

/// Poll `f` until it returns Some, or fail with `what`.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    poll_until(what, within, f, String::new).await
}

/// Poll `f` every 200 ms until it returns Some; after `within`, fail with `what` and `context()`.
pub async fn poll_until<T, F, Fut>(
    what: &str,
    within: Duration,
    mut f: F,
    context: impl Fn() -> String,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(t) = f().await {
            return t;
        }
        if Instant::now() > deadline {
            panic!("timed out waiting for: {what}\n{}", context());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl ControlPlane {
    /// As `eventually`, failing with every component's log.
    pub async fn eventually<T, F, Fut>(&self, what: &str, within: Duration, f: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        poll_until(what, within, f, || self.logs()).await
    }
}

/// Lines of a process log, shared for assertions on what volguard saw.
pub fn read_log(p: &Proc) -> String {
    std::fs::read_to_string(&p.log).unwrap_or_default()
}

pub type Shared<T> = Arc<Mutex<T>>;

/// Server-side apply every document of `path` (dry run or for real); returns "Kind/name" of each.
pub async fn apply_file(client: &kube::Client, path: &Path, dry_run: bool) -> Vec<String> {
    use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
    use kube::discovery::Scope;
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
        if v.is_null() {
            continue;
        }
        let obj: DynamicObject = serde_json::from_value(v).expect("object");
        let types = obj.types.clone().expect("apiVersion/kind");
        let gvk = GroupVersionKind::try_from(&types).expect("gvk");
        let name = obj.metadata.name.clone().expect("name");
        // CRDs applied just before may take a moment to be served.
        let deadline = Instant::now() + Duration::from_secs(30);
        let (ar, caps) = loop {
            // A group whose CRD was just created can 404 for a moment; retry until it is served.
            if let Ok(found) = kube::discovery::pinned_kind(client, &gvk).await {
                break found;
            }
            assert!(
                Instant::now() < deadline,
                "{}: kind {gvk:?} is not served",
                path.display()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                obj.metadata.namespace.as_deref().unwrap_or("default"),
                &ar,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        let mut pp = PatchParams::apply("volguard-e2e").force();
        if dry_run {
            pp = pp.dry_run();
        }
        api.patch(&name, &pp, &Patch::Apply(&obj))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{} {}/{name} rejected by the apiserver: {e}",
                    path.display(),
                    types.kind
                )
            });
        out.push(format!("{}/{name}", types.kind));
    }
    out
}
