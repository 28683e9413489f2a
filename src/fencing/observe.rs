//! What the fencing controller reads, all through the view (`state::`): Nodes and their Leases
//! from its watches (with volguard's own clock of when each Lease last changed), and, for a
//! decision, the node whole, its Lease, and the pods, claims, volumes, classes and namespaces that
//! decide whether a node's partition concerns volguard, read live or from caches of what never
//! changes (a claim's class, a volume's driver). Every predicate is the model's or the rules'.

use super::Error;
use crate::model::fence::{BackendKind, FENCE_BACKENDS, FENCING};
use crate::model::{Node, Pod, Pv, Pvc, StorageClass};
use crate::rules::Fact;
use crate::rules::fencing::{self, Mode, NodeHealth, Storage, Tolerates};
use crate::state::query;
use crate::state::{Fresh, PodsIn, Readable, View};
use std::collections::{BTreeMap, HashMap};

pub use crate::model::LEASE_NAMESPACE;

/// When each node's Lease renewTime last changed, by this process's clock (the kubelet's clock
/// is never compared with ours, as kube-controller-manager does it). A process that just started
/// has seen every Lease change "now": it waits a full `--partition-after` before it fences.
pub type LeaseClock = crate::runtime::seen::Seen<String, Option<String>>;

pub fn health(n: &Node, silent: Option<std::time::Duration>) -> NodeHealth {
    let (ready, ready_changed) = n.ready_since();
    NodeHealth {
        lease_silent_for: silent.and_then(|d| jiff::SignedDuration::try_from(d).ok()),
        ready,
        ready_changed,
        control_plane: n.is_control_plane(),
        maintenance: n.maintenance().map(str::to_string),
    }
}

/// The pods on a partitioned node that hold opted-in ReadWriteOnce claims.
#[derive(Debug, Default)]
pub struct Affected {
    /// `namespace/pod` → its claims (namespace/claim).
    pub pods: BTreeMap<String, Vec<String>>,
    /// The incident's backends: manual when any affected pod asks for manual fencing.
    pub mode: Option<Mode>,
    /// The first claim's class that names its own backends (`volguard.io/fence-backends`).
    pub class_backends: Option<Vec<BackendKind>>,
    pub tolerations: Vec<Tolerates>,
}

impl Affected {
    pub fn backends(&self, auto: &[BackendKind]) -> Vec<BackendKind> {
        match (self.mode, &self.class_backends) {
            (Some(Mode::Manual), _) => vec![BackendKind::Manual],
            (_, Some(b)) => b.clone(),
            _ => auto.to_vec(),
        }
    }
}

/// A fact fencing must have: unknown is an error (the step is retried), missing is `None`.
fn known<T>(f: Fact<T>) -> Result<Option<T>, Error> {
    match f {
        Fact::Found(t) => Ok(Some(t)),
        Fact::Missing => Ok(None),
        Fact::Unknown(e) => Err(Error::Read(e)),
    }
}

/// The node whole, read live (`None`: gone).
pub async fn node(view: &View, name: &str) -> Result<Option<std::sync::Arc<Node>>, Error> {
    known(view.read(Node::named("", name, Fresh::Whole)).await)
}

/// One node's Lease renewTime, read live (quorum): what proof and recovery rest on.
pub async fn lease(view: &View, node: &str) -> Result<Option<String>, Error> {
    Ok(known(view.read(query::RenewTime(node, Fresh::Live)).await)?.flatten())
}

/// The pods PodGC would force-delete from `node` now (its `gcTerminating` pass: terminating, on
/// a node that is not Ready and carries the out-of-service taint), read consistently.
pub async fn pods_podgc_deletes(view: &View, node: &Node) -> Result<Vec<Pod>, Error> {
    use crate::rules::upstream::podgc::{PodGcReason, podgc_deletes};
    let name = node.metadata.name.as_str();
    Ok(known(
        view.read(query::Pods(
            PodsIn::Node(name),
            |p| podgc_deletes(p, Some(node)) == Some(PodGcReason::TerminatingOutOfService),
            Fresh::Live,
        ))
        .await,
    )?
    .unwrap_or_default())
}

/// The node's non-terminal pods that use claims, read consistently (`rules::claims`' and the
/// model's definitions), each with the claims it uses.
async fn claim_users(view: &View, node: &str) -> Result<Vec<(Pod, Vec<String>)>, Error> {
    let uses = |p: &Pod| !p.is_terminal() && crate::rules::claims::uses_claims(p);
    let pods = known(
        view.read(query::Pods(PodsIn::Node(node), uses, Fresh::Live))
            .await,
    )?
    .unwrap_or_default();
    Ok(pods
        .into_iter()
        .map(|p| {
            let claims = crate::rules::claims::claims_of(&p)
                .map(|c| c.name)
                .collect();
            (p, claims)
        })
        .collect())
}

/// Read what runs on `node` and which of it opted in (rules.md §7 "Opt in").
pub async fn affected(view: &View, node: &str) -> Result<Affected, Error> {
    let mut namespaces: HashMap<String, Option<String>> = HashMap::new();
    let mut out = Affected::default();
    for (p, claims) in claim_users(view, node).await? {
        let ns = p.metadata.namespace.clone();
        if !namespaces.contains_key(&ns) {
            let a = known(view.read(query::Namespace(&ns, Fresh::Live)).await)?
                .and_then(|n| n.metadata.annotation(FENCING).map(str::to_string));
            namespaces.insert(ns.clone(), a);
        }
        let mut held = Vec::new();
        let mut pod_mode = Mode::Off;
        for c in claims {
            let Some(pvc) = known(view.read(Pvc::named(&ns, &c, Fresh::CacheOrLive)).await)? else {
                continue;
            };
            if !pvc.is_rwo() {
                continue;
            }
            let class = match pvc.class_name() {
                Some(name) => known(
                    view.read(StorageClass::named("", name, Fresh::CacheOrLive))
                        .await,
                )?,
                None => None,
            };
            let annotation = |key| class.as_ref().and_then(|c| c.metadata.annotation(key));
            let m = fencing::mode(
                p.metadata.annotation(FENCING),
                namespaces.get(&ns).and_then(|a| a.as_deref()),
                annotation(FENCING),
            );
            if m != Mode::Off {
                if out.class_backends.is_none() {
                    out.class_backends =
                        annotation(FENCE_BACKENDS).and_then(BackendKind::parse_list);
                }
                pod_mode = if pod_mode == Mode::Manual {
                    Mode::Manual
                } else {
                    m
                };
                held.push(format!("{ns}/{c}"));
            }
        }
        if held.is_empty() {
            continue;
        }
        out.mode = match (out.mode, pod_mode) {
            (Some(Mode::Manual), _) | (_, Mode::Manual) => Some(Mode::Manual),
            _ => Some(Mode::Auto),
        };
        out.tolerations.push(p.spec.tolerates_unreachable);
        out.pods.insert(format!("{ns}/{}", p.metadata.name), held);
    }
    Ok(out)
}

/// The storage systems behind every claim the node's non-terminal pods use (rules.md §7 "A fence
/// has a scope"): what the out-of-service taint would release.
pub async fn storage_on(view: &View, node: &str) -> Result<Vec<Storage>, Error> {
    let mut out = Vec::new();
    for (p, claims) in claim_users(view, node).await? {
        let ns = &p.metadata.namespace;
        for claim in claims {
            let volume = known(view.read(Pvc::named(ns, &claim, Fresh::CacheOrLive)).await)?
                .and_then(|c| c.volume_name().map(str::to_string));
            let pv = match volume {
                Some(v) => known(view.read(Pv::named("", &v, Fresh::CacheOrLive)).await)?,
                None => None,
            };
            out.push(match pv {
                Some(pv) => Storage::of(&pv),
                None => Storage::Unknown(format!("{ns}/{claim}")),
            });
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}
