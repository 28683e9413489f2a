//! The facts of the node guards (rules.md §7): a taint or a confirmation judged against the
//! node's heartbeat, a Node's deletion against its pods and records, a release recorded before
//! it is allowed, and "node gone" read from the records that prove it.

use super::context::Admission;
use super::facts::with_warning;
use super::objects::{deref, object};
use super::review::Request;
use crate::model::Node;
use crate::model::fence::{FENCE_INCIDENT, Release, ReleaseAction};
use crate::rules::proof::{self, Key, Read};
use crate::rules::{Decision, Fact, node_taint};
use crate::state::query;
use crate::state::{FencesOf, Fresh, PodsIn, ReleaseRecord};

/// rules.md §7 guards: the incident is read live, and only for volguard's own controller; a
/// confirmation or a taint is judged against the node's heartbeat (a live read of its Lease,
/// its stored Ready condition); a trusted remediator's taint is recorded as a release.
pub(super) async fn out_of_service(
    cx: &Admission,
    req: &Request<'_>,
) -> Result<Decision, Decision> {
    let new = object::<Node>(&req.object, "object")?;
    // At CREATE there is nothing before: a taint or confirmation present is being added.
    let old = match &*req.operation {
        "CREATE" => std::borrow::Cow::Owned(Node {
            metadata: crate::model::Meta {
                name: new.metadata.name.clone(),
                ..Default::default()
            },
            ..Default::default()
        }),
        _ => object::<Node>(&req.old_object, "oldObject")?,
    };
    let adds_taint = new.is_out_of_service() && !old.is_out_of_service();
    let confirms = proof::sets(Some(&old.metadata), &new.metadata, Key::ConfirmNodeDown);
    if !adds_taint && !confirms {
        return Ok(Decision::allow("out-of-service-not-added"));
    }
    let confirmed = match adds_taint {
        true => super::break_glass::proofs(cx).read(&old.metadata, Key::ConfirmNodeDown),
        false => Read::Absent,
    };
    let name = old.metadata.name.clone();
    // Boxed: live reads taken once per confirmation or taint, not per review.
    let (incident, alive) = Box::pin(async {
        let own = cx.own_controllers.contains(&req.user_info.username);
        let incident = match new.metadata.annotation(FENCE_INCIDENT) {
            Some(i) if own && adds_taint => {
                let named = cx
                    .cluster
                    .read(query::Fences(FencesOf::Named(i), Fresh::Live))
                    .await;
                named.first()
            }
            _ => Fact::Missing,
        };
        // The stored Ready: at CREATE, the object's own (what is stored, as the policy reads it).
        let stored = match &*req.operation {
            "CREATE" => new.ready(),
            _ => old.ready(),
        };
        (incident, node_alive(cx, &name, stored).await)
    })
    .await;
    let d = node_taint::node_update(
        &req.user_info,
        &cx.own_controllers,
        &cx.policy.remediators,
        &old,
        &new,
        deref(&incident),
        alive.as_ref().map(String::as_str),
        &confirmed,
    );
    let d = match d.effect {
        Some(crate::rules::Effect::RecordRelease) => {
            let release = Release {
                action: ReleaseAction::Taint,
                by: req.user_info.username.clone(),
                proof: "trusted remediator (taint)".into(),
                pods: Vec::new(),
            };
            Box::pin(record(cx, req, &name, release, d)).await
        }
        _ => d,
    };
    Ok(with_warning(d, confirmed.ignored().map(str::to_string)))
}

/// rules.md §7 "Node deletion is a release": the pods on it by a consistent read, its records
/// live; a deletion allowed on a proof no record holds yet is recorded before the answer.
pub(super) async fn node_delete(cx: &Admission, req: &Request<'_>) -> Result<Decision, Decision> {
    let node = object::<Node>(&req.old_object, "oldObject")?;
    let name = node.metadata.name.clone();
    let (users, fences, alive) = Box::pin(async {
        let users = cx
            .cluster
            .read(query::Pods(PodsIn::Node(&name), claim_user, Fresh::Live))
            .await;
        let fences = match &users {
            Fact::Found(u) if !u.is_empty() => {
                cx.cluster
                    .read(query::Fences(FencesOf::Node(&name), Fresh::Live))
                    .await
            }
            _ => Fact::Found(Vec::new()),
        };
        let alive = match &users {
            Fact::Found(u) if !u.is_empty() => node_alive(cx, &name, node.ready()).await,
            _ => Fact::Missing,
        };
        (users, fences, alive)
    })
    .await;
    let d = crate::rules::node_delete::node_delete(
        &req.user_info,
        &node,
        users.as_ref().map(Vec::as_slice),
        fences.as_ref().map(Vec::as_slice),
        &cx.policy.remediators,
        alive.as_ref().map(String::as_str),
        &super::break_glass::proofs(cx).read(&node.metadata, Key::ConfirmNodeDown),
    );
    Ok(match d.record {
        Some((proof, pods)) => {
            let release = Release {
                action: ReleaseAction::NodeDelete,
                by: req.user_info.username.clone(),
                proof,
                pods,
            };
            Box::pin(record(cx, req, &name, release, d.decision)).await
        }
        None => d.decision,
    })
}

/// Write the record of a release before allowing it (rules.md §7); a dry run writes nothing.
/// A record that cannot be written refuses: a release nobody can find later proves nothing.
pub(super) async fn record(
    cx: &Admission,
    req: &Request<'_>,
    node: &str,
    release: Release,
    d: Decision,
) -> Decision {
    if req.dry_run.unwrap_or(false) {
        return d;
    }
    match cx.writer.apply(ReleaseRecord { node, release }).await {
        Ok(name) => {
            tracing::warn!(node, record = %name, row = d.row, "release of a node recorded");
            d.with_warning(format!("recorded as NodeFence {name}"))
        }
        Err(e) => Decision::unavailable(
            "release-unrecorded",
            format!(
                "node {node:?}: volguard could not record this release as a NodeFence ({e}); without the record \
                 its pods cannot be released later. Retry"
            ),
        ),
    }
}

/// Why `node` is evidently alive (rules.md §7): its stored Ready condition, or its Lease
/// renewed within `--partition-after`, read live. `Missing`: not evidently alive.
pub(super) async fn node_alive(cx: &Admission, node: &str, ready: Option<bool>) -> Fact<String> {
    if ready == Some(true) {
        return Fact::Found("it reports Ready".into());
    }
    match crate::fencing::records::lease_renewed(&cx.cluster, node).await {
        Fact::Found(renewed) => {
            match crate::rules::fencing::alive(
                ready,
                renewed,
                cx.partition_after,
                jiff::Timestamp::now(),
            ) {
                Some(why) => Fact::Found(why),
                None => Fact::Missing,
            }
        }
        Fact::Missing => Fact::Missing,
        Fact::Unknown(e) => Fact::Unknown(e),
    }
}

/// A pod a Node DELETE releases: not terminal, using a claim (rules.md §7).
fn claim_user(p: &crate::model::Pod) -> bool {
    !p.is_terminal() && crate::rules::claims::uses_claims(p)
}
