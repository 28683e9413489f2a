//! Route each admission request to its rule, gathering the cluster facts the rule needs first.

use super::review::{Embedded, EmbeddedKind, Request};
use crate::model::{DeleteOptions, Meta, PV_FINALIZER, PVC_FINALIZER, Pod, Pv, Pvc};
use crate::rules::claims::claims_of;
use crate::rules::force_delete::{ForceDeletePolicy, is_force};
use crate::rules::{Decision, Fact, binding, finalizer_guard, force_delete, pod_create, protect};
use crate::state::Cluster;
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Mutate,
    Validate,
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Mutate => "mutate",
            Endpoint::Validate => "validate",
        }
    }
}

pub struct Admission {
    pub cluster: Cluster,
    pub policy: ForceDeletePolicy,
    /// Usernames of volguard's own controller (exempt from the finalizer guard).
    pub own_controllers: Vec<String>,
    unknown_kinds: Mutex<HashSet<String>>,
}

impl Admission {
    pub fn new(cluster: Cluster, policy: ForceDeletePolicy, own_controllers: Vec<String>) -> Self {
        Admission {
            cluster,
            policy,
            own_controllers,
            unknown_kinds: Mutex::new(HashSet::new()),
        }
    }

    pub async fn decide(&self, endpoint: Endpoint, req: &Request<'_>) -> Decision {
        match self.route(endpoint, req).await {
            Ok(d) | Err(d) => d,
        }
    }

    async fn route(&self, endpoint: Endpoint, req: &Request<'_>) -> Result<Decision, Decision> {
        if !req.kind.group.is_empty() {
            return Ok(self.unknown_kind(req));
        }
        let kind = &*req.kind.kind;
        let op = &*req.operation;
        if req.subresource().is_some() {
            return Ok(Decision::allow("subresource"));
        }
        match (endpoint, kind, op) {
            (Endpoint::Mutate, "PersistentVolumeClaim", "CREATE") => {
                let pvc = object::<Pvc>(&req.object, "object")?;
                Ok(protect::protect_on_create(&pvc.metadata, PVC_FINALIZER))
            }
            (Endpoint::Mutate, "PersistentVolume", "CREATE") => {
                let pv = object::<Pv>(&req.object, "object")?;
                Ok(protect::protect_on_create(&pv.metadata, PV_FINALIZER))
            }
            (Endpoint::Mutate, "PersistentVolumeClaim" | "PersistentVolume" | "Pod", _) => {
                Ok(Decision::allow("no-mutation"))
            }
            (Endpoint::Validate, "Pod", "CREATE") => self.pod_create(req).await,
            (Endpoint::Validate, "Pod", "DELETE") => self.pod_delete(req).await,
            (Endpoint::Validate, "PersistentVolumeClaim", "CREATE" | "UPDATE") => {
                self.pvc_write(req).await
            }
            (Endpoint::Validate, "PersistentVolume", "UPDATE") => self.pv_update(req),
            (_, "Pod" | "PersistentVolumeClaim" | "PersistentVolume", _) => {
                Ok(Decision::allow("no-rule"))
            }
            _ => Ok(self.unknown_kind(req)),
        }
    }

    /// SPEC 2e: allowed; a configuration mistake worth one log line per kind (and a metric,
    /// counted by the server from the decision's rule name).
    fn unknown_kind(&self, req: &Request<'_>) -> Decision {
        let key = format!("{}/{}", req.kind.group, req.kind.kind);
        let first = self
            .unknown_kinds
            .lock()
            .map(|mut s| s.insert(key.clone()))
            .unwrap_or(false);
        if first {
            tracing::warn!(kind = %key, "webhook called for a kind volguard has no rule for; check the webhook configuration");
        }
        Decision::allow("unknown-kind")
    }

    async fn pod_create(&self, req: &Request<'_>) -> Result<Decision, Decision> {
        let mut pod = object::<Pod>(&req.object, "object")?;
        fill_namespace(&mut pod, req);
        let ns = pod.metadata.namespace.clone();
        let mut facts = Vec::new();
        for claim in claims_of(&pod) {
            let fact = self.cluster.pvc(&ns, &claim.name).await;
            facts.push((claim, fact));
        }
        let facts: Vec<_> = facts.iter().map(|(c, f)| (c.clone(), deref(f))).collect();
        Ok(pod_create::pod_create(&pod, &facts))
    }

    async fn pod_delete(&self, req: &Request<'_>) -> Result<Decision, Decision> {
        let pod = object::<Pod>(&req.old_object, "oldObject")?;
        let grace = match req.options {
            Some(raw) => {
                serde_json::from_str::<DeleteOptions>(raw.get())
                    .map_err(|e| {
                        Decision::bad_request(format!(
                            "request.options does not decode as a DeleteOptions: {e}"
                        ))
                    })?
                    .grace_period_seconds
            }
            None => None,
        };
        tracing::debug!(pod = %pod.metadata.name, grace_period_seconds = ?grace, "pod delete seen");
        // The node is only read when the cheap rows did not decide (force delete of a scheduled pod).
        let node = match pod.node_name() {
            Some(n) if is_force(grace) => self.cluster.node(n).await,
            _ => Fact::Missing,
        };
        Ok(force_delete::pod_delete(
            &req.user_info,
            &pod,
            grace,
            deref(&node),
            &self.policy,
        ))
    }

    async fn pvc_write(&self, req: &Request<'_>) -> Result<Decision, Decision> {
        let mut new = object::<Pvc>(&req.object, "object")?;
        fill_namespace(&mut new, req);
        let old = match &*req.operation {
            "UPDATE" => Some(object::<Pvc>(&req.old_object, "oldObject")?),
            _ => None,
        };
        let mut warnings = Vec::new();
        if let Some(old) = &old
            && finalizer_guard::strips(&old.metadata, &new.metadata, PVC_FINALIZER)
        {
            match finalizer_guard::exempt(
                &req.user_info,
                &self.own_controllers,
                &old.metadata,
                &new.metadata,
            ) {
                Some(why) => {
                    tracing::info!(exemption = why, "protection finalizer removal allowed")
                }
                None => {
                    let pods = self.cluster.pods_consistent(&new.metadata.namespace).await;
                    let d = finalizer_guard::pvc_finalizer_removal(
                        &new,
                        pods.as_ref().map(Vec::as_slice),
                    );
                    if !d.allowed {
                        return Ok(d);
                    }
                    warnings.extend(d.warnings);
                }
            }
        }
        let mut d = match binding::newly_bound_volume(old.as_deref(), &new) {
            Some(pv_name) => {
                let pv = self.cluster.pv(pv_name).await;
                binding::pvc_binding(&new, pv_name, deref(&pv))
            }
            None => Decision::allow("pvc-write"),
        };
        d.warnings.extend(warnings);
        Ok(d)
    }

    fn pv_update(&self, req: &Request<'_>) -> Result<Decision, Decision> {
        let new = object::<Pv>(&req.object, "object")?;
        let old = object::<Pv>(&req.old_object, "oldObject")?;
        if !finalizer_guard::strips(&old.metadata, &new.metadata, PV_FINALIZER) {
            return Ok(Decision::allow("pv-update"));
        }
        if let Some(why) = finalizer_guard::exempt(
            &req.user_info,
            &self.own_controllers,
            &old.metadata,
            &new.metadata,
        ) {
            tracing::info!(exemption = why, "protection finalizer removal allowed");
            return Ok(Decision::allow("strip-pv-finalizer"));
        }
        Ok(finalizer_guard::pv_finalizer_removal(&old, &new))
    }
}

/// One embedded object; a missing or malformed object is the caller's mistake (400).
fn object<'r, T: EmbeddedKind>(e: &'r Embedded<'_>, field: &str) -> Result<Cow<'r, T>, Decision> {
    e.get(field).map_err(Decision::bad_request)
}

/// Objects being created may omit their namespace; the request carries it.
fn fill_namespace<T: Clone + HasMeta>(obj: &mut Cow<'_, T>, req: &Request<'_>) {
    if obj.meta().namespace.is_empty()
        && let Some(ns) = &req.namespace
    {
        obj.to_mut().meta_mut().namespace = ns.to_string();
    }
}

trait HasMeta {
    fn meta(&self) -> &Meta;
    fn meta_mut(&mut self) -> &mut Meta;
}

impl HasMeta for Pod {
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut Meta {
        &mut self.metadata
    }
}

impl HasMeta for Pvc {
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut Meta {
        &mut self.metadata
    }
}

fn deref<T>(f: &Fact<std::sync::Arc<T>>) -> Fact<&T> {
    f.as_ref().map(|a| a.as_ref())
}
