//! One object as the apiserver has it now (a quorum GET, never a cache): the controller's reads
//! before it releases anything, paced by the controller's own limiter. Freshness is in the name
//! of the module: everything here is live.

use super::decoded::{Decoded, Wire};
use kube::Api;
use serde::de::DeserializeOwned;

/// A namespaced object, or `None` when it does not exist.
pub async fn namespaced<T>(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<T>, kube::Error>
where
    T: Wire + DeserializeOwned + std::fmt::Debug,
    Decoded<T>: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <Decoded<T> as kube::Resource>::DynamicType: Default,
{
    Api::<Decoded<T>>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map(|o| o.map(Decoded::into_inner))
}

/// A cluster-scoped object, or `None` when it does not exist.
pub async fn cluster<T>(client: &kube::Client, name: &str) -> Result<Option<T>, kube::Error>
where
    T: Wire + DeserializeOwned + std::fmt::Debug,
    Decoded<T>: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>,
    <Decoded<T> as kube::Resource>::DynamicType: Default,
{
    Api::<Decoded<T>>::all(client.clone())
        .get_opt(name)
        .await
        .map(|o| o.map(Decoded::into_inner))
}
