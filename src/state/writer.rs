//! The one writer: every write volguard makes, over the view's source, through one door
//! (`Writer::apply`, each write a value naming its answer: `write::Apply`). Here the RWO lock's
//! compare-and-swap on a claim (rules.md §2f, `LockSwap`) and a release record (`ReleaseRecord`;
//! on a `--state` file both in memory); in `write` every write answered done or not (`Write`:
//! the controller's patches, each carrying a `test` or a resourceVersion, Events, fencing's
//! taints, pod deletes and NetworkFences, the registration's repair); the incidents' own
//! compare-and-swap (`fence_writer`), the Lease (`leases`) and the webhook's audit trail's
//! Events and AuditReports (`audit`: `AuditEvent`, `EventCount`, `ReportFold`).
//!
//! Live, the swap is a merge patch carrying the claim's `resourceVersion` as read: the apiserver
//! stores it only if nobody wrote the claim since (409 otherwise). Offline (`--state`), the lock
//! lives in memory: the same compare and set under the store's lock.

use super::decoded::Decoded;
use super::write::{Apply, Door};
use super::{Store, View};
use crate::model::Pvc;
use crate::rules::rwo_lock::RWO_LOCK;
use kube::api::{Api, Patch, PatchParams};
use std::sync::Arc;

/// How a swap ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swap {
    /// The lock is on the claim.
    Written,
    /// Someone wrote the claim since it was read: read again, decide again.
    Conflict,
    /// No answer in time, or the connection failed mid-request: the write may still land.
    Unconfirmed(String),
    /// The apiserver refused the write (the claim is gone, no permission, ...): nothing was
    /// written, and the rule decides as it does without facts.
    Failed(String),
}

/// Put `lock` (encoded) on `pvc`, if `pvc` is still what the cluster holds, answered by `until`
/// at the latest (the decision's deadline less its margin). The write gets all of it: an
/// unanswered write may still land and then holds its node for the lock's grace, so a late
/// answer is worth more than time kept for a retry (at 5,000 nodes a 1.5 s cap left 4,612 writes
/// unconfirmed and their pods refused elsewhere for up to 703 s).
pub struct LockSwap<'a> {
    pub pvc: &'a Pvc,
    pub lock: &'a str,
    pub until: tokio::time::Instant,
}

impl Apply for LockSwap<'_> {
    type Answer = Swap;

    async fn apply_to(self, w: &Writer, _: Door) -> Swap {
        let LockSwap { pvc, lock, until } = self;
        let Some(remote) = &w.remote else {
            return swap_in_memory(&w.store, pvc, lock);
        };
        let Some(rv) = pvc.metadata.resource_version.as_deref() else {
            return Swap::Conflict;
        };
        let api = Api::<Decoded<Pvc>>::namespaced(remote.client.clone(), &pvc.metadata.namespace);
        let patch = serde_json::json!({"metadata": {
            "resourceVersion": rv,
            "annotations": {RWO_LOCK: lock},
        }});
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let write = api.patch(&pvc.metadata.name, &params, &patch);
        match tokio::time::timeout_at(until, write).await {
            Err(_) => Swap::Unconfirmed("the apiserver did not answer the write in time".into()),
            Ok(Ok(stored)) => {
                // The next placement on this replica reads the lock from memory at once.
                w.store.pvcs.apply(stored.into_inner());
                Swap::Written
            }
            Ok(Err(kube::Error::Api(e))) if e.code == 409 => Swap::Conflict,
            // Throttled or failing (429, 5xx: a 504's write may still land): refused as
            // unconfirmed, for the scheduler to retry. Allowed without its lock, a
            // placement renaming the lock would leave it naming the one before, which
            // another replica may then take over while this one lands (adversary review).
            Ok(Err(kube::Error::Api(e))) if e.code == 429 || e.code >= 500 => {
                Swap::Unconfirmed(format!("writing the lock: {e}"))
            }
            // Any other status: the apiserver decided, nothing was written (a permission
            // missing: allowed as if volguard were down). Anything else (a connection
            // lost mid-request) leaves it open whether the write landed.
            Ok(Err(kube::Error::Api(e))) => Swap::Failed(format!("writing the lock: {e}")),
            Ok(Err(e)) => Swap::Unconfirmed(format!("writing the lock: {e}")),
        }
    }
}

/// Record a release allowed on proof (rules.md §7) as a NodeFence; offline, into the store.
/// Answers the record's name.
pub struct ReleaseRecord<'a> {
    pub node: &'a str,
    pub release: crate::model::fence::Release,
}

impl Apply for ReleaseRecord<'_> {
    type Answer = Result<String, String>;

    async fn apply_to(self, w: &Writer, _: Door) -> Result<String, String> {
        let ReleaseRecord { node, release } = self;
        match &w.remote {
            None => {
                let store = &w.store;
                let mut f = crate::model::fence::NodeFence::default();
                f.metadata.name = format!("{node}-recorded-{}", store.fences.len() + 1);
                f.spec.node = node.to_string();
                f.spec.release = Some(release);
                let name = f.metadata.name.clone();
                store.fences.apply(f);
                Ok(name)
            }
            Some(remote) => super::fences::record_release(&remote.client, node, release)
                .await
                .map(|f| f.metadata.name)
                .map_err(|e| crate::error::chain(&e)),
        }
    }
}

/// The swap of a `--state` file's view: the same compare and set, in memory under the store's
/// lock.
fn swap_in_memory(store: &Store, pvc: &Pvc, lock: &str) -> Swap {
    let Ok(_guard) = store.swap.lock() else {
        return Swap::Failed("the in-memory lock table is poisoned".into());
    };
    let ns = &pvc.metadata.namespace;
    let Some(now) = store.pvcs.get(ns, &pvc.metadata.name) else {
        return Swap::Failed(format!(
            "PersistentVolumeClaim {:?} is gone",
            pvc.metadata.name
        ));
    };
    if now.metadata.annotation(RWO_LOCK) != pvc.metadata.annotation(RWO_LOCK) {
        return Swap::Conflict;
    }
    let mut next = (*now).clone();
    next.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(RWO_LOCK, lock);
    store.pvcs.apply(next);
    Swap::Written
}

/// The writer over the view's source (`View::writer`): a job holds it and the view, never a
/// client. Patches go under its field manager, Events under its reporter name. On a `--state`
/// file the lock's swap and release records are kept in memory, and any other write fails
/// (`Offline`).
#[derive(Clone)]
pub struct Writer {
    /// The view's stores: the swap's compare and set offline, and its result live.
    store: Arc<Store>,
    /// `None`: a `--state` file.
    remote: Option<Remote>,
    pub(super) params: PatchParams,
    /// The webhook's audit trail (`Writer::audit`), when this writer keeps one.
    pub(super) trail: Option<super::audit::Trail>,
}

#[derive(Clone)]
struct Remote {
    client: kube::Client,
    recorder: kube::runtime::events::Recorder,
}

/// A write that needs the cluster, asked of a `--state` file's writer.
#[derive(Debug, thiserror::Error)]
#[error("a --state file is read only: there is no cluster to write to")]
pub struct Offline;

impl View {
    /// The writer over this view's source, writing as `field_manager`; `identity` is this
    /// replica, as its Events name it.
    pub fn writer(&self, field_manager: &str, identity: String) -> Writer {
        let client = self.live.as_ref().map(|l| l.client.clone());
        Writer::new(self.store.clone(), client, field_manager, identity)
    }
}

impl Writer {
    pub(super) fn new(
        store: Arc<Store>,
        client: Option<kube::Client>,
        field_manager: &str,
        identity: String,
    ) -> Writer {
        let remote = client.map(|client| Remote {
            recorder: kube::runtime::events::Recorder::new(
                client.clone(),
                kube::runtime::events::Reporter {
                    controller: field_manager.to_string(),
                    instance: Some(identity),
                },
            ),
            client,
        });
        Writer {
            store,
            remote,
            params: PatchParams {
                field_manager: Some(field_manager.to_string()),
                ..Default::default()
            },
            trail: None,
        }
    }

    /// The client of a live writer (`Offline` for a `--state` file).
    pub(super) fn client(&self) -> Result<&kube::Client, kube::Error> {
        self.remote
            .as_ref()
            .map(|r| &r.client)
            .ok_or_else(|| kube::Error::Service(Box::new(Offline)))
    }

    /// Publish an Event under this writer's reporter.
    pub(super) async fn publish(
        &self,
        note: super::write::Note,
        on: &k8s_openapi::api::core::v1::ObjectReference,
    ) -> Result<(), kube::Error> {
        let Some(remote) = &self.remote else {
            return Err(kube::Error::Service(Box::new(Offline)));
        };
        remote.recorder.publish(&note.event(), on).await
    }
}
