//! The live view's watches: each keeps one map of the store equal to the collection it lists,
//! with a synced flag, and publishes every applied change to the view's subscribers.

use super::change::{Change, ViewChange};
use super::decoded::{Decoded, Wire};
use super::{ObjectMap, Store};
use crate::model::Pod;
use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The watches a live view starts, each keeping one map of `store` equal to the collection its
/// `api` lists, with a synced flag, and publishing every applied change to subscribers.
pub(super) struct Watches {
    pub(super) store: Arc<Store>,
    pub(super) synced: Vec<Arc<AtomicBool>>,
    pub(super) changes: tokio::sync::broadcast::Sender<ViewChange>,
}

impl Watches {
    pub(super) fn watch<T>(
        &mut self,
        api: Api<Decoded<T>>,
        pick: Pick<T>,
        wrap: fn(Change<T>) -> ViewChange,
    ) where
        T: Wire + DeserializeOwned + std::fmt::Debug + super::Object + Send + Sync + 'static,
    {
        self.watch_with(api, pick, wrap, |_, _| {});
    }

    /// As `watch`, publishing nothing.
    pub(super) fn watch_quiet<T>(&mut self, api: Api<Decoded<T>>, pick: Pick<T>)
    where
        T: Wire + DeserializeOwned + std::fmt::Debug + super::Object + Send + Sync + 'static,
    {
        let flag = Arc::new(AtomicBool::new(false));
        self.synced.push(flag.clone());
        let cache = store_ref(&self.store, pick);
        tokio::spawn(run_watch(api, initial_list(), cache, flag, |_| {}));
    }

    /// As `watch`, with `first` run on each change before subscribers hear of it.
    pub(super) fn watch_with<T>(
        &mut self,
        api: Api<Decoded<T>>,
        pick: Pick<T>,
        wrap: fn(Change<T>) -> ViewChange,
        first: fn(&Store, &Change<T>),
    ) where
        T: Wire + DeserializeOwned + std::fmt::Debug + super::Object + Send + Sync + 'static,
    {
        let flag = Arc::new(AtomicBool::new(false));
        self.synced.push(flag.clone());
        let (store, tx) = (self.store.clone(), self.changes.clone());
        let notify = move |c| {
            first(&store, &c);
            let _ = tx.send(wrap(c));
        };
        let cache = store_ref(&self.store, pick);
        tokio::spawn(run_watch(api, initial_list(), cache, flag, notify));
    }
}

type Pick<T> = fn(&Store) -> &ObjectMap<T>;

/// The initial list as a watch stream (`sendInitialEvents`, the apiserver's WatchList, on by
/// default since Kubernetes 1.32): the objects arrive from the watch cache as events on one
/// request, not as pages of LIST responses each a round trip that the apiserver buffers whole.
fn initial_list() -> watcher::Config {
    watcher::Config::default().streaming_lists()
}

/// The pod watch keeps the claim index, ahead of subscribers: one that reacts to a pod change
/// reads the index already updated.
pub(super) fn index_claims(store: &Store, c: &Change<Pod>) {
    match c {
        Change::Applied { old, new } => {
            if let Some(o) = old {
                store.claims.remove(o);
                if o.metadata.uid != new.metadata.uid {
                    gone(store, o);
                }
            }
            store.claims.add(new);
        }
        Change::Deleted(old) => {
            store.claims.remove(old);
            gone(store, old);
        }
        Change::Relisted => {
            let pods = store.pods.all();
            store.claims.rebuild(pods.iter().map(|p| p.as_ref()));
        }
    }
}

/// A pod that named claims went: a lock written for it may be judged at once (`GonePods`).
fn gone(store: &Store, pod: &Pod) {
    if crate::rules::claims::uses_claims(pod) {
        store.gone_pods.note(&pod.metadata.uid);
    }
}

/// A handle on one map of a shared store.
pub(super) struct StoreRef<T> {
    store: Arc<Store>,
    pick: fn(&Store) -> &ObjectMap<T>,
}

impl<T: super::Object> StoreRef<T> {
    pub(super) fn map(&self) -> &ObjectMap<T> {
        (self.pick)(&self.store)
    }
}

pub(super) fn store_ref<T>(store: &Arc<Store>, pick: fn(&Store) -> &ObjectMap<T>) -> StoreRef<T> {
    StoreRef {
        store: store.clone(),
        pick,
    }
}

/// Keep `target` equal to the watched collection; call `notify` after each change. Runs until the
/// task is dropped; watch errors are retried with kube-runtime's default backoff.
pub(super) async fn run_watch<T>(
    api: Api<Decoded<T>>,
    config: watcher::Config,
    target: StoreRef<T>,
    synced: Arc<AtomicBool>,
    mut notify: impl FnMut(Change<T>) + Send,
) where
    T: Wire + DeserializeOwned + std::fmt::Debug,
{
    let stream = watcher::watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    let mut buffer: Vec<T> = Vec::new();
    // The newest resourceVersion of the listing being buffered (what its `Mark` vouches for).
    let mut listed: Option<Box<str>> = None;
    let newer = |a: Option<Box<str>>, b: Option<&str>| -> Option<Box<str>> {
        let n = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match n(b) > n(a.as_deref()) {
            true => b.map(Box::from),
            false => a,
        }
    };
    while let Some(ev) = next(&mut stream).await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                tracing::warn!(kind = T::KIND, error = %e, "watch error; retrying");
                continue;
            }
        };
        let map = target.map();
        match ev {
            Event::Init => {
                buffer.clear();
                listed = None;
            }
            Event::InitApply(d) => {
                let t = d.into_inner();
                listed = newer(listed, t.meta().resource_version.as_deref());
                buffer.push(t);
            }
            Event::InitDone => {
                map.mark.relisting();
                map.replace(std::mem::take(&mut buffer));
                synced.store(true, Ordering::Release);
                tracing::info!(kind = T::KIND, objects = map.len(), "cache synced");
                notify(Change::Relisted);
                map.mark.applied(listed.take().as_deref());
            }
            // Marked once the map and the indexes `notify` keeps hold the change.
            Event::Apply(d) => {
                let t = d.into_inner();
                let version = t.meta().resource_version.clone();
                let (ns, name) = (t.meta().namespace.clone(), t.meta().name.clone());
                let old = map.apply(t);
                if let Some(new) = map.get(&ns, &name) {
                    notify(Change::Applied { old, new });
                }
                map.mark.applied(version.as_deref());
            }
            Event::Delete(d) => {
                let mut t = d.into_inner();
                let version = t.meta().resource_version.clone();
                let m = t.meta();
                let old = map.delete(&m.namespace, &m.name);
                t.prune();
                notify(Change::Deleted(old.unwrap_or_else(|| Arc::new(t))));
                map.mark.applied(version.as_deref());
            }
        }
    }
}

async fn next<S: Stream + Unpin>(s: &mut S) -> Option<S::Item> {
    s.next().await
}
