//! rules.md §8 "break glass is for named people": a `volguard.io/*` override (allow-finalizer-
//! removal, confirm-force-delete, allow-lock-removal, confirm-node-down) counts only when the person
//! using it may use the break-glass verb: a SubjectAccessReview for the virtual resource
//! `breakglass` in group `volguard.io`, verb `use`, named after the rule, in the object's namespace
//! (the chart's ClusterRole `volguard-break-glass` grants it; bind it to the people you name). A
//! namespace editor alone cannot break glass. The rules never see an override that did not count.

use super::context::Admission;
use super::review::Request;
use crate::model::Meta;
use crate::state::Cluster;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use std::time::Duration;

/// Who may use an override (`--break-glass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BreakGlass {
    /// Whom RBAC allows `use` on `breakglass.volguard.io` (offline: `system:masters` only, the
    /// one group every RBAC authorizer allows).
    #[default]
    Rbac,
    /// Anyone who may write the annotation (volguard before 0.2).
    Anyone,
    /// Nobody: overrides are ignored.
    Off,
}

pub const GROUP: &str = "volguard.io";
pub const RESOURCE: &str = "breakglass";
pub const VERB: &str = "use";
/// How long one authorization may take; past it the override does not count.
const SAR_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether an override on the object counts for this request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Override {
    /// No override on the object.
    Absent,
    Honoured,
    /// Present but not this caller's to use: the warning says why.
    Ignored(String),
}

impl Admission {
    /// Decide whether the override `key` set on any of `metas` counts for the caller of `req`,
    /// for rule `rule`.
    pub(super) async fn override_counts(
        &self,
        req: &Request<'_>,
        rule: &str,
        key: &str,
        metas: &[&Meta],
    ) -> Override {
        if !metas.iter().any(|m| m.annotation_true(key)) {
            return Override::Absent;
        }
        let user = &req.user_info;
        let why = match self.break_glass {
            BreakGlass::Anyone => return Override::Honoured,
            BreakGlass::Off => "break glass is off (--break-glass=off)".to_string(),
            // Boxed: the SubjectAccessReview's future would size every rule's (a test keeps
            // them small); it is taken only when an override is present.
            BreakGlass::Rbac => match Box::pin(self.authorized(req, rule)).await {
                Ok(true) => return Override::Honoured,
                Ok(false) => format!(
                    "{:?} may not use {RESOURCE}.{GROUP} (verb {VERB}, name {rule}): ask an administrator to \
                     bind the ClusterRole volguard-break-glass",
                    user.username
                ),
                Err(e) => format!("volguard could not check who may break glass ({e})"),
            },
        };
        Override::Ignored(format!("{key}=true ignored: {why}"))
    }

    async fn authorized(&self, req: &Request<'_>, rule: &str) -> Result<bool, String> {
        let user = &req.user_info;
        let client = match &self.cluster {
            // Offline there is no authorizer to ask: only the group RBAC always allows.
            Cluster::Offline(_) => return Ok(user.in_group("system:masters")),
            Cluster::Live(l) => l.client.clone(),
        };
        let sar = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.username.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(GROUP.into()),
                    resource: Some(RESOURCE.into()),
                    verb: Some(VERB.into()),
                    name: Some(rule.into()),
                    namespace: req.namespace.as_deref().map(str::to_string),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api = kube::Api::<SubjectAccessReview>::all(client);
        match tokio::time::timeout(SAR_TIMEOUT, api.create(&Default::default(), &sar)).await {
            Ok(Ok(r)) => Ok(r.status.is_some_and(|s| s.allowed)),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {SAR_TIMEOUT:?}")),
        }
    }
}

/// Drop `key` from `meta` (an override that does not count).
pub fn strip(meta: &mut Meta, key: &str) {
    if let Some(a) = &mut meta.annotations {
        a.retain(|k, _| k != key);
        if a.is_empty() {
            meta.annotations = None;
        }
    }
}
