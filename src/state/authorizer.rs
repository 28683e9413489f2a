//! The apiserver's authorizer, asked for a user other than volguard (a SubjectAccessReview with
//! that user's own groups): who may use break glass (rules.md §8).

use super::View;
use crate::model::UserInfo;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use std::time::Duration;

/// One question: may `user` `verb` `resource.group` named `name` in `namespace`?
pub struct Ask<'a> {
    pub user: &'a UserInfo,
    pub group: &'a str,
    pub resource: &'a str,
    pub verb: &'a str,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
}

impl View {
    /// The authorizer's answer within `timeout`; `Err` says why there is none. Offline there is
    /// no authorizer to ask: only `system:masters`, the one group every RBAC authorizer allows.
    pub(super) async fn may(&self, ask: Ask<'_>, timeout: Duration) -> Result<bool, String> {
        let client = match &self.live {
            None => return Ok(ask.user.in_group("system:masters")),
            Some(l) => l.client.clone(),
        };
        let sar = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(ask.user.username.clone()),
                uid: ask.user.uid.clone(),
                groups: Some(ask.user.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(ask.group.into()),
                    resource: Some(ask.resource.into()),
                    verb: Some(ask.verb.into()),
                    name: Some(ask.name.into()),
                    namespace: ask.namespace.map(str::to_string),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api = kube::Api::<SubjectAccessReview>::all(client);
        match tokio::time::timeout(timeout, api.create(&Default::default(), &sar)).await {
            Ok(Ok(r)) => Ok(r.status.is_some_and(|s| s.allowed)),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {timeout:?}")),
        }
    }
}
