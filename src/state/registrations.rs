//! volguard's own webhook configurations as the apiserver stores them, read by the view, live,
//! for the drift check (the read of the repair's compare-and-swap: `Write::Registration` replaces
//! them resourceVersion-guarded, so a concurrent writer such as cainjector is never overwritten
//! blind); and the serving certificate's CA, which the controller keeps in their `caBundle`.

use super::View;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

pub(super) fn api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

impl View {
    /// The configuration of `kind` (`ValidatingWebhookConfiguration`, ...) named `name`, as the
    /// apiserver has it now (never cached: its resourceVersion guards the repair).
    pub(super) async fn registration(
        &self,
        kind: &str,
        name: &str,
    ) -> Result<Option<DynamicObject>, kube::Error> {
        api(self.client()?, kind).get_opt(name).await
    }

    /// The PEM of the CA that signed volguard's serving certificate: `ca.crt` of Secret `name` in
    /// `namespace` (cert-manager writes it beside `tls.crt`). `None` while the Secret or its
    /// `ca.crt` does not exist yet (cert-manager has not issued): nothing to fill then.
    pub(super) async fn serving_ca(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, kube::Error> {
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.client()?.clone(), namespace);
        Ok(secrets
            .get_opt(name)
            .await?
            .and_then(|s| s.data)
            .and_then(|mut d| d.remove("ca.crt"))
            .map(|b| b.0)
            .filter(|b| !b.is_empty()))
    }
}
