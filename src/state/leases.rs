//! The coordination.k8s.io Leases a process holds itself (the controller's leadership): read,
//! created and replaced with the resourceVersion they were read at, so a concurrent taker makes
//! a write fail (409) instead of splitting the brain. Every read here is live.

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;

/// The Leases of one namespace.
#[derive(Clone)]
pub struct Leases {
    api: Api<Lease>,
}

impl Leases {
    pub fn new(client: kube::Client, namespace: &str) -> Leases {
        Leases {
            api: Api::namespaced(client, namespace),
        }
    }

    /// The Lease as the apiserver has it now.
    pub async fn get(&self, name: &str) -> Result<Option<Lease>, kube::Error> {
        self.api.get_opt(name).await
    }

    pub async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api.create(&PostParams::default(), lease).await
    }

    /// Replace it if nobody wrote it since `lease` was read (its resourceVersion).
    pub async fn replace(&self, name: &str, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api.replace(name, &PostParams::default(), lease).await
    }
}
