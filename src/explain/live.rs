//! `explain` against a live cluster: the claim or volume, the pods of the claim's namespace
//! (a consistent LIST, like the controller's), and the volume's VolumeAttachments.

use super::{Attachment, Explanation, NotFound, build_pv, build_pvc};
use crate::cli::{ExplainArgs, ExplainKind};
use crate::model::{Pv, Pvc};
use crate::rules::Fact;
use crate::state::decoded::Decoded;
use crate::state::live::list_pods_consistent;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams};

pub async fn explain(args: &ExplainArgs) -> anyhow::Result<Explanation> {
    let client =
        crate::runtime::kube::client_for(args.kubeconfig.as_deref(), args.context.as_deref())
            .await?;
    let ns = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    match args.kind {
        ExplainKind::Pvc => {
            let pvc = Api::<Decoded<Pvc>>::namespaced(client.clone(), &ns)
                .get_opt(&args.name)
                .await?
                .ok_or_else(|| NotFound {
                    kind: "PersistentVolumeClaim",
                    name: args.name.clone(),
                    scope: format!(" in namespace {ns:?}"),
                })?
                .into_inner();
            let pv = match pvc.volume_name() {
                Some(v) => get_pv(&client, v).await?,
                None => None,
            };
            let claim = pvc.metadata.name.clone();
            let pods = match list_pods_consistent(&client, &ns, |p| {
                crate::rules::claims::claims_of(p).any(|c| c.name == claim)
            })
            .await
            {
                Fact::Found(p) => p,
                Fact::Missing => Vec::new(),
                Fact::Unknown(e) => anyhow::bail!("cannot list the pods of {ns:?}: {e}"),
            };
            let vas = match &pv {
                Some(pv) => attachments(&client, &pv.metadata.name).await?,
                None => Vec::new(),
            };
            Ok(build_pvc(&pvc, pv.as_ref(), &pods, &vas))
        }
        ExplainKind::Pv => {
            let pv = get_pv(&client, &args.name).await?.ok_or_else(|| NotFound {
                kind: "PersistentVolume",
                name: args.name.clone(),
                scope: String::new(),
            })?;
            let claim = match &pv.spec.claim_ref {
                Some(c) => Api::<Decoded<Pvc>>::namespaced(client.clone(), &c.namespace)
                    .get_opt(&c.name)
                    .await?
                    .map(Decoded::into_inner),
                None => None,
            };
            let vas = attachments(&client, &pv.metadata.name).await?;
            Ok(build_pv(&pv, claim.as_ref(), &vas))
        }
    }
}

async fn get_pv(client: &kube::Client, name: &str) -> anyhow::Result<Option<Pv>> {
    Ok(Api::<Decoded<Pv>>::all(client.clone())
        .get_opt(name)
        .await?
        .map(Decoded::into_inner))
}

/// VolumeAttachments naming the PV. A caller without RBAC to list them gets an explanation
/// without them rather than none at all.
async fn attachments(client: &kube::Client, pv: &str) -> anyhow::Result<Vec<Attachment>> {
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
