//! What `explain` reads live beyond the cluster view: the volume's VolumeAttachments and the
//! fencing incidents.

use super::Attachment;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams};

/// VolumeAttachments naming the PV. A caller without RBAC to list them gets an explanation
/// without them rather than none at all.
pub async fn attachments(client: &kube::Client, pv: &str) -> anyhow::Result<Vec<Attachment>> {
    let list = match Api::<VolumeAttachment>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => l,
        Err(kube::Error::Api(e)) if e.code == 403 || e.code == 404 => {
            tracing::warn!(error = %e.message, "cannot list VolumeAttachments; explaining without them");
            return Ok(Vec::new());
        }
        Err(e) => return Err(e.into()),
    };
    Ok(list
        .items
        .into_iter()
        .filter(|va| va.spec.source.persistent_volume_name.as_deref() == Some(pv))
        .map(|va| Attachment {
            name: va.metadata.name.unwrap_or_default(),
            node: va.spec.node_name,
            attached: va.status.as_ref().is_some_and(|s| s.attached),
            terminating: va.metadata.deletion_timestamp.is_some(),
        })
        .collect())
}

/// Every fencing incident (docs/fencing.md). A caller who may not list them (or a cluster without
/// the CRD) gets an explanation without them.
pub async fn fences(client: &kube::Client) -> anyhow::Result<Vec<crate::model::fence::NodeFence>> {
    match crate::state::fences::api(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => Ok(l
            .items
            .into_iter()
            .filter_map(|o| crate::state::fences::decode(o).ok())
            .collect()),
        Err(kube::Error::Api(e)) if e.code == 403 || e.code == 404 => {
            tracing::warn!(error = %e.message, "cannot list NodeFences; explaining without them");
            Ok(Vec::new())
        }
        Err(e) => Err(e.into()),
    }
}
