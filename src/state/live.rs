//! Live cluster state: kube-rs watches feeding the pruned stores, plus live reads for what a cache
//! must not answer alone.

use super::PodsIn;
use super::Store;
pub use super::change::{Change, ViewChange};
use super::decoded::{Decoded, Wire};
use super::watch::{Watches, index_claims};
use crate::model::{LEASE_NAMESPACE, Node, Pod, Pv, Pvc};
use crate::rules::Fact;
use crate::rules::decision::ReadError;
use futures::future::BoxFuture;
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Live reads must answer within the apiserver's webhook timeout (≤ 3 s in our manifests).
const LIVE_READ_TIMEOUT: Duration = Duration::from_millis(2000);

/// How long a live read may wait for the apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum By {
    /// Each request within `LIVE_READ_TIMEOUT`: a read inside a 3 s webhook answer, or one of
    /// the controller's (a LIST's pages each within it).
    Cap,
    /// Until this instant, however long each request takes: a read whose caller has a longer
    /// budget of its own (a take-over's reads, inside the bind's 10 s registration), for which
    /// waiting out the apiserver's throttling (kube's client retries a 429 after its Retry-After)
    /// costs less than a refusal, which the scheduler retries with a whole scheduling cycle, a
    /// Binding and the same reads again (`make bench-scale` at 5,000 nodes: 10,639 refusals for
    /// 2,187 take-overs whose reads were cut at the cap).
    Until(tokio::time::Instant),
    /// As long as the apiserver takes, with no permit and not counted in
    /// `volguard_live_reads`: the reads that never had a deadline (the controller's re-reads
    /// before a release, paced by its own limiter; fencing's incidents; an operator's explain).
    Unbounded,
}

impl By {
    /// When a request sent now must have its answer (`None`: whenever it comes).
    fn deadline(self) -> Option<tokio::time::Instant> {
        match self {
            By::Cap => Some(tokio::time::Instant::now() + LIVE_READ_TIMEOUT),
            By::Until(t) => Some(t),
            By::Unbounded => None,
        }
    }

    /// This deadline, or `d` from now if that is sooner (a `Cap` keeps its own).
    pub(super) fn at_most(self, d: Duration) -> By {
        match self {
            By::Until(t) => By::Until(t.min(tokio::time::Instant::now() + d)),
            By::Cap | By::Unbounded => self,
        }
    }

    /// The permits its reads take: a read that waits out the apiserver's throttling holds its
    /// permit through the client's `Retry-After` sleeps, so such reads draw from a pool of their
    /// own, and a throttled take-over never makes a 2 s read time out waiting for a permit
    /// (adversary review).
    fn permits(self) -> Option<&'static tokio::sync::Semaphore> {
        match self {
            By::Cap => Some(&LIVE_READS),
            By::Until(_) => Some(&PATIENT_READS),
            By::Unbounded => None,
        }
    }

    /// `read`'s answer, with a permit and by the deadline if this read has them (`None`: no
    /// answer in time).
    pub(super) async fn wait<F: std::future::Future>(self, read: F) -> Option<F::Output> {
        let (Some(deadline), Some(permits)) = (self.deadline(), self.permits()) else {
            return Some(read.await);
        };
        let read = async {
            let _permit = permits.acquire().await;
            read.await
        };
        tokio::time::timeout_at(deadline, read).await.ok()
    }

    /// Count the answer in `volguard_live_reads` (the reads a decision or a release waits on).
    fn count<T>(self, read: &'static str, kind: &'static str, fact: &Fact<T>) {
        if self != By::Unbounded {
            super::live_reads::count(read, kind, fact);
        }
    }
}

/// Which collections a live view watches (and keeps in its stores and indexes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    pub pvcs: bool,
    pub pvs: bool,
    pub nodes: bool,
    /// Pods, with the pod-by-claim index (`store.claims`).
    pub pods: bool,
    /// Keep claims' labels (label selectors of `report unused`).
    pub labels: bool,
    /// Node Leases and StorageClasses (fencing's detection and opt-in, with `nodes`).
    pub fencing: bool,
    /// Only this namespace's claims and pods (a user who may read one namespace).
    pub namespace: Option<String>,
    /// Every live LIST consistent, never one "not older than" an object's resourceVersion
    /// (`Fresh::LiveSince`): for a cluster that keeps pods or PersistentVolumeClaims in an etcd
    /// of their own (kube-apiserver's `--etcd-servers-overrides`), whose versions are then
    /// numbered apart (`--consistent-lists`).
    pub consistent_lists: bool,
}

impl Needs {
    /// The webhook's: volumes and nodes, and pods when the RWO guard needs holders.
    pub fn admission(pods: bool) -> Needs {
        Needs {
            pvcs: true,
            pvs: true,
            nodes: true,
            pods,
            ..Needs::default()
        }
    }
    /// The controller's: volumes and pods; with fencing, nodes, their Leases and the classes.
    pub fn controller(fencing: bool) -> Needs {
        Needs {
            pvcs: true,
            pvs: true,
            pods: true,
            nodes: fencing,
            fencing,
            ..Needs::default()
        }
    }
}

/// Changes waiting for a slow subscriber; one that falls further behind is told to look at
/// everything again (`Lagged`).
const CHANGE_BUFFER: usize = 16_384;

/// The live half of a `View`: the client its reads go through, what its stores hold whole (the
/// collections watched, or LISTed once), and the watches' synced flags and change channel.
pub(super) struct Live {
    pub(super) client: kube::Client,
    /// What the stores hold whole: a cache read of anything else answers `Unknown`.
    pub(super) watched: Needs,
    synced: Vec<Arc<AtomicBool>>,
    changes: tokio::sync::broadcast::Sender<ViewChange>,
}

impl Live {
    /// No watches: the stores hold `holds` as they are (nothing keeps them up to date).
    pub(super) fn unwatched(client: kube::Client, holds: Needs) -> Live {
        Live {
            client,
            watched: holds,
            synced: Vec::new(),
            changes: tokio::sync::broadcast::channel(1).0,
        }
    }

    /// Whether the stores hold every pod of `namespace` (`None`: of every namespace).
    pub(super) fn holds_pods(&self, namespace: Option<&str>) -> bool {
        self.watched.pods && self.holds_namespace(namespace)
    }

    /// Whether a namespaced collection held covers `namespace` (`None`: every namespace).
    pub(super) fn holds_namespace(&self, namespace: Option<&str>) -> bool {
        match (&self.watched.namespace, namespace) {
            (None, _) => true,
            (Some(only), Some(ns)) => only == ns,
            (Some(_), None) => false,
        }
    }

    /// Start the watches `needs` names. The pod watch keeps the claim index; every applied
    /// change is published to `subscribe`rs after the stores hold it.
    pub(super) fn start(client: kube::Client, needs: Needs) -> super::View {
        let mut w = Watches {
            store: Arc::new(Store::default()),
            synced: Vec::new(),
            changes: tokio::sync::broadcast::channel(CHANGE_BUFFER).0,
        };
        let ns = needs.namespace.as_deref();
        if needs.pvcs {
            w.watch(scoped::<Pvc>(&client, ns), |s| &s.pvcs, ViewChange::Pvc);
        }
        if needs.pvs {
            w.watch(Api::all(client.clone()), |s| &s.pvs, ViewChange::Pv);
        }
        if needs.nodes {
            w.watch(Api::all(client.clone()), |s| &s.nodes, ViewChange::Node);
        }
        if needs.pods {
            let api = scoped::<Pod>(&client, ns);
            w.watch_with(api, |s| &s.pods, ViewChange::Pod, index_claims);
        }
        if needs.fencing {
            let leases = Api::namespaced(client.clone(), LEASE_NAMESPACE);
            // Fencing reads these when it looks; nobody reacts to a change (a Lease changes
            // every ten seconds per node), so they are not published.
            w.watch_quiet(leases, |s| &s.leases);
            w.watch_quiet(Api::all(client.clone()), |s| &s.classes);
        }
        let live = Live {
            client,
            watched: needs,
            synced: w.synced,
            changes: w.changes,
        };
        super::View::live(w.store, live)
    }

    /// A one-shot view: each collection `needs` names LISTed once into fresh stores (no watch),
    /// for a command that reads and exits (`report unused`). A LIST that fails is the error.
    pub(super) async fn snapshot(
        client: kube::Client,
        needs: Needs,
    ) -> Result<super::View, kube::Error> {
        let store = Arc::new(if needs.labels {
            Store::keeping_labels()
        } else {
            Store::default()
        });
        let ns = needs.namespace.as_deref();
        if needs.pvcs {
            for p in list_all(scoped::<Pvc>(&client, ns)).await? {
                store.pvcs.apply(p);
            }
        }
        if needs.pvs {
            for p in list_all(Api::<Decoded<Pv>>::all(client.clone())).await? {
                store.pvs.apply(p);
            }
        }
        if needs.nodes {
            for n in list_all(Api::<Decoded<Node>>::all(client.clone())).await? {
                store.nodes.apply(n);
            }
        }
        if needs.pods {
            for p in list_all(scoped::<Pod>(&client, ns)).await? {
                store.pods.apply(p);
            }
            let pods = store.pods.all();
            store.claims.rebuild(pods.iter().map(|p| p.as_ref()));
        }
        // What it LISTed it holds whole; Leases and classes it never LISTs.
        let holds = Needs {
            fencing: false,
            ..needs
        };
        Ok(super::View::live(store, Live::unwatched(client, holds)))
    }

    pub(super) fn subscribe(&self) -> tokio::sync::broadcast::Receiver<ViewChange> {
        self.changes.subscribe()
    }

    pub(super) fn synced(&self) -> bool {
        self.synced.iter().all(|s| s.load(Ordering::Acquire))
    }
}

/// Live reads in flight in this process, all callers together: a burst of requests that each
/// miss the cache (a pod naming thousands of missing claims, a storm of finalizer patches) must
/// not open thousands of apiserver reads or hold thousands of responses at once. A read waiting
/// for a permit still counts against its own deadline.
pub const MAX_LIVE_READS: usize = 32;
static LIVE_READS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_LIVE_READS);

/// As `MAX_LIVE_READS`, for the reads that may wait longer (`By::Until`): the take-over's, a few
/// pods of one node or one object each.
pub const MAX_PATIENT_READS: usize = 16;
static PATIENT_READS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_PATIENT_READS);

/// How long a LIST "not older than" a version may wait before it is read again consistently:
/// kube-apiserver's watch cache waits 3 s to catch up with a version it lags, then answers 504
/// (which kube's client retries); a cache lagging that long is better bypassed.
pub const SINCE_WAIT: Duration = Duration::from_millis(3500);

/// Pods per page of a consistent LIST: a 20,000-pod namespace is ~200 MB of JSON in one
/// response; paged, at most one page is held at a time (rules.md §2c "bounded reads").
pub const LIST_PAGE: u32 = 500;

/// Pods per page of a LIST of one node's pods. kube-apiserver's priority and fairness charges a
/// LIST served from its watch cache by `limit` objects of the resource's average size, whatever
/// the index leaves of them (`list_work_estimator.go`, SizeBasedListCostEstimate): at 500, every
/// take-over's LIST of a few pods cost the 10 seats of a megabyte; at 50, one or two. A node
/// running more pods of one namespace takes more pages, each served from the cache's snapshot of
/// the first.
pub const NODE_PAGE: u32 = 50;

/// `list_pods`, and with `since` first at least as fresh as that version (within `SINCE_WAIT` of a
/// longer deadline; a capped read keeps its cap): a LIST the watch cache could not serve in time
/// (it lags that version: 504 after the client's retries, or no answer by then) or whose pages
/// expired (410) is read again consistently, by `by`. Any other refusal (429 from priority and
/// fairness included) is the answer: a second, dearer read would only add to the load. Boxed:
/// inline, the second read made every rule's future larger.
pub(super) fn read_pods<'a>(
    client: &'a kube::Client,
    which: PodsIn<'a>,
    keep: &'a (dyn Fn(&Pod) -> bool + Send + Sync + 'a),
    since: Option<u64>,
    by: By,
) -> BoxFuture<'a, Fact<Vec<Pod>>> {
    Box::pin(async move {
        let Some(v) = since else {
            return list_pods(client, which, keep, None, by).await;
        };
        match list_pods(client, which, keep, Some(v), by.at_most(SINCE_WAIT)).await {
            Fact::Unknown(
                ReadError::Timeout { .. }
                | ReadError::Refused {
                    code: 504 | 410, ..
                },
            ) => list_pods(client, which, keep, None, by).await,
            read => read,
        }
    })
}

/// LIST the pods `which` names, `keep`ing only those it accepts, so memory follows the pods that
/// matter, not the namespace. With no `since`, no resourceVersion: served as a consistent read
/// (from etcd by quorum, or the watch cache once it has caught up with etcd's current
/// revision), never an older cache (#75980). With `since`, at least as fresh as that version
/// (`resourceVersionMatch=NotOlderThan`): the watch cache once it holds it. Paged with
/// `limit`/`continue`: every page is served at the first page's resourceVersion, so the whole
/// list stays one snapshot; an expired continue token (410) makes the answer unknown, never a
/// partial "unused". A node's pods are filtered by the apiserver (it indexes `spec.nodeName`):
/// the answer is the few pods of one node, not the namespace (in `make bench-scale`, the stale
/// locks a churn left while volguard was stopped were cleared at ~30 MB/s of LIST bytes with one
/// namespace-wide LIST each). Boxed, as `get` is.
pub(super) fn list_pods<'a>(
    client: &'a kube::Client,
    which: PodsIn<'a>,
    keep: &'a (dyn Fn(&Pod) -> bool + Send + Sync + 'a),
    since: Option<u64>,
    by: By,
) -> BoxFuture<'a, Fact<Vec<Pod>>> {
    let (api, params, page, what) = match which {
        PodsIn::Namespace(ns) => (
            Api::<Decoded<Pod>>::namespaced(client.clone(), ns),
            ListParams::default(),
            LIST_PAGE,
            format!("listing pods of {ns:?}"),
        ),
        PodsIn::NamespaceOnNode(ns, node) => (
            Api::namespaced(client.clone(), ns),
            ListParams::default().fields(&format!("spec.nodeName={node}")),
            NODE_PAGE,
            format!("listing the pods of {ns:?} on node {node:?}"),
        ),
        PodsIn::Node(node) => (
            Api::all(client.clone()),
            ListParams::default().fields(&format!("spec.nodeName={node}")),
            NODE_PAGE,
            format!("listing the pods on node {node:?}"),
        ),
    };
    let params = match since {
        Some(v) => params
            .at(&v.to_string())
            .matching(kube::api::VersionMatch::NotOlderThan),
        None => params,
    };
    let read = match since {
        Some(_) => "list_since",
        None => "list",
    };
    pages(api, params, page, what, keep, by, read)
}

fn pages<'a>(
    api: Api<Decoded<Pod>>,
    first: ListParams,
    page: u32,
    what: String,
    keep: impl Fn(&Pod) -> bool + Send + Sync + 'a,
    by: By,
    read: &'static str,
) -> BoxFuture<'a, Fact<Vec<Pod>>> {
    Box::pin(async move {
        let what = || what.clone();
        // Each page within the live read's deadline, not the whole LIST: a 15,000-pod namespace
        // is 31 pages, and on a saturated apiserver (`make bench-scale` at 5,000 nodes) the
        // controller's release of its claims failed on the whole-LIST deadline and crawled on
        // backoff. Every page is still served at the first page's resourceVersion (one snapshot);
        // the admission path stays bounded by its decision's own deadline.
        let pages = async {
            let mut kept = Vec::new();
            let mut params = first.limit(page);
            loop {
                let page = by
                    .wait(api.list(&params))
                    .await
                    .ok_or_else(|| ReadError::Timeout { what: what() })?;
                // A pod that does not decode fails the whole LIST (kube::Error::SerdeError): unknown.
                let page = page.map_err(|e| read_error(what(), e))?;
                kept.extend(
                    page.items
                        .into_iter()
                        .map(Decoded::into_inner)
                        .filter(|p| keep(p)),
                );
                match page.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(token) => params = params.continue_token(&token),
                    None => return Ok(kept),
                }
            }
        };
        let fact = match pages.await {
            Err(e) => Fact::Unknown(e),
            Ok(pods) => Fact::Found(pods),
        };
        by.count(read, <Pod as super::Object>::KIND, &fact);
        fact
    })
}

/// One object as the apiserver has it now (a GET with no resourceVersion), answered `by` then,
/// pruned as caches prune when `prune`. Boxed: a kube read future is kilobytes, and inline it
/// would make every admission future that might read live that large, cache hits included (each
/// such future is moved into axum's box and tokio's timeout). Boxed, the decide future is 1,136
/// bytes instead of 3,384; with the boxed review objects, a pod review's L1d misses fell from
/// 1,072 to 683 per request (`make profile`).
pub(super) fn get<'a, T>(
    api: Api<Decoded<T>>,
    name: &'a str,
    prune: bool,
    by: By,
) -> BoxFuture<'a, Fact<Arc<T>>>
where
    T: Wire + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    Box::pin(async move {
        let fact = match by.wait(api.get_opt(name)).await {
            None => Fact::Unknown(ReadError::Timeout {
                what: format!("reading {} {name:?}", T::KIND),
            }),
            Some(Err(e)) => Fact::Unknown(read_error(format!("reading {} {name:?}", T::KIND), e)),
            Some(Ok(None)) => Fact::Missing,
            Some(Ok(Some(d))) => {
                let mut t = d.into_inner();
                if prune {
                    t.prune();
                }
                Fact::Found(Arc::new(t))
            }
        };
        by.count("get", T::KIND, &fact);
        fact
    })
}

fn scoped<T>(client: &kube::Client, ns: Option<&str>) -> Api<Decoded<T>>
where
    Decoded<T>: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <Decoded<T> as kube::Resource>::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Every object of a LIST, page by page, decoded straight into the model.
async fn list_all<T>(api: Api<Decoded<T>>) -> Result<Vec<T>, kube::Error>
where
    T: Wire + DeserializeOwned + std::fmt::Debug,
{
    let mut out = Vec::new();
    let mut params = ListParams::default().limit(LIST_PAGE);
    loop {
        let page = api.list(&params).await?;
        out.extend(page.items.into_iter().map(Decoded::into_inner));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
}

/// An object the model cannot decode is a decode error, anything else the API's.
pub(super) fn read_error(what: String, e: kube::Error) -> ReadError {
    match e {
        kube::Error::SerdeError(e) => ReadError::Decode {
            what,
            message: e.to_string(),
        },
        kube::Error::Api(s) => ReadError::Refused {
            what,
            code: s.code,
            reason: s.reason.clone(),
            message: s.message.clone(),
        },
        e => ReadError::Api {
            what,
            message: crate::error::chain(&e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_capped_read_has_the_cap_from_each_request_and_a_bounded_one_its_callers_instant() {
        let t0 = tokio::time::Instant::now();
        assert_eq!(By::Cap.deadline(), Some(t0 + LIVE_READ_TIMEOUT));
        tokio::time::advance(Duration::from_secs(5)).await;
        // The cap counts from each request (a LIST's next page), not from the first.
        assert_eq!(
            By::Cap.deadline(),
            Some(t0 + Duration::from_secs(5) + LIVE_READ_TIMEOUT)
        );
        let until = t0 + Duration::from_secs(6);
        assert_eq!(By::Until(until).deadline(), Some(until));
        assert_eq!(By::Unbounded.deadline(), None);
    }

    #[test]
    fn reads_that_wait_longer_draw_from_a_pool_of_their_own() {
        let until = tokio::time::Instant::now();
        assert!(
            By::Cap
                .permits()
                .is_some_and(|p| std::ptr::eq(p, &LIVE_READS))
        );
        assert!(
            By::Until(until)
                .permits()
                .is_some_and(|p| std::ptr::eq(p, &PATIENT_READS))
        );
        assert!(!std::ptr::eq(&LIVE_READS, &PATIENT_READS));
        assert_eq!(PATIENT_READS.available_permits(), MAX_PATIENT_READS);
        assert!(By::Unbounded.permits().is_none());
    }
}
