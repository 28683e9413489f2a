//! The apiserver's `pods/binding` (and legacy `bindings`) CREATE: the scheduler's bind, which
//! also copies the Binding's metadata onto the stored pod.

use crate::model::{Binding, Meta, Pod, SmallMap};

/// The legacy init-container annotations (`podutil.DropInitContainerAnnotations`): dropped from
/// the pod on every bind, whether the pod or the Binding carried them.
pub const INIT_CONTAINER_ANNOTATIONS: [&str; 4] = [
    "pod.beta.kubernetes.io/init-containers",
    "pod.alpha.kubernetes.io/init-containers",
    "pod.beta.kubernetes.io/init-container-statuses",
    "pod.alpha.kubernetes.io/init-container-statuses",
];

/// Why the apiserver refuses a bind (the pod is left as it was).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindRefused {
    /// The Binding's `uid` or `resourceVersion`, when set, is not the pod's (a conflict).
    Precondition,
    /// The pod has a deletion timestamp.
    Terminating,
    /// The pod already has a node.
    Assigned,
}

/// The refusals of `pkg/registry/core/pod/storage/storage.go: func (*BindingREST)
/// setPodNodeAndMetadata` (v1.37.2) that the model sees, in its order: the storage
/// preconditions, then a deleted pod, then an assigned one. Not modelled: a pod with
/// `spec.schedulingGates`, and the Binding's own validation (target kind and name).
pub fn bind_refused(pod: &Pod, binding: &Binding) -> Option<BindRefused> {
    let b = &binding.metadata;
    let pod_rv = pod.metadata.resource_version.as_deref().unwrap_or_default();
    let binding_rv = b.resource_version.as_deref().unwrap_or_default();
    if (!b.uid.is_empty() && b.uid != pod.metadata.uid)
        || (!binding_rv.is_empty() && binding_rv != pod_rv)
    {
        return Some(BindRefused::Precondition);
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return Some(BindRefused::Terminating);
    }
    if pod.node_name().is_some() {
        return Some(BindRefused::Assigned);
    }
    None
}

/// Ports the metadata merge of `pkg/registry/core/pod/storage/storage.go: func (*BindingREST)
/// setPodNodeAndMetadata` (v1.37.2): the stored pod's metadata after a bind that goes through
/// (`bind_refused` is `None`). The Binding's annotations are added over the pod's, then the
/// legacy init-container annotations dropped; its labels are copied over the pod's
/// (`copyLabelsWithOverwriting`, feature PodTopologyLabelsAdmission, on by default since 1.35).
/// An empty map reads as none, as the model decodes it.
pub fn merge_binding(pod: &Meta, binding: &Binding) -> Meta {
    let mut merged = pod.clone();
    let annotations: SmallMap = merged_map(&pod.annotations, &binding.metadata.annotations)
        .filter(|(k, _)| !INIT_CONTAINER_ANNOTATIONS.contains(&k.as_str()))
        .collect();
    merged.annotations = (!annotations.is_empty()).then_some(annotations);
    if binding
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| !l.is_empty())
    {
        merged.labels = Some(merged_map(&pod.labels, &binding.metadata.labels).collect());
    }
    merged
}

/// `base`'s entries, then `over`'s: collected into a `SmallMap`, the later value wins.
fn merged_map<'a>(
    base: &'a Option<SmallMap>,
    over: &'a Option<SmallMap>,
) -> impl Iterator<Item = (String, String)> + 'a {
    base.iter()
        .chain(over.iter())
        .flat_map(|m| m.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
}

#[cfg(test)]
#[path = "pod_binding_tests.rs"]
mod tests;
