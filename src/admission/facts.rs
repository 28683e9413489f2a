//! The facts each rule needs, gathered from the cluster view, then the rule asked: the one place
//! between a request and a pure rule in `rules/`. `judge` hands each rule to the function of the
//! context (`Admission`) and the request that gathers its facts. Reads go to the caches first; a
//! miss is read live, and a fact that cannot be read is `Fact::Unknown`, which the rules treat as
//! in use.

use super::context::Admission;
use super::objects::{deref, fill_namespace, name_of, object};
use super::review::{Embedded, Request};
use crate::model::{
    Binding, DeleteOptions, Eviction, Meta, Node, PV_FINALIZER, PVC_FINALIZER, Pod, Pv, Pvc,
};
use crate::rules::claims::claims_of;
use crate::rules::finalizer_guard::{Look, Strip};
use crate::rules::force_delete::is_force;
use crate::rules::proof::{Key, Proof, Read};
use crate::rules::rule::{On, Rule};
use crate::rules::rwo_lock::{self, RwoLock, Via};
use crate::rules::{
    Decision, Fact, binding, finalizer_guard, force_delete, pod_create, pod_status, protect,
};
use crate::state::query;
use crate::state::{Fresh, PodsIn, Readable, View};
use futures::FutureExt;
use std::borrow::Cow;
use std::sync::Arc;

/// Live claim reads in flight for one request (the process-wide cap is `MAX_LIVE_READS`).
pub const MAX_CLAIM_READS: usize = 8;

/// Decide `rule` for a request of kind `on`: the function below that gathers the rule's facts
/// and asks it. Routing is the rule table's `on` column alone: one arm per rule (the compiler
/// holds the arms to `Rule`); a rule whose kinds of request need different facts (a claim or
/// a volume, a delete or an eviction) tells them apart by `on`. `Err` is an answer reached
/// before the rule ran (a malformed object), `Ok` the rule's own.
pub(super) async fn judge(
    cx: &Admission,
    rule: Rule,
    on: On,
    req: &Request<'_>,
    deadline: tokio::time::Instant,
) -> Result<Decision, Decision> {
    // Routing hands a rule only the requests its row names (`On::rules`); were that ever to
    // slip, the rule answers as if it could not decide.
    if !rule.def().on.contains(&on) {
        return Err(rule.undecided("unrouted", "for a request its row does not name"));
    }
    match rule {
        Rule::PvcFinalizer => protect_pvc(req).await,
        Rule::PvFinalizer => protect_pv(req).await,
        Rule::PodOnTerminatingClaim => pod_create(cx, req).await,
        // Boxed: two PVs (with their storage source) held inline made every rule's future
        // larger (`a_decision_future_stays_small_whatever_the_rule`).
        Rule::FinalizerRemoval => match on {
            On::PvUpdate | On::PvStatusUpdate => Box::pin(pv_finalizer(cx, req)).await,
            _ => pvc_finalizer(cx, req).await,
        },
        Rule::ClaimMetadata => claim_metadata(cx, req).await,
        Rule::BindingToTerminatingVolume => pvc_binding(cx, req).await,
        Rule::ForceDelete => match on {
            On::PodEviction => eviction(cx, req).await,
            _ => pod_delete(cx, req).await,
        },
        Rule::RwoSingleNode => match on {
            On::PodBinding => rwo_binding(cx, req, deadline).await,
            _ => rwo_pod_create(cx, req, deadline).await,
        },
        Rule::RwoPlacementHint => placement_hint(cx, req).await,
        Rule::PodStatus => pod_status(cx, req).await,
        Rule::ConfirmationStamp => super::proofs::stamp(req, cx.break_glass_expiry),
        Rule::Proof => Box::pin(super::proofs::proof(cx, req)).await,
        // Boxed: a Node carries what fencing reads (addresses, boot, volume lists), and held
        // inline across the live reads it made every rule's future larger.
        Rule::NodeDelete => Box::pin(super::nodes::node_delete(cx, req)).await,
        Rule::DeleteProtection => super::proofs::delete_protection(cx, req).await,
        Rule::OutOfServiceTaint => Box::pin(super::nodes::out_of_service(cx, req)).await,
    }
}

async fn protect_pvc(req: &Request<'_>) -> Result<Decision, Decision> {
    let pvc = object::<Pvc>(&req.object, "object")?;
    Ok(protect::pvc_on_create(&pvc.metadata, PVC_FINALIZER))
}

async fn protect_pv(req: &Request<'_>) -> Result<Decision, Decision> {
    let pv = object::<Pv>(&req.object, "object")?;
    Ok(protect::protect_on_create(&pv.metadata, PV_FINALIZER))
}

async fn pod_create(cx: &Admission, req: &Request<'_>) -> Result<Decision, Decision> {
    let mut pod = object::<Pod>(&req.object, "object")?;
    fill_namespace(&mut pod, req);
    let facts = claim_facts(&cx.cluster, &pod).await;
    let facts: Vec<_> = facts.iter().map(|(c, f)| (c.clone(), deref(f))).collect();
    Ok(pod_create::pod_create(&pod, &facts))
}

async fn pod_delete(cx: &Admission, req: &Request<'_>) -> Result<Decision, Decision> {
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
    Ok(Box::pin(force_delete(cx, req, &pod, grace, force_delete::pod_delete)).await)
}

/// rules.md §2d "Eviction is a delete too": the apiserver deletes an evicted pod without calling
/// pod DELETE webhooks, so the Eviction's own deleteOptions are judged by the same rows.
async fn eviction(cx: &Admission, req: &Request<'_>) -> Result<Decision, Decision> {
    let ev = object::<Eviction>(&req.object, "object")?;
    let grace = ev
        .delete_options
        .as_ref()
        .and_then(|o| o.grace_period_seconds);
    if !is_force(grace) {
        return Ok(Decision::allow("graceful-delete"));
    }
    let (ns, name) = name_of(&ev.metadata, req);
    let pod = match cx
        .cluster
        .read(Pod::named(&ns, &name, Fresh::CacheOrLive))
        .await
    {
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
    Ok(Box::pin(force_delete(
        cx,
        req,
        &pod,
        grace,
        force_delete::pod_eviction,
    ))
    .await)
}

/// `judge`: `force_delete::pod_delete` or `pod_eviction` (the same rows, their own words).
async fn force_delete(
    cx: &Admission,
    req: &Request<'_>,
    pod: &Pod,
    grace: Option<i64>,
    judge: ForceJudge,
) -> Decision {
    // The node is only read when the cheap rows did not decide (force delete of a scheduled pod).
    let mut node = match pod.node_name() {
        Some(n) if is_force(grace) => {
            cx.cluster
                .read(Node::named("", n, Fresh::CacheOrLive))
                .await
        }
        _ => Fact::Missing,
    };
    // Rows 4 and 5 allow: a cached out-of-service taint is confirmed live first (a cache miss
    // was already read live). A taint removed a moment ago must not let a force delete
    // through (kubernetes#142331 is this race in PodGC).
    if let (Some(n), Fact::Found(cached)) = (pod.node_name(), &node)
        && cached.is_out_of_service()
    {
        node = cx.cluster.read(Node::named("", n, Fresh::Live)).await;
    }
    let gone = match pod.node_name() {
        // Boxed: a read taken only for a node gone, kept out of every review's future.
        Some(n) if is_force(grace) => {
            Box::pin(crate::fencing::records::gone_record(
                &cx.cluster,
                n,
                &node,
                pod.metadata.creation_timestamp,
            ))
            .await
        }
        _ => None,
    };
    let gone = gone.as_deref();
    // rules.md §8: the pod's confirmation counts only as the proof reader finds it.
    let confirmed = match is_force(grace) {
        true => super::break_glass::proofs(cx).read(&pod.metadata, Key::ConfirmForceDelete),
        false => Read::Absent,
    };
    let d = judge(
        &req.user_info,
        pod,
        grace,
        deref(&node),
        gone,
        &cx.policy,
        confirmed.proof(),
    );
    with_warning(d, confirmed.ignored().map(str::to_string))
}

/// rules.md §2h: the node is read as the apiserver has it now (its out-of-service taint lets
/// the new phase through, as in §2d rows 4-5).
async fn pod_status(cx: &Admission, req: &Request<'_>) -> Result<Decision, Decision> {
    let old = object::<Pod>(&req.old_object, "oldObject")?;
    let new = object::<Pod>(&req.object, "object")?;
    let states = |e: &Embedded<'_>, field| match e {
        Embedded::Raw(raw) => serde_json::from_str::<crate::model::ContainerStates>(raw.get())
            .map(Some)
            .map_err(|e| Decision::bad_request(format!("request.{field}: {e}"))),
        // Decoded in the review's pass (a body that names the subresource after the objects,
        // which the apiserver never writes): the states are unknown.
        _ => Ok(None),
    };
    // Judged by outcome (rules.md §2h, §10): does the attach/detach controller's own "pod
    // terminated" (upstream's `IsPodTerminated`, over init, regular and ephemeral containers)
    // turn true with this write? Asked of the pod as deleted, since anyone may start a
    // graceful delete, after which the containers' states alone decide.
    let stops = match (
        states(&req.old_object, "oldObject")?,
        states(&req.object, "object")?,
    ) {
        (Some(before), Some(after)) => {
            let ended = |pod: &Pod, states| {
                let mut deleted = pod.clone();
                deleted
                    .metadata
                    .deletion_timestamp
                    .get_or_insert_with(|| "assumed".into());
                crate::rules::upstream::is_pod_terminated(&deleted, states)
            };
            !ended(&old, &before) && ended(&new, &after)
        }
        // Unsure is an end (rules.md: when unsure, in use): judged by the rows below.
        _ => true,
    };
    let ends = (new.is_terminal() || stops) && !old.is_terminal();
    let confirmed = match ends {
        true => super::break_glass::proofs(cx).read(&old.metadata, Key::ConfirmForceDelete),
        false => Read::Absent,
    };
    let (node, gone) = match old.node_name() {
        Some(n) if ends => {
            // Boxed: both reads in one future, kept out of every review's future.
            Box::pin(async {
                let node = cx.cluster.read(Node::named("", n, Fresh::Live)).await;
                let gone = crate::fencing::records::gone_record(
                    &cx.cluster,
                    n,
                    &node,
                    old.metadata.creation_timestamp,
                )
                .await;
                (node, gone)
            })
            .await
        }
        _ => (Fact::Missing, None),
    };
    Ok(with_warning(
        pod_status::pod_status_update(
            &req.user_info,
            &old,
            &new,
            deref(&node),
            gone.as_deref(),
            stops,
            confirmed.proof(),
        ),
        confirmed.ignored().map(str::to_string),
    ))
}

/// rules.md §2c, judged on the stored object (`oldObject`): a patch that nulls `finalizers` and
/// `ownerReferences` together must not make an owned ephemeral claim look unowned.
async fn pvc_finalizer(cx: &Admission, req: &Request<'_>) -> Result<Decision, Decision> {
    let new = object::<Pvc>(&req.object, "object")?;
    let mut old = object::<Pvc>(&req.old_object, "oldObject")?;
    fill_namespace(&mut old, req);
    let strip = finalizer_look(cx, req, &*old, &*new)?;
    // A user the cache holds refuses at once: a refusal needs no proof (a stale entry only
    // delays the strip until the cache catches up), so the consistent LIST is read only to
    // prove a claim unused. In a namespace of 20,000 pods on a saturated apiserver that LIST
    // outlasted the decide budget (make bench-scale), and a strip was refused "could not
    // list" instead of naming its pod.
    let (ns, name) = (&old.metadata.namespace, &old.metadata.name);
    if let Fact::Found(cached) = cx
        .cluster
        .read(query::PodsNaming(ns, name, Fresh::Cache))
        .await
    {
        let blocking: Vec<Pod> = cached
            .iter()
            .filter(|p| strip.blocks(p))
            .map(|p| (**p).clone())
            .collect();
        if !blocking.is_empty() {
            return Ok(strip.judge(Fact::Found(&blocking[..])));
        }
    }
    // Only the pods that block are kept while the pages stream by.
    let pods = cx
        .cluster
        .read(query::Pods(
            PodsIn::Namespace(ns),
            |p| strip.blocks(p),
            Fresh::Live,
        ))
        .await;
    Ok(strip.judge(pods.as_ref().map(Vec::as_slice)))
}

/// rules.md §2f / §3: who changed the lock annotation or a mounted ephemeral claim's owner.
async fn claim_metadata(cx: &Admission, req: &Request<'_>) -> Result<Decision, Decision> {
    let new = object::<Pvc>(&req.object, "object")?;
    // At CREATE nothing was stored: a lock the claim carries is being written.
    let mut old = match &*req.operation {
        "CREATE" => Cow::Owned(Pvc {
            metadata: Meta {
                name: new.metadata.name.clone(),
                ..Default::default()
            },
            ..Default::default()
        }),
        _ => object::<Pvc>(&req.old_object, "oldObject")?,
    };
    fill_namespace(&mut old, req);
    let confirmed = match old.metadata.annotation(rwo_lock::RWO_LOCK)
        != new.metadata.annotation(rwo_lock::RWO_LOCK)
    {
        true => super::break_glass::proofs(cx).read(&old.metadata, Key::AllowLockRemoval),
        false => Read::Absent,
    };
    let pod = match crate::rules::claim_metadata::owner_changed(&old, &new) {
        Some(owner) => {
            cx.cluster
                .read(Pod::named(
                    &old.metadata.namespace,
                    &owner.name,
                    Fresh::CacheOrLive,
                ))
                .await
        }
        None => Fact::Missing,
    };
    Ok(with_warning(
        crate::rules::claim_metadata::claim_update(
            &req.user_info,
            &cx.own_identities,
            &old,
            &new,
            deref(&pod),
            confirmed.proof(),
        ),
        confirmed.ignored().map(str::to_string),
    ))
}

async fn pv_finalizer(cx: &Admission, req: &Request<'_>) -> Result<Decision, Decision> {
    let new = object::<Pv>(&req.object, "object")?;
    let old = object::<Pv>(&req.old_object, "oldObject")?;
    let strip = finalizer_look(cx, req, &*old, &*new)?;
    let claim = match strip.claim_ref() {
        Some(r) => {
            cx.cluster
                .read(Pvc::named(&r.namespace, &r.name, Fresh::Live))
                .await
        }
        None => Fact::Missing,
    };
    Ok(strip.judge(deref(&claim)))
}

/// The finalizer guard's first look (rules.md §2c), with this request's caller and proofs: the
/// strip to judge on what it names, or (`Err`) the answer already given.
fn finalizer_look<'a, T: finalizer_guard::Protected>(
    cx: &Admission,
    req: &Request<'_>,
    old: &'a T,
    new: &'a T,
) -> Result<Strip<'a, T>, Decision> {
    let proofs = super::break_glass::proofs(cx);
    match finalizer_guard::look(&req.user_info, &cx.own_controllers, &proofs, old, new) {
        Look::Decided(d) => Err(d),
        Look::Exempt(why, d) => {
            tracing::info!(exemption = %why, "protection finalizer removal allowed");
            Err(d)
        }
        Look::Strip(strip) => Ok(strip),
    }
}

async fn pvc_binding(cx: &Admission, req: &Request<'_>) -> Result<Decision, Decision> {
    let mut new = object::<Pvc>(&req.object, "object")?;
    fill_namespace(&mut new, req);
    let old = match &*req.operation {
        "UPDATE" => Some(object::<Pvc>(&req.old_object, "oldObject")?),
        _ => None,
    };
    Ok(match binding::newly_bound_volume(old.as_deref(), &new) {
        Some(pv_name) => {
            let pv = cx
                .cluster
                .read(Pv::named("", pv_name, Fresh::CacheOrLive))
                .await;
            binding::pvc_binding(&new, pv_name, deref(&pv))
        }
        None => Decision::allow("no-new-binding"),
    })
}

/// rules.md §2f for a pod created with `spec.nodeName` already set (no scheduler involved).
async fn rwo_pod_create(
    cx: &Admission,
    req: &Request<'_>,
    deadline: tokio::time::Instant,
) -> Result<Decision, Decision> {
    if !cx.rwo_guard {
        return Ok(Decision::allow("rwo-guard-off"));
    }
    let mut pod = object::<Pod>(&req.object, "object")?;
    fill_namespace(&mut pod, req);
    let Some(node) = pod.node_name().map(str::to_string) else {
        return Ok(Decision::allow("not-placed"));
    };
    let dry_run = req.dry_run.unwrap_or(false);
    Ok(Box::pin(cx.locks.place(&pod, &node, Via::Create, dry_run, deadline)).await)
}

/// rules.md §2f for the scheduler's bind (`pods/binding`).
async fn rwo_binding(
    cx: &Admission,
    req: &Request<'_>,
    deadline: tokio::time::Instant,
) -> Result<Decision, Decision> {
    if !cx.rwo_guard {
        return Ok(Decision::allow("rwo-guard-off"));
    }
    let b = object::<Binding>(&req.object, "object")?;
    let (ns, name) = name_of(&b.metadata, req);
    // A binding without a UID (the legacy `bindings` resource, a hand-made one; the scheduler
    // always names the UID) binds whichever pod holds the name when it lands: judged on the
    // pod read live, and locked as a create is, naming no UID, so that a pod of that name
    // missing or replaced proves nothing until the grace has passed (adversary review).
    let uidless = b.metadata.uid.is_empty();
    let mut pod = match uidless {
        true => cx.cluster.read(Pod::named(&ns, &name, Fresh::Live)).await,
        false => {
            cx.cluster
                .read(Pod::named(&ns, &name, Fresh::CacheOrLive))
                .await
        }
    };
    // The bind names the pod's UID: a cached pod of that name with another UID is an older
    // pod (recreated, or a lagging cache), whose claims are not this pod's. Read it live.
    if let Fact::Found(p) = &pod
        && !uidless
        && p.metadata.uid != b.metadata.uid
    {
        pod = cx.cluster.read(Pod::named(&ns, &name, Fresh::Live)).await;
    }
    let pod = match pod {
        Fact::Found(p) => p,
        Fact::Missing => return Ok(Decision::allow("binding-pod-missing")),
        Fact::Unknown(e) => {
            return Ok(crate::rules::rwo::unknown(format!(
                "volguard could not read pod {name:?} to check its ReadWriteOnce claims ({e})"
            )));
        }
    };
    // Boxed (here and in `rwo_pod_create`): placing holds the lock's write, a ~2.5 KB future;
    // inline it would size every rule's future, and every review moves that future (the pod
    // reviews' L1 data misses rose 273 → 433 per request with it inline).
    let (pod, via) = match uidless {
        true => {
            let mut p = (*pod).clone();
            p.metadata.uid = Default::default();
            (Arc::new(p), Via::Create)
        }
        false => (pod, Via::Bind),
    };
    let dry_run = req.dry_run.unwrap_or(false);
    Ok(Box::pin(cx.locks.place(&pod, &b.target.name, via, dry_run, deadline)).await)
}

/// rules.md §2f placement hint: the nodes that hold the pod's RWO claims, from the locks on
/// the claims (the caches suffice: the hint is a preference, never a guard).
async fn placement_hint(cx: &Admission, req: &Request<'_>) -> Result<Decision, Decision> {
    if !cx.rwo_guard {
        return Ok(Decision::allow("rwo-guard-off"));
    }
    let mut pod = object::<Pod>(&req.object, "object")?;
    fill_namespace(&mut pod, req);
    if pod.node_name().is_some() {
        return Ok(Decision::allow("placed"));
    }
    let claims = claim_facts(&cx.cluster, &pod).await;
    let mut nodes: Vec<String> = claims
        .iter()
        .filter_map(|(_, pvc)| match pvc {
            Fact::Found(p) if p.is_rwo() => RwoLock::of(p).map(|l| l.node),
            _ => None,
        })
        .collect();
    nodes.sort();
    nodes.dedup();
    let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
    Ok(crate::rules::placement::placement_hint(&pod, &nodes))
}

/// The claims of `pod` with the PVC each names: from the cache, and the misses read live in
/// parallel (one slow read must not add up over claims).
pub(super) async fn claim_facts(
    view: &View,
    pod: &Pod,
) -> Vec<(crate::rules::claims::Claim, Fact<Arc<Pvc>>)> {
    let ns = &pod.metadata.namespace;
    let claims: Vec<_> = claims_of(pod).collect();
    // A cache read answers at once (`now_or_never`: no future kept per claim); anything
    // but a hit is read again below, confirmed live.
    let mut facts: Vec<Option<Fact<Arc<Pvc>>>> = claims
        .iter()
        .map(|c| {
            match view
                .read(Pvc::named(ns, &c.name, Fresh::Cache))
                .now_or_never()
            {
                Some(Fact::Found(p)) => Some(Fact::Found(p)),
                _ => None,
            }
        })
        .collect();
    let misses: Vec<usize> = (0..facts.len()).filter(|i| facts[*i].is_none()).collect();
    if !misses.is_empty() {
        // At most MAX_CLAIM_READS in flight for one request: a pod naming thousands of
        // missing claims must not open thousands of reads (the decision budget bounds the rest).
        // Chunks, not a `buffered` stream: that one's future is not provably `Send` for all
        // lifetimes in axum's handler (rustc's higher-ranked `Send` limitation).
        let mut read = Vec::with_capacity(misses.len());
        for chunk in misses.chunks(MAX_CLAIM_READS) {
            read.extend(
                futures::future::join_all(
                    chunk
                        .iter()
                        .map(|&i| view.read(Pvc::named(ns, &claims[i].name, Fresh::CacheOrLive))),
                )
                .await,
            );
        }
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

/// `d`, with the warning that an override did not count, when one did not.
pub(super) fn with_warning(d: Decision, warning: Option<String>) -> Decision {
    match warning {
        Some(w) => d.with_warning(w),
        None => d,
    }
}

/// `force_delete::pod_delete` or `force_delete::pod_eviction`.
type ForceJudge = fn(
    &crate::model::UserInfo,
    &Pod,
    Option<i64>,
    Fact<&Node>,
    Option<&str>,
    &force_delete::ForceDeletePolicy,
    Option<&Proof>,
) -> Decision;
