//! What the operator tools (`explain`, `fence confirm`) read beyond the kinds the view caches: a
//! volume's VolumeAttachments, read live with the caller's own credentials (never cached, never in
//! a `--state` file), and who the apiserver says the caller is.

use super::{Fresh, View};
use crate::model::Attachment;
use crate::rules::Fact;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams};

impl View {
    /// Who the apiserver says the caller is (a SelfSubjectReview).
    pub(super) async fn whoami(&self) -> Result<Option<String>, kube::Error> {
        super::fences::whoami(self.client()?).await
    }

    /// The VolumeAttachments naming PV `pv` (one LIST; a file holds none: empty). A refusal
    /// keeps its status code (`Refused`), so a caller without RBAC to list them can say what it
    /// did not read.
    pub(super) async fn attachments(&self, pv: &str, fresh: Fresh) -> Fact<Vec<Attachment>> {
        let Some(l) = &self.live else {
            return Fact::Found(Vec::new());
        };
        if fresh == Fresh::Cache {
            return Fact::Unknown(crate::rules::decision::ReadError::NotWatched {
                what: format!("VolumeAttachments of {pv:?}"),
            });
        }
        let what = || "listing VolumeAttachments".to_string();
        let (api, params) = (
            Api::<VolumeAttachment>::all(l.client.clone()),
            ListParams::default(),
        );
        match super::view::by(fresh).wait(api.list(&params)).await {
            None => Fact::Unknown(crate::rules::decision::ReadError::Timeout { what: what() }),
            Some(Err(e)) => Fact::Unknown(super::live::read_error(what(), e)),
            Some(Ok(list)) => Fact::Found(
                list.items
                    .into_iter()
                    .filter(|va| va.spec.source.persistent_volume_name.as_deref() == Some(pv))
                    .map(|va| Attachment {
                        name: va.metadata.name.unwrap_or_default(),
                        node: va.spec.node_name,
                        attached: va.status.as_ref().is_some_and(|s| s.attached),
                        terminating: va.metadata.deletion_timestamp.is_some(),
                    })
                    .collect(),
            ),
        }
    }
}
