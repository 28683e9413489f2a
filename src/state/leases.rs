//! The coordination.k8s.io Leases a process holds itself (the controller's leadership), written
//! by the writer: read, created and replaced with the resourceVersion they were read at, so a
//! concurrent taker makes a write fail (409) instead of splitting the brain. Every read here is
//! live (the read of a compare-and-swap).

use super::Writer;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;

impl Writer {
    fn leases(&self, namespace: &str) -> Result<Api<Lease>, kube::Error> {
        Ok(Api::namespaced(self.client()?.clone(), namespace))
    }

    /// The Lease as the apiserver has it now.
    pub async fn lease(&self, namespace: &str, name: &str) -> Result<Option<Lease>, kube::Error> {
        self.leases(namespace)?.get_opt(name).await
    }

    pub async fn create_lease(&self, namespace: &str, lease: &Lease) -> Result<Lease, kube::Error> {
        self.leases(namespace)?
            .create(&PostParams::default(), lease)
            .await
    }

    /// Replace it if nobody wrote it since `lease` was read (its resourceVersion).
    pub async fn replace_lease(
        &self,
        namespace: &str,
        name: &str,
        lease: &Lease,
    ) -> Result<Lease, kube::Error> {
        self.leases(namespace)?
            .replace(name, &PostParams::default(), lease)
            .await
    }
}
