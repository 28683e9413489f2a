//! What `explain` reads live beyond the cluster view: the volume's VolumeAttachments.

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
