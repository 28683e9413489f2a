//! The one read view of the cluster: the webhook, the controller, fencing, report and explain read
//! through `View`, over one source: a `--state` file (the whole truth, held in memory) or a live
//! cluster (watch caches and live reads). A read states how fresh its answer must be as a
//! parameter (`Fresh`), never in its name.

use super::Store;
use super::decoded::{Decoded, Wire};
use super::live::{self, By, Live, Needs};
use super::store::{Held, PodSeen};
use crate::model::fence::NodeFence;
use crate::model::{LEASE_NAMESPACE, Lease, Namespace, Node, Pod, Pv, Pvc, StorageClass};
use crate::rules::Fact;
use crate::rules::decision::ReadError;
use futures::future::BoxFuture;
use kube::Api;
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// How fresh a read's answer must be. A `--state` file is the whole truth: every freshness reads
/// it. On a live cluster:
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fresh {
    /// What the watch caches hold, with no request: it may lag the apiserver. A kind this view
    /// does not watch answers `Unknown`: an empty cache says nothing of what exists.
    Cache,
    /// The cache's copy when it holds one, else the apiserver's: a copy may lag, an absence is
    /// confirmed live (a kind not watched is always read live).
    CacheOrLive,
    /// The apiserver now, never a cache: a GET (a quorum read; its object pruned as caches
    /// prune) or a paged LIST with no resourceVersion (one consistent snapshot). Each request is
    /// answered within the live read's cap (2 s: inside a webhook's answer).
    Live,
    /// As `Live`, each request waiting for its answer until this instant however long it takes:
    /// a caller with a longer budget of its own (a take-over's reads, inside the bind's time),
    /// for which waiting out the apiserver's throttling costs less than a refusal. Such reads
    /// draw from a pool of permits of their own; NodeFence reads keep the cap.
    LiveUntil(tokio::time::Instant),
    /// A LIST at least as fresh as resourceVersion `.0` (`resourceVersionMatch=NotOlderThan`):
    /// served by the apiserver's watch cache once it holds that version, with no quorum read;
    /// answered by `.1` (`None`: within the live read's cap). A GET reads as `Live` /
    /// `LiveUntil` do. A LIST the watch cache cannot serve in time (it lags that version) is read
    /// again as a consistent one. Only as good as the version: a pod LIST at a claim's
    /// resourceVersion shows every pod stored before that claim's value was written, as long as
    /// one etcd revision numbers both (`Fresh::not_older_than`).
    LiveSince(u64, Option<tokio::time::Instant>),
    /// As `Live`, a GET keeping what caches prune (a node's labels and volume lists, a pod's
    /// nodeSelector and affinity): explain's reads and a fence's proof.
    Whole,
    /// As `Whole`, waiting as long as the apiserver takes, with no permit, and not counted in
    /// `volguard_live_reads`: the reads that never had a deadline and must not start timing out
    /// (the controller's re-reads before a release, paced by its own limiter; fencing's
    /// incidents; explain's VolumeAttachments and incidents).
    Unbounded,
}

/// Which NodeFence records a read asks for (`query::Fences`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FencesOf<'a> {
    /// The one of this name.
    Named(&'a str),
    /// A node's incidents and release records.
    Node(&'a str),
    /// Every incident and record.
    All,
}

impl FencesOf<'_> {
    fn name(&self) -> &str {
        match self {
            FencesOf::Named(n) | FencesOf::Node(n) => n,
            FencesOf::All => "incidents",
        }
    }
}

impl View {
    /// The live client, or `Offline` over a file (a read only the cluster answers).
    pub(super) fn client(&self) -> Result<&kube::Client, kube::Error> {
        self.live
            .as_ref()
            .map(|l| &l.client)
            .ok_or_else(|| kube::Error::Service(Box::new(super::writer::Offline)))
    }
}

impl Fresh {
    /// The version a `LiveSince` read is not older than.
    pub(crate) fn version(self) -> Option<u64> {
        match self {
            Fresh::LiveSince(v, _) => Some(v),
            _ => None,
        }
    }

    /// This live freshness, for a LIST, at least as fresh as `version` (an object's
    /// resourceVersion); unchanged when the version is not a number (resourceVersions are opaque:
    /// the read stays consistent), or for a cache's freshness. A view opened with
    /// `Needs::consistent_lists` reads every LIST consistently whatever it is asked.
    pub fn not_older_than(self, version: Option<&str>) -> Fresh {
        let Some(v) = version.and_then(|v| v.parse::<u64>().ok()) else {
            return self;
        };
        match self {
            _ if v == 0 => self,
            Fresh::Live => Fresh::LiveSince(v, None),
            Fresh::LiveUntil(t) => Fresh::LiveSince(v, Some(t)),
            Fresh::Cache
            | Fresh::CacheOrLive
            | Fresh::LiveSince(..)
            | Fresh::Whole
            | Fresh::Unbounded => self,
        }
    }
}

/// A kind `View::read` reads one object of (`Readable::named`): the store's map of it (`Held`), whether a live view
/// watches it, and where the apiserver serves it.
pub trait Readable:
    Held + Wire + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
    fn watched(needs: &Needs) -> bool;
    fn api(client: kube::Client, namespace: &str) -> Api<Decoded<Self>>;

    /// The read of one object of this kind (`namespace` empty for a cluster-scoped kind), as
    /// `fresh` asks: `view.read(Pvc::named(namespace, name, Fresh::Cache))`.
    fn named<'a>(namespace: &'a str, name: &'a str, fresh: Fresh) -> super::query::Named<'a, Self>
    where
        Self: Sized,
    {
        super::query::Named {
            namespace,
            name,
            fresh,
            kind: std::marker::PhantomData,
        }
    }
}

macro_rules! readable {
    ($($kind:ty: $watched:ident, $scope:ident);* $(;)?) => {$(
        impl Readable for $kind {
            fn watched(needs: &Needs) -> bool {
                needs.$watched
            }
            fn api(client: kube::Client, namespace: &str) -> Api<Decoded<Self>> {
                readable!(@$scope client, namespace)
            }
        }
    )*};
    (@namespaced $client:ident, $namespace:ident) => { Api::namespaced($client, $namespace) };
    (@cluster $client:ident, $namespace:ident) => {{ let _ = $namespace; Api::all($client) }};
}

readable!(
    Pvc: pvcs, namespaced;
    Pod: pods, namespaced;
    Lease: fencing, namespaced;
    Pv: pvs, cluster;
    Node: nodes, cluster;
    StorageClass: fencing, cluster;
);

/// Which pods a list reads.
#[derive(Debug, Clone, Copy)]
pub enum PodsIn<'a> {
    Namespace(&'a str),
    /// Every namespace's pods scheduled on a node (the apiserver filters by `spec.nodeName`).
    Node(&'a str),
    /// One namespace's pods scheduled on a node.
    NamespaceOnNode(&'a str, &'a str),
}

/// The read view: cheap to clone (two shared handles).
#[derive(Clone)]
pub struct View {
    pub(super) store: Arc<Store>,
    /// `None`: a `--state` file.
    pub(super) live: Option<Arc<Live>>,
}

impl View {
    /// A view over a `--state` file's objects, already loaded into `store`.
    pub fn file(store: Arc<Store>) -> View {
        View { store, live: None }
    }

    /// A live view over `store` as it is, with no watches: `holds` names the collections it
    /// holds whole (read from memory as a watch cache is), and everything else is read live
    /// (a one-shot reader with an empty store, or a test). Nothing keeps `store` up to date.
    pub fn from_store(client: kube::Client, store: Arc<Store>, holds: Needs) -> View {
        View {
            store,
            live: Some(Arc::new(Live::unwatched(client, holds))),
        }
    }

    pub(super) fn live(store: Arc<Store>, live: Live) -> View {
        View {
            store,
            live: Some(Arc::new(live)),
        }
    }

    /// Every object of kind `K` this view holds in memory (its watch caches; a file's
    /// contents), in `namespace` or in all: a sweep with no request (the controller's and
    /// fencing's passes, report's walk). A kind not watched, or a watch not yet synced, holds
    /// less: a sweep finds work, and what a decision needs is read again at its freshness.
    pub fn sweep<K: Held>(&self, namespace: Option<&str>) -> Vec<Arc<K>> {
        super::reads::note();
        let map = K::map(&self.store);
        match namespace {
            Some(ns) => map.in_namespace(ns),
            None => map.all(),
        }
    }

    /// One object of kind `K` as this view holds it in memory now, with no request: the
    /// synchronous `Fresh::Cache` read of a sweep or a queue's predicate (`None`: not held).
    pub fn held<K: Held>(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        super::reads::note();
        K::map(&self.store).get(namespace, name)
    }

    /// The pods held in memory that name claim `namespace/claim` (the pod-by-claim index): the
    /// synchronous `Fresh::Cache` read of `query::PodsNaming`.
    pub fn held_naming(&self, namespace: &str, claim: &str) -> Vec<Arc<Pod>> {
        super::reads::note();
        self.store
            .claims
            .pods_naming(namespace, claim)
            .into_iter()
            .filter_map(|n| self.store.pods.get(namespace, &n))
            .collect()
    }

    /// What this process's pod watch saw of pod `namespace/name` of `uid`: stored now, gone
    /// since (deleted for good), or never.
    pub fn pod_seen(&self, namespace: &str, name: &str, uid: &str) -> PodSeen {
        super::reads::note();
        self.store.pod_seen(namespace, name, uid)
    }

    /// Whether pod `namespace/name` of `uid` was not stored at a version at least `version`
    /// (this process's pod watch has applied that version and its cache lacks the pod): deleted
    /// by then, if it was stored before. False when the cache cannot tell (pods not watched
    /// there, behind that version, relisted meanwhile, no UID, or resourceVersions of pods and
    /// claims not comparable: `Needs::consistent_lists`), and over a file.
    pub fn pod_absent_since(&self, namespace: &str, name: &str, uid: &str, version: u64) -> bool {
        super::reads::note();
        let Some(l) = &self.live else {
            return false;
        };
        if uid.is_empty() || l.watched.consistent_lists || !l.holds_pods(Some(namespace)) {
            return false;
        }
        let absent = self
            .store
            .pods
            .mark
            .read_at_least(version, || self.store.pod_seen(namespace, name, uid))
            .is_some_and(|seen| seen != PodSeen::Stored);
        if absent {
            super::live_reads::answered_by_cache("absent");
        }
        absent
    }

    /// Whether this view is a `--state` file (its contents the whole truth, never refreshed).
    pub fn is_file(&self) -> bool {
        self.live.is_none()
    }

    /// Caches synced (always true for a file).
    pub fn synced(&self) -> bool {
        super::reads::note();
        self.live.as_ref().is_none_or(|l| l.synced())
    }

    /// Every change the watches apply from now on, in the order the stores applied them (per
    /// collection). A file never changes: its receiver is closed.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<super::ViewChange> {
        match &self.live {
            Some(l) => l.subscribe(),
            None => tokio::sync::broadcast::channel(1).0.subscribe(),
        }
    }

    /// One object of a kind the caches may hold (`namespace` empty for a cluster-scoped kind):
    /// from the cache or the apiserver as `fresh` asks. A kind this live view does not watch (or
    /// a namespace it does not) is read live, and answers `Unknown` to a cache read.
    pub(super) async fn get<K: Readable>(
        &self,
        namespace: &str,
        name: &str,
        fresh: Fresh,
    ) -> Fact<Arc<K>> {
        let Some(l) = &self.live else {
            return from_cache(K::map(&self.store).get(namespace, name));
        };
        // Namespaced kinds may be watched in one namespace only (`Needs::namespace`).
        let held =
            K::watched(&l.watched) && (namespace.is_empty() || l.holds_namespace(Some(namespace)));
        let cached = held.then(|| K::map(&self.store).get(namespace, name));
        match (fresh, cached) {
            (Fresh::Cache, None) => not_watched(K::KIND, name),
            (Fresh::Cache, Some(hit)) => from_cache(hit),
            (Fresh::CacheOrLive, Some(Some(hit))) => Fact::Found(hit),
            (_, _) => from_apiserver(K::api(l.client.clone(), namespace), name, fresh).await,
        }
    }

    /// A Namespace (never watched; a file holds none: `Missing`).
    pub(super) async fn namespace(&self, name: &str, fresh: Fresh) -> Fact<Arc<Namespace>> {
        let Some(l) = &self.live else {
            return Fact::Missing;
        };
        let api = Api::<Decoded<Namespace>>::all(l.client.clone());
        match fresh {
            Fresh::Cache => not_watched("Namespace", name),
            _ => from_apiserver(api, name, fresh).await,
        }
    }

    /// The node's Lease renewTime as written (`None`: no Lease, or never renewed; a file holds
    /// no Leases). Leases are watched with fencing.
    pub(super) async fn lease_renew_time(&self, node: &str, fresh: Fresh) -> Fact<Option<String>> {
        match self.get::<Lease>(LEASE_NAMESPACE, node, fresh).await {
            Fact::Found(l) => Fact::Found(l.spec.renew_time.clone()),
            Fact::Missing => Fact::Found(None),
            Fact::Unknown(e) => Fact::Unknown(e),
        }
    }

    /// The NodeFence incidents and records `which` names (never watched: read live whatever the
    /// freshness asked, since they decide a release; `Unbounded` waits as long as the apiserver
    /// takes). `FencesOf::Named` answers `Missing` when there is none; a node's records fail
    /// on one that does not decode, the whole list skips it with a warning.
    pub(super) async fn fences(
        &self,
        which: FencesOf<'_>,
        fresh: Fresh,
    ) -> Fact<Vec<Arc<NodeFence>>> {
        let capped = fresh != Fresh::Unbounded;
        match (&self.live, fresh) {
            (None, _) => {
                let all = self.store.fences.all().into_iter();
                match which {
                    FencesOf::Named(name) => match self.store.fences.get("", name) {
                        Some(f) => Fact::Found(vec![f]),
                        None => Fact::Missing,
                    },
                    FencesOf::Node(node) => {
                        Fact::Found(all.filter(|f| f.spec.node == node).collect())
                    }
                    FencesOf::All => Fact::Found(all.collect()),
                }
            }
            (Some(_), Fresh::Cache) => not_watched("NodeFence", which.name()),
            (Some(l), _) => match which {
                FencesOf::Named(name) => super::fences::get(&l.client, name, capped)
                    .await
                    .map(|f| vec![f]),
                FencesOf::Node(node) => super::fences::of_node(&l.client, node, capped).await,
                FencesOf::All => super::fences::all(&l.client, capped).await,
            },
        }
    }

    /// The pods that name `claim` in their volumes (the RWO guard's candidate holders): the
    /// pod-by-claim index when pods are watched, else (or any live freshness) a consistent LIST
    /// of the namespace.
    pub(super) async fn pods_naming(
        &self,
        namespace: &str,
        claim: &str,
        fresh: Fresh,
    ) -> Fact<Vec<Arc<Pod>>> {
        let indexed = || self.held_naming(namespace, claim);
        let Some(l) = &self.live else {
            return Fact::Found(indexed());
        };
        match (fresh, l.holds_pods(Some(namespace))) {
            (Fresh::Cache | Fresh::CacheOrLive, true) => Fact::Found(indexed()),
            (Fresh::Cache, false) => not_watched("Pod", claim),
            (_, _) => {
                let names = |p: &Pod| crate::rules::claims::claims_of(p).any(|c| c.name == claim);
                let which = PodsIn::Namespace(namespace);
                live::list_pods(&l.client, which, &names, None, by(fresh))
                    .await
                    .map(|pods| pods.into_iter().map(Arc::new).collect())
            }
        }
    }

    /// The pods `which` names that `keep` accepts. `Live` (and `Whole`): a paged LIST with no
    /// resourceVersion, only the pods `keep` accepts held while the pages stream by; `LiveSince`:
    /// one not older than its version, read again consistently if the apiserver cannot serve it.
    pub(super) async fn pods(
        &self,
        which: PodsIn<'_>,
        keep: impl Fn(&Pod) -> bool + Send + Sync,
        fresh: Fresh,
    ) -> Fact<Vec<Pod>> {
        let on = |p: &Pod, node: &str| p.node_name() == Some(node);
        let cached = || -> Vec<Pod> {
            let pods = match which {
                PodsIn::Namespace(ns) | PodsIn::NamespaceOnNode(ns, _) => {
                    self.store.pods.in_namespace(ns)
                }
                PodsIn::Node(_) => self.store.pods.all(),
            };
            pods.into_iter()
                .filter(|p| match which {
                    PodsIn::Namespace(_) => keep(p),
                    PodsIn::Node(n) | PodsIn::NamespaceOnNode(_, n) => on(p, n) && keep(p),
                })
                .map(|p| (*p).clone())
                .collect()
        };
        let Some(l) = &self.live else {
            return Fact::Found(cached());
        };
        let namespace = match which {
            PodsIn::Namespace(ns) | PodsIn::NamespaceOnNode(ns, _) => Some(ns),
            PodsIn::Node(_) => None,
        };
        let since = match fresh {
            Fresh::LiveSince(v, _) if !l.watched.consistent_lists => Some(v),
            _ => None,
        };
        // This process's pod watch has applied the version asked: its cache answers as the
        // apiserver's watch cache would, with no request.
        if l.holds_pods(namespace)
            && let Some(pods) = since.and_then(|v| self.store.pods.mark.read_at_least(v, cached))
        {
            super::live_reads::answered_by_cache("list");
            return Fact::Found(pods);
        }
        match (fresh, l.holds_pods(namespace)) {
            (Fresh::Cache | Fresh::CacheOrLive, true) => Fact::Found(cached()),
            (Fresh::Cache, false) => not_watched("Pod", "pods"),
            (_, _) => {
                let keep = move |p: &Pod| match which {
                    PodsIn::Node(n) => on(p, n) && keep(p),
                    PodsIn::Namespace(_) | PodsIn::NamespaceOnNode(..) => keep(p),
                };
                live::read_pods(&l.client, which, &keep, since, by(fresh)).await
            }
        }
    }
}

/// One object read live as `fresh` asks: pruned as caches prune unless `Whole` or `Unbounded`,
/// answered within the cap unless `LiveUntil` or `Unbounded`.
fn from_apiserver<'a, T>(
    api: Api<Decoded<T>>,
    name: &'a str,
    fresh: Fresh,
) -> BoxFuture<'a, Fact<Arc<T>>>
where
    T: Wire + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let prune = !matches!(fresh, Fresh::Whole | Fresh::Unbounded);
    live::get(api, name, prune, by(fresh))
}

/// How long a live read waits: until the caller's instant, as long as it takes, or the cap.
pub(super) fn by(fresh: Fresh) -> By {
    match fresh {
        Fresh::LiveUntil(t) | Fresh::LiveSince(_, Some(t)) => By::Until(t),
        Fresh::LiveSince(_, None) => By::Cap,
        Fresh::Unbounded => By::Unbounded,
        Fresh::Cache | Fresh::CacheOrLive | Fresh::Live | Fresh::Whole => By::Cap,
    }
}

fn from_cache<T>(o: Option<Arc<T>>) -> Fact<Arc<T>> {
    o.map_or(Fact::Missing, Fact::Found)
}

fn not_watched<T>(kind: &str, name: &str) -> Fact<T> {
    Fact::Unknown(ReadError::NotWatched {
        what: format!("{kind} {name:?}"),
    })
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
