//! Route each admission request to its rule(s), gathering the cluster facts each rule needs first.
//!
//! Each webhook entry has its own path naming one rule (`/validate/force-delete`); `/mutate` and
//! `/validate` run every rule that applies, for offline use and fixtures. Each rule decides within
//! the request's time budget; a rule that runs out of time answers as its failure policy says
//! (rules.md "Deciding late"), and a denial of a rule in `warn` mode becomes a warning (rules.md §2g).

use super::review::{Embedded, EmbeddedKind, Request};
use crate::model::{
    Binding, DeleteOptions, Eviction, Meta, PV_FINALIZER, PVC_FINALIZER, Pod, Pv, Pvc,
};
use crate::rules::claims::claims_of;
use crate::rules::enforcement::Enforcement;
use crate::rules::force_delete::{ForceDeletePolicy, is_force};
use crate::rules::rule::{FailurePolicy, Rule};
use crate::rules::rwo::ClaimFacts;
use crate::rules::{
    Decision, Fact, binding, finalizer_guard, force_delete, pod_create, protect, rwo,
};
use crate::state::Cluster;
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Which rules a request is judged by: the ones of one path, or every rule of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/mutate`: every mutating rule.
    Mutate,
    /// `/validate`: every validating rule.
    Validate,
    /// `/mutate/<rule>` or `/validate/<rule>`: that rule alone.
    Rule(Rule),
}

impl Endpoint {
    /// The metric and log name: `mutate`, `validate`, or the rule's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Mutate => "mutate",
            Endpoint::Validate => "validate",
            Endpoint::Rule(r) => r.name(),
        }
    }

    fn admits(self, rule: Rule) -> bool {
        match self {
            Endpoint::Mutate => rule.mutating(),
            Endpoint::Validate => !rule.mutating(),
            Endpoint::Rule(r) => r == rule,
        }
    }
}

/// What kind of request this is, as far as routing cares (no I/O, no object decoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    PodCreate,
    PodDelete,
    PodEviction,
    PodBinding,
    PvcCreate,
    PvcUpdate,
    PvCreate,
    PvUpdate,
    /// A kind volguard reads, in an operation or subresource no rule concerns.
    Other,
    /// A kind volguard has no rule for: a webhook configuration mistake (rules.md §2e).
    Unknown,
}

impl Target {
    fn of(req: &Request<'_>) -> Target {
        let (group, kind, op) = (&*req.kind.group, &*req.kind.kind, &*req.operation);
        match (group, kind, req.subresource(), op) {
            ("", "Pod", None, "CREATE") => Target::PodCreate,
            ("", "Pod", None, "DELETE") => Target::PodDelete,
            ("policy", "Eviction", Some("eviction"), "CREATE") => Target::PodEviction,
            ("", "Binding", Some("binding"), "CREATE") => Target::PodBinding,
            ("", "PersistentVolumeClaim", None, "CREATE") => Target::PvcCreate,
            ("", "PersistentVolumeClaim", None, "UPDATE") => Target::PvcUpdate,
            ("", "PersistentVolume", None, "CREATE") => Target::PvCreate,
            ("", "PersistentVolume", None, "UPDATE") => Target::PvUpdate,
            ("", "Pod" | "PersistentVolumeClaim" | "PersistentVolume" | "Binding", _, _)
            | ("policy", "Eviction", _, _) => Target::Other,
            _ => Target::Unknown,
        }
    }

    /// The rules that judge this request, in the order they run.
    fn rules(self) -> &'static [Rule] {
        match self {
            Target::PodCreate => &[Rule::PodOnTerminatingClaim, Rule::RwoSingleNode],
            Target::PodDelete | Target::PodEviction => &[Rule::ForceDelete],
            Target::PodBinding => &[Rule::RwoSingleNode],
            Target::PvcCreate => &[Rule::PvcFinalizer, Rule::BindingToTerminatingVolume],
            Target::PvcUpdate => &[Rule::FinalizerRemoval, Rule::BindingToTerminatingVolume],
            Target::PvCreate => &[Rule::PvFinalizer],
            Target::PvUpdate => &[Rule::FinalizerRemoval],
            Target::Other | Target::Unknown => &[],
        }
    }
}

/// The answer to one request: the decision, the rule that made it (none when no rule applied),
/// and whether the kind was one volguard has no rule for.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub decision: Decision,
    pub rule: Option<Rule>,
    pub unknown_kind: bool,
}

/// At most this many distinct unknown kinds are remembered (and logged); the kind strings come
/// from callers, so the set must not grow without bound (rules.md §2e).
pub const MAX_UNKNOWN_KINDS: usize = 32;

pub struct Admission {
    pub cluster: Cluster,
    pub policy: ForceDeletePolicy,
    /// Usernames of volguard's own controller (exempt from the finalizer guard).
    pub own_controllers: Vec<String>,
    pub enforcement: Enforcement,
    /// `--rwo-guard=off` turns rules.md §2f off.
    pub rwo_guard: bool,
    unknown_kinds: Mutex<HashSet<String>>,
}

impl Admission {
    pub fn new(cluster: Cluster, policy: ForceDeletePolicy, own_controllers: Vec<String>) -> Self {
        Admission {
            cluster,
            policy,
            own_controllers,
            enforcement: Enforcement::default(),
            rwo_guard: true,
            unknown_kinds: Mutex::new(HashSet::new()),
        }
    }

    pub fn with_enforcement(mut self, enforcement: Enforcement) -> Self {
        self.enforcement = enforcement;
        self
    }

    pub fn with_rwo_guard(mut self, on: bool) -> Self {
        self.rwo_guard = on;
        self
    }

    /// Decide within `budget`: every applicable rule in order; the first denial wins, warnings
    /// and the patch of the mutating rule are collected.
    pub async fn decide(&self, endpoint: Endpoint, req: &Request<'_>, budget: Duration) -> Verdict {
        let deadline = Instant::now() + budget;
        let target = Target::of(req);
        let rules: Vec<Rule> = target
            .rules()
            .iter()
            .copied()
            .filter(|r| endpoint.admits(*r))
            .collect();
        if rules.is_empty() {
            let unknown = target == Target::Unknown;
            let d = match (unknown, endpoint) {
                (true, _) => self.unknown_kind(req),
                // A rule's own path called for a request it does not judge: the webhook entry's
                // rules are wider than the rule (a configuration mistake, harmless).
                (false, Endpoint::Rule(_)) => Decision::allow("not-this-rule"),
                (false, _) => Decision::allow("no-rule"),
            };
            return Verdict {
                decision: d,
                rule: None,
                unknown_kind: unknown,
            };
        }
        let mut warnings = Vec::new();
        let mut allowed: Vec<(Rule, Decision)> = Vec::new();
        for rule in rules {
            let judged =
                match tokio::time::timeout_at(deadline, self.judge(rule, target, req)).await {
                    Ok(Ok(d) | Err(d)) => d,
                    Err(_) => late(rule, budget),
                };
            let mut d = self.enforcement.apply(rule, judged);
            if !d.allowed {
                d.warnings.splice(0..0, warnings);
                return Verdict {
                    decision: d,
                    rule: Some(rule),
                    unknown_kind: false,
                };
            }
            warnings.append(&mut d.warnings);
            allowed.push((rule, d));
        }
        // All allowed: report the decision worth reporting: a warned denial, else the one that
        // patched, else the first rule's (the request's primary rule); warnings of all rules.
        let pick = allowed
            .iter()
            .position(|(_, d)| d.warned)
            .or_else(|| allowed.iter().position(|(_, d)| d.patch.is_some()))
            .unwrap_or(0);
        let (rule, mut d) = allowed.swap_remove(pick);
        d.warnings = warnings;
        Verdict {
            decision: d,
            rule: Some(rule),
            unknown_kind: false,
        }
    }

    /// The answer when the whole decision ran out of time (the server's backstop): Fail if any
    /// rule that judges this request is registered Fail, else allowed with a warning.
    pub fn late_verdict(&self, endpoint: Endpoint, req: &Request<'_>, budget: Duration) -> Verdict {
        let rules: Vec<Rule> = Target::of(req)
            .rules()
            .iter()
            .copied()
            .filter(|r| endpoint.admits(*r))
            .collect();
        let rule = rules
            .iter()
            .copied()
            .find(|r| r.failure_policy() == FailurePolicy::Fail)
            .or(rules.first().copied());
        let decision = match rule {
            Some(r) => self.enforcement.apply(r, late(r, budget)),
            None => Decision::allow("no-rule"),
        };
        Verdict {
            decision,
            rule,
            unknown_kind: false,
        }
    }

    /// The metric label for an unknown kind: the kind itself while it is one of the first
    /// `MAX_UNKNOWN_KINDS` seen, else `other` (callers choose the strings; labels stay bounded).
    pub fn unknown_kind_label(&self, req: &Request<'_>) -> String {
        let key = format!("{}/{}", req.kind.group, req.kind.kind);
        let known = self
            .unknown_kinds
            .lock()
            .map(|s| s.contains(&key))
            .unwrap_or(false);
        if known {
            req.kind.kind.to_string()
        } else {
            "other".to_string()
        }
    }

    /// rules.md §2e: allowed; a configuration mistake worth one log line per kind (bounded).
    fn unknown_kind(&self, req: &Request<'_>) -> Decision {
        let first = self
            .unknown_kinds
            .lock()
            .map(|mut s| {
                if s.len() >= MAX_UNKNOWN_KINDS {
                    return false;
                }
                let key = format!("{}/{}", req.kind.group, req.kind.kind);
                s.insert(key)
            })
            .unwrap_or(false);
        if first {
            tracing::warn!(group = %req.kind.group, kind = %req.kind.kind,
                "webhook called for a kind volguard has no rule for; check the webhook configuration");
        }
        Decision::allow("unknown-kind")
    }

    async fn judge(
        &self,
        rule: Rule,
        target: Target,
        req: &Request<'_>,
    ) -> Result<Decision, Decision> {
        match (rule, target) {
            (Rule::PvcFinalizer, _) => {
                let pvc = object::<Pvc>(&req.object, "object")?;
                Ok(protect::protect_on_create(&pvc.metadata, PVC_FINALIZER))
            }
            (Rule::PvFinalizer, _) => {
                let pv = object::<Pv>(&req.object, "object")?;
                Ok(protect::protect_on_create(&pv.metadata, PV_FINALIZER))
            }
            (Rule::PodOnTerminatingClaim, _) => self.pod_create(req).await,
            (Rule::RwoSingleNode, Target::PodBinding) => self.rwo_binding(req).await,
            (Rule::RwoSingleNode, _) => self.rwo_pod_create(req).await,
            (Rule::ForceDelete, Target::PodEviction) => self.eviction(req).await,
            (Rule::ForceDelete, _) => self.pod_delete(req).await,
            (Rule::FinalizerRemoval, Target::PvUpdate) => self.pv_finalizer(req),
            (Rule::FinalizerRemoval, _) => self.pvc_finalizer(req).await,
            (Rule::BindingToTerminatingVolume, _) => self.pvc_binding(req).await,
        }
    }

    /// The claims of `pod` with the PVC each names: from the cache, and the misses read live in
    /// parallel (one slow read must not add up over claims).
    async fn claim_facts(&self, pod: &Pod) -> Vec<(crate::rules::claims::Claim, Fact<Arc<Pvc>>)> {
        let ns = &pod.metadata.namespace;
        let claims: Vec<_> = claims_of(pod).collect();
        let mut facts: Vec<Option<Fact<Arc<Pvc>>>> = claims
            .iter()
            .map(|c| self.cluster.pvc_cached(ns, &c.name))
            .collect();
        let misses: Vec<usize> = (0..facts.len()).filter(|i| facts[*i].is_none()).collect();
        if !misses.is_empty() {
            let read = futures::future::join_all(
                misses
                    .iter()
                    .map(|&i| self.cluster.pvc(ns, &claims[i].name)),
            )
            .await;
            for (i, f) in misses.into_iter().zip(read) {
                facts[i] = Some(f);
            }
        }
        claims
            .into_iter()
            .zip(facts)
            .map(|(c, f)| (c, f.unwrap_or(Fact::Missing)))
            .collect()
    }

    async fn pod_create(&self, req: &Request<'_>) -> Result<Decision, Decision> {
        let mut pod = object::<Pod>(&req.object, "object")?;
        fill_namespace(&mut pod, req);
        let facts = self.claim_facts(&pod).await;
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
        Ok(self.force_delete(req, &pod, grace).await)
    }

    /// rules.md §2d "Eviction is a delete too": the apiserver deletes an evicted pod without calling
    /// pod DELETE webhooks, so the Eviction's own deleteOptions are judged by the same rows.
    async fn eviction(&self, req: &Request<'_>) -> Result<Decision, Decision> {
        let ev = object::<Eviction>(&req.object, "object")?;
        let grace = ev
            .delete_options
            .as_ref()
            .and_then(|o| o.grace_period_seconds);
        if !is_force(grace) {
            return Ok(Decision::allow("graceful-delete"));
        }
        let (ns, name) = name_of(&ev.metadata, req);
        let pod = match self.cluster.pod(&ns, &name).await {
            Fact::Found(p) => p,
            // Nothing to force-delete; the apiserver answers 404 itself.
            Fact::Missing => return Ok(Decision::allow("eviction-pod-missing")),
            Fact::Unknown(e) => {
                return Ok(Decision::unavailable(
                    "force-delete-pod-unknown",
                    format!(
                        "eviction of pod {name:?} with gracePeriodSeconds 0 refused: volguard could not \
                         read the pod ({e}). Retry, or evict without a grace period of 0"
                    ),
                ));
            }
        };
        tracing::debug!(pod = %name, grace_period_seconds = ?grace, "pod eviction seen");
        Ok(self.force_delete(req, &pod, grace).await)
    }

    async fn force_delete(&self, req: &Request<'_>, pod: &Pod, grace: Option<i64>) -> Decision {
        // The node is only read when the cheap rows did not decide (force delete of a scheduled pod).
        let node = match pod.node_name() {
            Some(n) if is_force(grace) => self.cluster.node(n).await,
            _ => Fact::Missing,
        };
        force_delete::pod_delete(&req.user_info, pod, grace, deref(&node), &self.policy)
    }

    /// rules.md §2c, judged on the stored object (`oldObject`): a patch that nulls `finalizers` and
    /// `ownerReferences` together must not make an owned ephemeral claim look unowned.
    async fn pvc_finalizer(&self, req: &Request<'_>) -> Result<Decision, Decision> {
        let new = object::<Pvc>(&req.object, "object")?;
        let mut old = object::<Pvc>(&req.old_object, "oldObject")?;
        fill_namespace(&mut old, req);
        if let Some(d) = self.needs_no_use_check(req, &old.metadata, &new.metadata, PVC_FINALIZER) {
            return Ok(d);
        }
        let pods = self.cluster.pods_consistent(&old.metadata.namespace).await;
        Ok(finalizer_guard::pvc_finalizer_removal(
            &old,
            pods.as_ref().map(Vec::as_slice),
        ))
    }

    fn pv_finalizer(&self, req: &Request<'_>) -> Result<Decision, Decision> {
        let new = object::<Pv>(&req.object, "object")?;
        let old = object::<Pv>(&req.old_object, "oldObject")?;
        if let Some(d) = self.needs_no_use_check(req, &old.metadata, &new.metadata, PV_FINALIZER) {
            return Ok(d);
        }
        Ok(finalizer_guard::pv_finalizer_removal(&old, &new))
    }

    /// The answer when a finalizer update needs no look at use: it keeps `finalizer`, or the
    /// caller (or the object's break-glass annotation) is exempt.
    fn needs_no_use_check(
        &self,
        req: &Request<'_>,
        old: &Meta,
        new: &Meta,
        finalizer: &str,
    ) -> Option<Decision> {
        if !finalizer_guard::strips(old, new, finalizer) {
            return Some(Decision::allow(if finalizer == PVC_FINALIZER {
                "keeps-pvc-finalizer"
            } else {
                "keeps-pv-finalizer"
            }));
        }
        let why = finalizer_guard::exempt(&req.user_info, &self.own_controllers, old, new)?;
        tracing::info!(exemption = %why, "protection finalizer removal allowed");
        Some(Decision::allow(why.rule()))
    }

    async fn pvc_binding(&self, req: &Request<'_>) -> Result<Decision, Decision> {
        let mut new = object::<Pvc>(&req.object, "object")?;
        fill_namespace(&mut new, req);
        let old = match &*req.operation {
            "UPDATE" => Some(object::<Pvc>(&req.old_object, "oldObject")?),
            _ => None,
        };
        Ok(match binding::newly_bound_volume(old.as_deref(), &new) {
            Some(pv_name) => {
                let pv = self.cluster.pv(pv_name).await;
                binding::pvc_binding(&new, pv_name, deref(&pv))
            }
            None => Decision::allow("no-new-binding"),
        })
    }

    /// rules.md §2f for the scheduler's bind (`pods/binding`).
    async fn rwo_binding(&self, req: &Request<'_>) -> Result<Decision, Decision> {
        if !self.rwo_guard {
            return Ok(Decision::allow("rwo-guard-off"));
        }
        let b = object::<Binding>(&req.object, "object")?;
        let (ns, name) = name_of(&b.metadata, req);
        let pod = match self.cluster.pod(&ns, &name).await {
            Fact::Found(p) => p,
            Fact::Missing => return Ok(Decision::allow("binding-pod-missing")),
            Fact::Unknown(e) => {
                return Ok(Decision::allow("rwo-unknown").with_warning(format!(
                    "volguard could not read pod {name:?} to check its ReadWriteOnce claims ({e})"
                )));
            }
        };
        Ok(self.rwo_place(&pod, &b.target.name).await)
    }

    /// rules.md §2f for a pod created with `spec.nodeName` already set (no scheduler involved).
    async fn rwo_pod_create(&self, req: &Request<'_>) -> Result<Decision, Decision> {
        if !self.rwo_guard {
            return Ok(Decision::allow("rwo-guard-off"));
        }
        let mut pod = object::<Pod>(&req.object, "object")?;
        fill_namespace(&mut pod, req);
        let Some(node) = pod.node_name().map(str::to_string) else {
            return Ok(Decision::allow("not-placed"));
        };
        Ok(self.rwo_place(&pod, &node).await)
    }

    async fn rwo_place(&self, pod: &Pod, node: &str) -> Decision {
        let ns = &pod.metadata.namespace;
        let claims = self.claim_facts(pod).await;
        // Holders are only looked up for RWO claims; their nodes only when they sit elsewhere.
        let mut others: Vec<Vec<Holding>> = Vec::new();
        for (claim, pvc) in &claims {
            let mut list = Vec::new();
            if let Fact::Found(p) = pvc
                && p.is_rwo()
            {
                let pods = match self.cluster.pods_naming(ns, &claim.name).await {
                    Fact::Found(pods) => pods,
                    Fact::Missing => Vec::new(),
                    Fact::Unknown(e) => {
                        return Decision::allow("rwo-unknown").with_warning(format!(
                            "volguard could not find the pods using ReadWriteOnce claim {:?} ({e})",
                            claim.name
                        ));
                    }
                };
                for other in pods {
                    let elsewhere = other.metadata.name != pod.metadata.name
                        && !other.is_terminal()
                        && other.node_name().is_some_and(|n| n != node);
                    if elsewhere {
                        let n = other.node_name().unwrap_or_default().to_string();
                        let fact = self.cluster.node(&n).await;
                        list.push((other, fact));
                    }
                }
            }
            others.push(list);
        }
        let facts: Vec<ClaimFacts<'_>> = claims
            .iter()
            .zip(&others)
            .map(|((claim, pvc), others)| ClaimFacts {
                claim: claim.clone(),
                pvc: deref(pvc),
                others: others.iter().map(|(p, n)| (p.as_ref(), deref(n))).collect(),
            })
            .collect();
        rwo::place(pod, node, &facts)
    }
}

/// Another pod naming a claim, with its node as read.
type Holding = (Arc<Pod>, Fact<Arc<crate::model::Node>>);

/// What a rule answers when its facts did not arrive in time (rules.md "Deciding late or without
/// facts"): the same as the apiserver would if volguard were down.
fn late(rule: Rule, budget: Duration) -> Decision {
    match rule.failure_policy() {
        FailurePolicy::Ignore => Decision::allow("late").with_warning(format!(
            "volguard could not check {} within {budget:?}; allowed as if volguard were unavailable",
            rule.name()
        )),
        FailurePolicy::Fail => Decision::unavailable(
            "late",
            format!(
                "volguard could not decide {} within {budget:?}: refused, since it guards against data \
                 loss; retry",
                rule.name()
            ),
        ),
    }
}

/// One embedded object; a missing or malformed object is the caller's mistake (400).
fn object<'r, T: EmbeddedKind>(e: &'r Embedded<'_>, field: &str) -> Result<Cow<'r, T>, Decision> {
    e.get(field).map_err(Decision::bad_request)
}

/// The pod a subresource request is about: the object's name/namespace, else the request's.
fn name_of(meta: &Meta, req: &Request<'_>) -> (String, String) {
    let ns = if meta.namespace.is_empty() {
        req.namespace.as_deref().unwrap_or_default().to_string()
    } else {
        meta.namespace.clone()
    };
    let name = if meta.name.is_empty() {
        req.name.as_deref().unwrap_or_default().to_string()
    } else {
        meta.name.clone()
    };
    (ns, name)
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

fn deref<T>(f: &Fact<Arc<T>>) -> Fact<&T> {
    f.as_ref().map(|a| a.as_ref())
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
