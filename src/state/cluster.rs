//! Where admission facts come from: a state file (authoritative, offline) or a live cluster
//! (watch caches first, a live GET on a miss, a live LIST for the finalizer guard).

use super::Store;
use super::live::{By, LiveCluster};
use crate::model::{Node, Pod, Pv, Pvc};
use crate::rules::Fact;
use std::sync::Arc;

#[derive(Clone)]
pub enum Cluster {
    /// `--state FILE`: the file is the whole truth.
    Offline(Arc<Store>),
    Live(Arc<LiveCluster>),
}

impl Cluster {
    /// The stores behind the view (what a one-shot reader walks whole).
    pub fn store(&self) -> &Arc<Store> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => s,
            Cluster::Live(l) => &l.store,
        }
    }

    pub async fn pvc(&self, namespace: &str, name: &str) -> Fact<Arc<Pvc>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => from_cache(s.pvcs.get(namespace, name)),
            Cluster::Live(l) => l.pvc(namespace, name).await,
        }
    }

    /// The PVC from memory when it is there (`None`: a live read is needed). The admission fast
    /// path: no future per claim when the cache answers.
    pub fn pvc_cached(&self, namespace: &str, name: &str) -> Option<Fact<Arc<Pvc>>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => Some(from_cache(s.pvcs.get(namespace, name))),
            Cluster::Live(l) => l.store.pvcs.get(namespace, name).map(Fact::Found),
        }
    }

    pub async fn pv(&self, name: &str) -> Fact<Arc<Pv>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => from_cache(s.pvs.get("", name)),
            Cluster::Live(l) => l.pv(name).await,
        }
    }

    /// A Namespace, read live (offline: none is known).
    pub async fn namespace(&self, name: &str) -> Fact<Arc<crate::model::Namespace>> {
        super::reads::note();
        match self {
            Cluster::Offline(_) => Fact::Missing,
            Cluster::Live(l) => l.namespace(name).await,
        }
    }

    pub async fn node(&self, name: &str) -> Fact<Arc<Node>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => from_cache(s.nodes.get("", name)),
            Cluster::Live(l) => l.node(name).await,
        }
    }

    /// The node as the apiserver has it now, never a cache: what allows a force delete ("node
    /// gone", "out-of-service") must not come from a cache that still shows a taint removed a
    /// moment ago (rules.md §2d, kubernetes#142331). Answered `by` then.
    pub async fn node_confirmed(&self, name: &str, by: By) -> Fact<Arc<Node>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => from_cache(s.nodes.get("", name)),
            Cluster::Live(l) => l.node_live(name, by).await,
        }
    }

    /// A fencing incident, read live (it decides a release).
    pub async fn node_fence(&self, name: &str) -> Fact<Arc<crate::model::fence::NodeFence>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => from_cache(s.fences.get("", name)),
            Cluster::Live(l) => super::fences::get(&l.client, name).await,
        }
    }

    /// The NodeFence incidents and deletion records of `node`, read live (a "node gone" counts as
    /// proof only with one: rules.md §7).
    pub async fn fences_of_node(
        &self,
        node: &str,
    ) -> Fact<Vec<Arc<crate::model::fence::NodeFence>>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => Fact::Found(
                s.fences
                    .all()
                    .into_iter()
                    .filter(|f| f.spec.node == node)
                    .collect(),
            ),
            Cluster::Live(l) => super::fences::of_node(&l.client, node).await,
        }
    }

    /// The node's Lease renewTime, read live (offline: none is known).
    pub async fn lease_renewed(&self, node: &str) -> Fact<Option<jiff::Timestamp>> {
        super::reads::note();
        match self {
            Cluster::Offline(_) => Fact::Found(None),
            Cluster::Live(l) => l.lease_renewed(node).await,
        }
    }

    /// The non-terminal pods scheduled on `node` that use a claim: a consistent read (a Node
    /// DELETE releases them). Offline, the store's.
    pub async fn claim_users_on_node(&self, node: &str) -> Fact<Vec<Pod>> {
        super::reads::note();
        let keep = |p: &Pod| {
            p.node_name() == Some(node) && !p.is_terminal() && crate::rules::claims::uses_claims(p)
        };
        match self {
            Cluster::Offline(s) => Fact::Found(
                s.pods
                    .all()
                    .into_iter()
                    .filter(|p| keep(p))
                    .map(|p| (*p).clone())
                    .collect(),
            ),
            Cluster::Live(l) => l.claim_users_on_node(node).await,
        }
    }

    pub async fn pod(&self, namespace: &str, name: &str) -> Fact<Arc<Pod>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => from_cache(s.pods.get(namespace, name)),
            Cluster::Live(l) => l.pod(namespace, name).await,
        }
    }

    /// The pod with what caches prune (nodeSelector, affinity): `explain pod`. A `--state` file's
    /// pods are pruned as they load.
    pub async fn pod_whole(&self, namespace: &str, name: &str) -> Fact<Arc<Pod>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => from_cache(s.pods.get(namespace, name)),
            Cluster::Live(l) => l.pod_whole(namespace, name).await,
        }
    }

    /// The node with its labels (caches keep only the control-plane ones): `explain pod`.
    pub async fn node_whole(&self, name: &str) -> Fact<Arc<Node>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => from_cache(s.nodes.get("", name)),
            Cluster::Live(l) => l.node_whole(name).await,
        }
    }

    /// The pod as the apiserver has it now, never a cache (a bind whose pod UID differs from the
    /// cached pod's). Answered `by` then.
    pub async fn pod_live(&self, namespace: &str, name: &str, by: By) -> Fact<Arc<Pod>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => from_cache(s.pods.get(namespace, name)),
            Cluster::Live(l) => l.pod_live(namespace, name, by).await,
        }
    }

    /// The pods that name `claim` in their volumes (the RWO guard's candidate holders).
    pub async fn pods_naming(&self, namespace: &str, claim: &str) -> Fact<Vec<Arc<Pod>>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => Fact::Found(
                s.claims
                    .pods_naming(namespace, claim)
                    .into_iter()
                    .filter_map(|n| s.pods.get(namespace, &n))
                    .collect(),
            ),
            Cluster::Live(l) => l.pods_naming(namespace, claim).await,
        }
    }

    /// The pods that name `claim` as the watch cache holds them, if pods are watched (no read).
    pub fn pods_naming_cached(&self, namespace: &str, claim: &str) -> Option<Vec<Arc<Pod>>> {
        super::reads::note();
        let store = match self {
            Cluster::Offline(s) => s,
            Cluster::Live(l) if l.watches_pods() => &l.store,
            Cluster::Live(_) => return None,
        };
        Some(
            store
                .claims
                .pods_naming(namespace, claim)
                .into_iter()
                .filter_map(|n| store.pods.get(namespace, &n))
                .collect(),
        )
    }

    /// The pods of a namespace that `keep` accepts, read consistently (a live paged LIST, never
    /// a cache).
    pub async fn pods_consistent(
        &self,
        namespace: &str,
        keep: impl Fn(&Pod) -> bool + Send + Sync,
    ) -> Fact<Vec<Pod>> {
        super::reads::note();
        match self {
            Cluster::Offline(s) => Fact::Found(
                s.pods
                    .in_namespace(namespace)
                    .into_iter()
                    .filter(|p| keep(p))
                    .map(|p| (*p).clone())
                    .collect(),
            ),
            Cluster::Live(l) => l.pods_consistent(namespace, keep).await,
        }
    }

    /// The pods of a namespace on `node` that `keep` accepts, read consistently (a live LIST
    /// the apiserver filters by node), answered `by` then.
    pub async fn pods_on_node_consistent(
        &self,
        namespace: &str,
        node: &str,
        keep: impl Fn(&Pod) -> bool + Send + Sync,
        by: By,
    ) -> Fact<Vec<Pod>> {
        super::reads::note();
        match self {
            Cluster::Offline(_) => {
                self.pods_consistent(namespace, |p| p.node_name() == Some(node) && keep(p))
                    .await
            }
            Cluster::Live(l) => l.pods_on_node_consistent(namespace, node, keep, by).await,
        }
    }

    /// Caches synced (always true offline).
    pub fn synced(&self) -> bool {
        super::reads::note();
        match self {
            Cluster::Offline(_) => true,
            Cluster::Live(l) => l.synced(),
        }
    }
}

fn from_cache<T>(o: Option<Arc<T>>) -> Fact<Arc<T>> {
    o.map_or(Fact::Missing, Fact::Found)
}
