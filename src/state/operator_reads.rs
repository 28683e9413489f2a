//! What the operator tools (`explain`) read live beyond the cluster view: a volume's
//! VolumeAttachments and the fencing incidents, each read with the caller's own credentials (a
//! read the caller may not do is reported as "not read", not as an error).

use crate::model::Attachment;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams};

/// What a read the caller may not do leaves out, as the explanation says it ("not read").
pub fn unreadable(resource: &str, e: &kube::Error) -> Option<String> {
    match e {
        kube::Error::Api(s) if s.code == 403 => Some(format!("{resource} (forbidden)")),
        _ => None,
    }
}

/// VolumeAttachments naming the PV. A caller without RBAC to list them (a namespace's user) gets
/// an explanation without them, which says so, rather than none at all.
pub async fn attachments(
    client: &kube::Client,
    pv: &str,
    not_read: &mut Vec<String>,
) -> anyhow::Result<Vec<Attachment>> {
    let list = match Api::<VolumeAttachment>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => l,
        Err(e) => match unreadable("volumeattachments", &e) {
            Some(what) => {
                not_read.push(what);
                return Ok(Vec::new());
            }
            None => return Err(e.into()),
        },
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

/// Every fencing incident (docs/fencing.md). A caller who may not list them gets an explanation
/// without them that says so; a cluster without the CRD has none.
pub async fn fences(
    client: &kube::Client,
    not_read: &mut Vec<String>,
) -> anyhow::Result<Vec<crate::model::fence::NodeFence>> {
    match super::fences::api(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => Ok(l
            .items
            .into_iter()
            .filter_map(|o| super::fences::decode(o).ok())
            .collect()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
        Err(e) => match unreadable("nodefences", &e) {
            Some(what) => {
                not_read.push(what);
                Ok(Vec::new())
            }
            None => Err(e.into()),
        },
    }
}
