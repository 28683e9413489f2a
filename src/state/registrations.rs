//! volguard's own webhook configurations as the apiserver stores them: read live for the drift
//! check, and replaced (resourceVersion-guarded, so a concurrent writer such as cainjector is
//! never overwritten blind) when the drift is repaired.

use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};

fn api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// The configuration of `kind` (`ValidatingWebhookConfiguration`, ...) named `name`, live.
pub async fn get_live(
    client: &kube::Client,
    kind: &str,
    name: &str,
) -> Result<Option<DynamicObject>, kube::Error> {
    api(client, kind).get_opt(name).await
}

/// Write `fixed` back if nobody wrote the configuration since it was read.
pub async fn replace(
    client: &kube::Client,
    kind: &str,
    name: &str,
    fixed: &DynamicObject,
) -> Result<DynamicObject, kube::Error> {
    api(client, kind)
        .replace(
            name,
            &PostParams {
                // Named, so a conflict Helm reports says who wrote (not "unknown").
                field_manager: Some("volguard-controller".into()),
                ..PostParams::default()
            },
            fixed,
        )
        .await
}
