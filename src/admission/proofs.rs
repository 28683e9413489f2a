//! The facts of what a person marks or confirms (rules.md §8, §2i): who sets a proof and its
//! stamp, on any kind and path, and deletion protection with what stands behind a claim.

use super::context::Admission;
use super::objects::{deref, fill_namespace, object};
use super::review::{Embedded, Request};
use crate::model::{Meta, Pv, Pvc};
use crate::rules::{Decision, Fact};
use crate::state::query;
use crate::state::{Fresh, PodsIn, Readable};
use std::borrow::Cow;
use std::sync::Arc;

/// rules.md §8: a proof is judged when it is written. The setter of a confirmation is
/// asked of the authorizer with their own groups; a NodeFence's record and status are
/// volguard's alone.
pub(super) async fn proof(cx: &Admission, req: &Request<'_>) -> Result<Decision, Decision> {
    use crate::rules::proof::{self, BreakGlass};
    let fence = req.kind.group == crate::model::fence::GROUP;
    if fence && !cx.own_identities.contains(&req.user_info.username) {
        let new = object::<crate::model::fence::NodeFence>(&req.object, "object")?;
        let old = match &*req.operation {
            "CREATE" => None,
            _ => Some(object::<crate::model::fence::NodeFence>(
                &req.old_object,
                "oldObject",
            )?),
        };
        if let Some(d) = proof::fence_record(&req.user_info, old.as_deref(), &new) {
            return Ok(d);
        }
    }
    let new = metadata(&req.object, "object")?;
    let old = match &*req.operation {
        "CREATE" => None,
        _ => Some(metadata(&req.old_object, "oldObject")?),
    };
    let set = proof::newly_set(old.as_deref(), &new, fence);
    let mut asked = Vec::with_capacity(set.len());
    if cx.break_glass == BreakGlass::Rbac && crate::rules::force_delete::is_human(&req.user_info) {
        for o in set {
            asked.push((o, super::break_glass::authority(cx, req, o).await));
        }
    }
    Ok(proof::judge(
        &req.user_info,
        &cx.own_identities,
        old.as_deref(),
        &new,
        fence,
        cx.break_glass,
        &asked,
    ))
}

/// rules.md §2i: deletion protection. A DELETE reads the stored object (and, for a
/// Namespace, its protected claims from the claim cache); an UPDATE compares old and new.
pub(super) async fn delete_protection(
    cx: &Admission,
    req: &Request<'_>,
) -> Result<Decision, Decision> {
    use crate::model::Namespace;
    use crate::rules::delete_protection::{self as dp, Kind};
    let delete = req.operation == "DELETE";
    let (kind, old, new) = match &*req.kind.kind {
        "PersistentVolumeClaim" => {
            let mut old = object::<Pvc>(&req.old_object, "oldObject")?;
            fill_namespace(&mut old, req);
            let new = match delete {
                true => None,
                false => Some(object::<Pvc>(&req.object, "object")?.metadata.clone()),
            };
            (Kind::Claim, old.metadata.clone(), new)
        }
        "PersistentVolume" => {
            let old = object::<Pv>(&req.old_object, "oldObject")?;
            let new = match delete {
                true => None,
                false => Some(object::<Pv>(&req.object, "object")?.metadata.clone()),
            };
            (Kind::Volume, old.metadata.clone(), new)
        }
        _ => {
            let old = object::<Namespace>(&req.old_object, "oldObject")?;
            let new = match delete {
                true => None,
                false => Some(object::<Namespace>(&req.object, "object")?.metadata.clone()),
            };
            (Kind::Namespace, old.metadata.clone(), new)
        }
    };
    if let Some(new) = new {
        if kind == Kind::Volume
            && let Some(d) = Box::pin(volume_outcome(cx, req)).await?
        {
            return Ok(d);
        }
        return Ok(dp::update(&req.user_info, kind, &old, &new));
    }
    // A claim's volume and namespace, read only when the claim itself is not protected (its
    // own mark refuses first).
    if kind == Kind::Claim
        && !dp::protected(&old)
        && let Some(d) = claim_behind(cx, req, &old).await?
    {
        return Ok(d);
    }
    let claims = match kind {
        Kind::Namespace => protected_claims(cx, &old.name),
        Kind::Claim | Kind::Volume => Fact::Missing,
    };
    Ok(dp::delete(kind, &old, claims.as_ref().map(Vec::as_slice)))
}

/// rules.md §2i "judged by outcome": a volume update after which the PV controller would
/// delete or recycle data someone relies on. Its facts are read only when the update changes
/// the policy or the claimRef: the claims named before and after (live), the pods using the
/// one bound to it (a consistent read) and its namespace.
async fn volume_outcome(cx: &Admission, req: &Request<'_>) -> Result<Option<Decision>, Decision> {
    use crate::rules::delete_protection as dp;
    let old = object::<Pv>(&req.old_object, "oldObject")?;
    let new = object::<Pv>(&req.object, "object")?;
    if !dp::touches_release(&old, &new) || !reclaims_on_release(&new) {
        return Ok(None);
    }
    let read = |r: Option<&crate::model::ClaimRef>| {
        let r = r.filter(|r| !r.name.is_empty()).cloned();
        async move {
            match r {
                Some(r) => {
                    cx.cluster
                        .read(Pvc::named(&r.namespace, &r.name, Fresh::Live))
                        .await
                }
                None => Fact::Missing,
            }
        }
    };
    let claim_before = read(old.spec.claim_ref.as_ref()).await;
    let claim_after = match old.spec.claim_ref == new.spec.claim_ref {
        true => claim_before.clone(),
        false => read(new.spec.claim_ref.as_ref()).await,
    };
    // The claim bound to this volume is the one whose data it holds.
    let bound = match &claim_before {
        Fact::Found(c) if c.spec.volume_name.as_deref() == Some(&*old.metadata.name) => {
            Some(c.clone())
        }
        _ => None,
    };
    let (users, namespace) = match &bound {
        Some(c) => {
            let users = cx
                .cluster
                .read(query::Pods(
                    PodsIn::Namespace(&c.metadata.namespace),
                    |p| crate::rules::in_use::pod_blocks_deletion(p, c),
                    Fresh::Live,
                ))
                .await;
            (
                users,
                cx.cluster
                    .read(query::Namespace(&c.metadata.namespace, Fresh::Live))
                    .await,
            )
        }
        None => (Fact::Missing, Fact::Missing),
    };
    let stake = dp::Stake {
        claim_before: deref(&claim_before),
        claim_after: deref(&claim_after),
        users: users.as_ref().map(Vec::as_slice),
        namespace: match &namespace {
            Fact::Found(n) => Fact::Found(&n.metadata),
            Fact::Missing => Fact::Missing,
            Fact::Unknown(e) => Fact::Unknown(e.clone()),
        },
    };
    Ok(dp::volume_update(&old, &new, &stake))
}

/// rules.md §2i: a claim's DELETE refused for its protected volume or namespace. Boxed: two
/// reads kept out of every review's future.
async fn claim_behind(
    cx: &Admission,
    req: &Request<'_>,
    old: &crate::model::Meta,
) -> Result<Option<Decision>, Decision> {
    use crate::rules::delete_protection as dp;
    let volume_name = match &req.old_object {
        Embedded::Pvc(p) => p.spec.volume_name.clone(),
        _ => object::<Pvc>(&req.old_object, "oldObject")?
            .spec
            .volume_name
            .clone(),
    };
    let (volume, namespace) = Box::pin(async {
        let volume = match volume_name.as_deref().filter(|v| !v.is_empty()) {
            Some(v) => cx.cluster.read(Pv::named("", v, Fresh::CacheOrLive)).await,
            // Bound from the volume's side only (its claimRef names this claim, the claim's
            // volumeName not yet set): the PV controller releases that volume when the claim
            // goes, as it would a fully bound one (rules.md §2i).
            None => volume_claiming(cx, old),
        };
        (
            volume,
            cx.cluster
                .read(query::Namespace(&old.namespace, Fresh::Live))
                .await,
        )
    })
    .await;
    let behind = dp::Behind {
        volume: deref(&volume),
        namespace: match &namespace {
            Fact::Found(n) => Fact::Found(&n.metadata),
            Fact::Missing => Fact::Missing,
            Fact::Unknown(e) => Fact::Unknown(e.clone()),
        },
    };
    Ok(dp::claim_behind(old, &behind))
}

/// The cached volume whose claimRef names the claim `claim` (by namespace, name and UID).
fn volume_claiming(cx: &Admission, claim: &Meta) -> Fact<Arc<Pv>> {
    cx.cluster
        .sweep::<Pv>(None)
        .into_iter()
        .find(|pv| {
            pv.spec.claim_ref.as_ref().is_some_and(|r| {
                r.namespace == claim.namespace
                    && r.name == claim.name
                    && r.uid.as_deref() == Some(&*claim.uid)
            })
        })
        .map_or(Fact::Missing, Fact::Found)
}

/// A namespace's protected claims, from the cache: the watch sees an annotation added before
/// the namespace's DELETE (a claim protected in the same instant may be missed; its own
/// DELETE is still refused by row 1).
fn protected_claims(cx: &Admission, namespace: &str) -> Fact<Vec<String>> {
    if !cx.cluster.synced() {
        return Fact::Unknown(crate::rules::decision::ReadError::Api {
            what: "the namespace's claims".into(),
            message: "the claim cache is not synced yet".into(),
        });
    }
    Fact::Found(
        cx.cluster
            .sweep::<Pvc>(Some(namespace))
            .iter()
            .filter(|p| crate::rules::delete_protection::protected(&p.metadata))
            .map(|p| p.metadata.name.clone())
            .collect(),
    )
}

/// The confirmation stamp of a CREATE or UPDATE of any kind (rules.md §8).
pub(super) fn stamp(
    req: &Request<'_>,
    expiry: Option<jiff::SignedDuration>,
) -> Result<Decision, Decision> {
    let new = metadata(&req.object, "object")?;
    let old = match &*req.operation {
        "CREATE" => None,
        _ => Some(metadata(&req.old_object, "oldObject")?),
    };
    let fence = req.kind.group == crate::model::fence::GROUP;
    // Seconds only: the time a person reads, and what the policies compare as a string.
    let at = expiry.map(|_| {
        jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .unwrap_or_default()
            .to_string()
    });
    Ok(crate::rules::stamp::stamp(
        &req.user_info,
        fence,
        old.as_deref(),
        &new,
        at.as_deref(),
    ))
}

/// The metadata of an embedded object of any kind (decoded in the review's pass, or raw).
fn metadata<'r>(e: &'r Embedded<'_>, field: &'static str) -> Result<Cow<'r, Meta>, Decision> {
    Ok(match e {
        Embedded::Pod(o) => Cow::Borrowed(&o.metadata),
        Embedded::Pvc(o) => Cow::Borrowed(&o.metadata),
        Embedded::Pv(o) => Cow::Borrowed(&o.metadata),
        Embedded::Node(o) => Cow::Borrowed(&o.metadata),
        // A Binding's annotations are what the apiserver copies onto the pod.
        Embedded::Binding(o) => Cow::Borrowed(&o.metadata),
        Embedded::Raw(raw) if kind_of(raw) == Some("Binding") => Cow::Owned(
            object::<crate::model::Binding>(e, field)?
                .into_owned()
                .metadata,
        ),
        _ => Cow::Owned(
            object::<crate::model::Namespace>(e, field)?
                .into_owned()
                .metadata,
        ),
    })
}

/// The `kind` an embedded raw object names (cheap: only that field is read).
fn kind_of(raw: &serde_json::value::RawValue) -> Option<&str> {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        kind: Option<&'a str>,
    }
    serde_json::from_str::<Kind<'_>>(raw.get()).ok()?.kind
}

/// A volume whose policy destroys its data once released: only then are its claims read.
fn reclaims_on_release(pv: &Pv) -> bool {
    matches!(
        pv.spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete" | "Recycle")
    )
}
