//! Objects read from the apiserver decode once, straight into the pruned model.
//!
//! kube-rs's `Api` and watcher are generic over `kube::Resource`, whose `meta()` is k8s-openapi's
//! full `ObjectMeta`. Decoding into k8s-openapi types first and then converting to the model went
//! JSON → k8s-openapi → `serde_json::Value` → model: three passes and every field of every object
//! allocated twice. `Decoded<T>` is the model object itself plus the one piece of metadata the
//! watcher reads (`resourceVersion`, to resume), copied out of the model after its single decode.

use super::Object;
use crate::model::{Lease, Namespace, Node, Pod, Pv, Pvc, StorageClass};
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;

/// A model type and the Kubernetes resource it is read from (group, version, plural, scope).
pub trait Wire: Object {
    type Resource: Resource<DynamicType = ()>;
}

impl Wire for Pvc {
    type Resource = k8s::PersistentVolumeClaim;
}
impl Wire for Pv {
    type Resource = k8s::PersistentVolume;
}
impl Wire for Node {
    type Resource = k8s::Node;
}
impl Wire for Pod {
    type Resource = k8s::Pod;
}
impl Wire for Lease {
    type Resource = k8s_openapi::api::coordination::v1::Lease;
}
impl Wire for StorageClass {
    type Resource = k8s_openapi::api::storage::v1::StorageClass;
}
impl Wire for Namespace {
    type Resource = k8s::Namespace;
}

/// A model object as `Api`, `watcher` and `ObjectList` want it.
#[derive(Debug, Clone)]
pub struct Decoded<T> {
    /// name, namespace and resourceVersion only: all kube-runtime's watcher reads.
    meta: ObjectMeta,
    pub object: T,
}

impl<T> Decoded<T> {
    pub fn into_inner(self) -> T {
        self.object
    }
}

impl<'de, T: Wire + Deserialize<'de>> Deserialize<'de> for Decoded<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let object = T::deserialize(d)?;
        let m = object.meta();
        let some = |s: &String| (!s.is_empty()).then(|| s.clone());
        Ok(Decoded {
            meta: ObjectMeta {
                name: some(&m.name),
                namespace: some(&m.namespace),
                resource_version: m.resource_version.as_deref().map(str::to_string),
                ..ObjectMeta::default()
            },
            object,
        })
    }
}

impl<T: Wire> Resource for Decoded<T> {
    type DynamicType = ();
    type Scope = <T::Resource as Resource>::Scope;

    fn kind(_: &()) -> Cow<'_, str> {
        T::Resource::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        T::Resource::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        T::Resource::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        T::Resource::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

#[cfg(test)]
#[path = "decoded_tests.rs"]
mod tests;
