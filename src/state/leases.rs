//! The coordination.k8s.io Leases a process holds itself (the controller's leadership): read
//! live by the view (the read of a compare-and-swap), created and replaced by the writer with the
//! resourceVersion they were read at, so a concurrent taker makes a write fail (409) instead of
//! splitting the brain.

use super::write::{Apply, Door};
use super::{View, Writer};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;

/// Write a Lease (its namespace and name are its own): created when it carries no
/// resourceVersion (it was not there when read), else replaced only if nobody wrote it since it
/// was read (409 otherwise). Answers the Lease as stored.
pub struct LeasePut<'a>(pub &'a Lease);

impl Apply for LeasePut<'_> {
    type Answer = Result<Lease, kube::Error>;

    async fn apply_to(self, w: &Writer, _: Door) -> Result<Lease, kube::Error> {
        let lease = self.0;
        let meta = &lease.metadata;
        let leases: Api<Lease> = Api::namespaced(
            w.client()?.clone(),
            meta.namespace.as_deref().unwrap_or_default(),
        );
        match meta.resource_version {
            None => leases.create(&PostParams::default(), lease).await,
            Some(_) => {
                let name = meta.name.as_deref().unwrap_or_default();
                leases.replace(name, &PostParams::default(), lease).await
            }
        }
    }
}

impl View {
    /// The Lease as the apiserver has it now.
    pub(super) async fn lease(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Lease>, kube::Error> {
        let leases: Api<Lease> = Api::namespaced(self.client()?.clone(), namespace);
        leases.get_opt(name).await
    }
}
