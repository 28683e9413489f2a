//! What each `explain` reads, from a live cluster or a `--state` file.

use super::*;
use crate::explain::args::ExplainArgs;
use crate::model::Node;
use crate::rules::decision::ReadError;
use crate::state::query;
use crate::state::{FencesOf, Fresh, PodsIn, Readable};

/// The facts of `explain pod`: the pod, each of its claims and their volumes, the volumes'
/// VolumeAttachments (live), the namespace's pods that name the same claims (a consistent read),
/// and the fencing incidents.
pub(super) async fn gather_pod(
    view: &state::View,
    ns: &str,
    args: &ExplainArgs,
    file: Option<String>,
) -> anyhow::Result<pod::PodExplanation> {
    let p = found(view.read(Pod::named(ns, &args.name, Fresh::Whole)).await)?.ok_or_else(|| {
        NotFound {
            resource: "pods",
            name: args.name.clone(),
            namespace: Some(ns.to_string()),
            file: file.clone(),
        }
    })?;
    let names: Vec<String> = crate::rules::claims::claims_of(&p)
        .map(|c| c.name)
        .collect();
    let mut not_read = Vec::new();
    let mut pvcs = Vec::new();
    let mut pvs = Vec::new();
    let mut vas = Vec::new();
    for c in &names {
        let pvc = found(view.read(Pvc::named(ns, c, Fresh::CacheOrLive)).await)?;
        let pv = match pvc.as_ref().and_then(|p| p.volume_name()) {
            Some(v) => match view.read(Pv::named("", v, Fresh::CacheOrLive)).await {
                Fact::Unknown(crate::rules::decision::ReadError::Refused { code: 403, .. }) => None,
                f => found(f)?,
            },
            None => None,
        };
        let va = match &pv {
            Some(pv) => attachments(view, &pv.metadata.name, &mut not_read).await?,
            None => Vec::new(),
        };
        pvcs.push(pvc);
        pvs.push(pv);
        vas.push(va);
    }
    let others = match view
        .read(query::Pods(
            PodsIn::Namespace(ns),
            |o| crate::rules::claims::claims_of(o).any(|c| names.contains(&c.name)),
            Fresh::Live,
        ))
        .await
    {
        Fact::Found(p) => p,
        Fact::Missing => Vec::new(),
        Fact::Unknown(e) => anyhow::bail!("cannot list the pods of {ns:?}: {e}"),
    };
    let fences = all_fences(view, &mut not_read).await?;
    let nodes = holder_nodes(view, &p, &pvcs, &others).await;
    let facts: Vec<pod::ClaimFacts<'_>> = names
        .iter()
        .enumerate()
        .map(|(i, n)| pod::ClaimFacts {
            name: n.clone(),
            pvc: pvcs[i].as_deref(),
            pv: pvs[i].as_deref(),
            attachments: vas[i].clone(),
        })
        .collect();
    Ok(pod::build_with_nodes(&p, &facts, &others, &fences, &nodes))
}

/// The nodes that hold the pod's claims (the other pods' and the RWO locks'), read only when the
/// pod constrains its nodes: the advice must not send it where it cannot run. A node that cannot
/// be read (a namespace's user may not read Nodes) is left out, and the advice says so.
async fn holder_nodes(
    view: &state::View,
    pod: &Pod,
    pvcs: &[Option<std::sync::Arc<Pvc>>],
    others: &[Pod],
) -> Vec<Node> {
    if !pod.has_node_constraints() {
        return Vec::new();
    }
    let mut names: Vec<String> = others
        .iter()
        .filter_map(|o| o.node_name().map(str::to_string))
        .chain(
            pvcs.iter()
                .flatten()
                .filter_map(|c| crate::rules::rwo_lock::RwoLock::of(c).map(|l| l.node)),
        )
        .collect();
    names.sort();
    names.dedup();
    let mut nodes = Vec::new();
    for n in names {
        if let Fact::Found(node) = view.read(Node::named("", &n, Fresh::Whole)).await {
            nodes.push((*node).clone());
        }
    }
    nodes
}

/// The facts of `explain node`: the Node, its Lease (live), its NodeFence incidents and records,
/// and the pods scheduled on it. A Node that no longer exists is explained too (its records say
/// whether its release was proven); a node nobody ever knew of is not found.
pub(super) async fn gather_node(
    view: &state::View,
    args: &ExplainArgs,
    file: Option<String>,
) -> anyhow::Result<node::NodeExplanation> {
    let name = args.name.as_str();
    let n = found(view.read(Node::named("", name, Fresh::Live)).await)?;
    let lease = match view.read(query::RenewTime(name, Fresh::Live)).await {
        Fact::Found(t) => Fact::Found(t.and_then(|t| t.parse().ok())),
        Fact::Missing => Fact::Found(None),
        Fact::Unknown(e) => Fact::Unknown(e),
    };
    let renewed = lease.found().copied().flatten();
    let fences: Vec<NodeFence> = match view
        .read(query::Fences(FencesOf::Node(name), Fresh::Live))
        .await
    {
        Fact::Found(f) => f.iter().map(|f| (**f).clone()).collect(),
        Fact::Missing => Vec::new(),
        Fact::Unknown(e) => {
            anyhow::bail!("cannot read the NodeFence records of node {name:?}: {e}")
        }
    };
    let pods = match view
        .read(query::Pods(PodsIn::Node(name), |_| true, Fresh::Live))
        .await
    {
        Fact::Found(p) => p,
        Fact::Missing => Vec::new(),
        Fact::Unknown(e) => anyhow::bail!("cannot list the pods on node {name:?}: {e}"),
    };
    if n.is_none() && fences.is_empty() && pods.is_empty() {
        return Err(NotFound {
            resource: "nodes",
            name: name.to_string(),
            namespace: None,
            file,
        }
        .into());
    }
    let alive = n.as_ref().and_then(|n| {
        crate::rules::fencing::alive(
            n.ready(),
            renewed,
            args.partition_after,
            jiff::Timestamp::now(),
        )
    });
    Ok(node::build(&node::Facts {
        name,
        node: n.as_deref(),
        lease,
        alive,
        fences: &fences,
        pods: &pods,
    }))
}

pub use crate::error::NotFound;

/// The facts of one explanation, read through the view (a file or a live cluster); the
/// VolumeAttachments only live. `file` names the state file in a not-found error.
pub(super) async fn gather(
    view: &state::View,
    ns: &str,
    args: &ExplainArgs,
    file: Option<String>,
) -> anyhow::Result<Explanation> {
    match args.kind {
        ExplainKind::Pvc => gather_pvc(view, ns, &args.name, file).await,
        ExplainKind::Pv => {
            let pv = found(
                view.read(Pv::named("", &args.name, Fresh::CacheOrLive))
                    .await,
            )?
            .ok_or_else(|| NotFound {
                resource: "persistentvolumes",
                name: args.name.clone(),
                namespace: None,
                file: file.clone(),
            })?;
            let claim = match &pv.spec.claim_ref {
                Some(c) => found(
                    view.read(Pvc::named(&c.namespace, &c.name, Fresh::CacheOrLive))
                        .await,
                )?,
                None => None,
            };
            let mut not_read = Vec::new();
            let vas = attachments(view, &pv.metadata.name, &mut not_read).await?;
            let mut e = build_pv(&pv, claim.as_deref(), &vas);
            e.not_read = not_read;
            Ok(e)
        }
        ExplainKind::Node | ExplainKind::Pod => {
            anyhow::bail!("nodes and pods have their own explanations")
        }
    }
}

/// A claim, its volume (if the caller may read it), the pods naming it (a consistent read), its
/// VolumeAttachments and the fencing incidents.
async fn gather_pvc(
    view: &state::View,
    ns: &str,
    name: &str,
    file: Option<String>,
) -> anyhow::Result<Explanation> {
    let pvc =
        found(view.read(Pvc::named(ns, name, Fresh::CacheOrLive)).await)?.ok_or_else(|| {
            NotFound {
                resource: "persistentvolumeclaims",
                name: name.to_string(),
                namespace: Some(ns.to_string()),
                file,
            }
        })?;
    let mut not_read = Vec::new();
    let pv = match pvc.volume_name() {
        Some(v) => match view.read(Pv::named("", v, Fresh::CacheOrLive)).await {
            // A namespace's user may not read PersistentVolumes (cluster-scoped).
            Fact::Unknown(crate::rules::decision::ReadError::Refused { code: 403, .. }) => {
                not_read.push("persistentvolumes (forbidden)".to_string());
                None
            }
            f => found(f)?,
        },
        None => None,
    };
    let claim = pvc.metadata.name.clone();
    let pods = match view
        .read(query::Pods(
            PodsIn::Namespace(ns),
            |p| crate::rules::claims::claims_of(p).any(|c| c.name == claim),
            Fresh::Live,
        ))
        .await
    {
        Fact::Found(p) => p,
        Fact::Missing => Vec::new(),
        Fact::Unknown(e) => anyhow::bail!("cannot list the pods of {ns:?}: {e}"),
    };
    let vas = match &pv {
        Some(pv) => attachments(view, &pv.metadata.name, &mut not_read).await?,
        None => Vec::new(),
    };
    let fences = all_fences(view, &mut not_read).await?;
    let mut e = build_pvc(&pvc, pv.as_deref(), &pods, &vas, &fences);
    if not_read.iter().any(|n| n.starts_with("persistentvolumes"))
        && let Some(v) = pvc.volume_name()
    {
        e.bound_to = Some(claim::BoundTo {
            name: v.to_string(),
            state: claim::BoundState::NotRead,
        });
    }
    e.not_read = not_read;
    Ok(e)
}

/// Every fencing incident: live (what the caller may read, as long as the apiserver takes), or
/// the state file's. A caller who may not list them gets an explanation without them that says
/// so; a cluster without the CRD has none.
async fn all_fences(
    view: &state::View,
    not_read: &mut Vec<String>,
) -> anyhow::Result<Vec<NodeFence>> {
    match view
        .read(query::Fences(FencesOf::All, Fresh::Unbounded))
        .await
    {
        Fact::Found(all) => Ok(all.iter().map(|f| (**f).clone()).collect()),
        Fact::Missing | Fact::Unknown(ReadError::Refused { code: 404, .. }) => Ok(Vec::new()),
        Fact::Unknown(e) => unreadable("nodefences", e, not_read),
    }
}

/// The VolumeAttachments naming `pv`, live (as long as the apiserver takes; a state file has
/// none). A caller without RBAC to list them (a namespace's user) gets an explanation without
/// them, which says so, rather than none at all.
async fn attachments(
    view: &state::View,
    pv: &str,
    not_read: &mut Vec<String>,
) -> anyhow::Result<Vec<crate::model::Attachment>> {
    match view.read(query::Attachments(pv, Fresh::Unbounded)).await {
        Fact::Found(v) => Ok(v),
        Fact::Missing => Ok(Vec::new()),
        Fact::Unknown(e) => unreadable("volumeattachments", e, not_read),
    }
}

/// A read the caller may not do, reported as "not read" (empty); any other failure an error.
fn unreadable<T>(
    resource: &str,
    e: ReadError,
    not_read: &mut Vec<String>,
) -> anyhow::Result<Vec<T>> {
    match e {
        ReadError::Refused { code: 403, .. } => {
            not_read.push(format!("{resource} (forbidden)"));
            Ok(Vec::new())
        }
        e => Err(e.into()),
    }
}

/// A read's answer for a reader that must not guess: absent, present, or an error.
fn found<T>(f: Fact<std::sync::Arc<T>>) -> anyhow::Result<Option<std::sync::Arc<T>>> {
    match f {
        Fact::Found(t) => Ok(Some(t)),
        Fact::Missing => Ok(None),
        Fact::Unknown(e) => Err(e.into()),
    }
}
