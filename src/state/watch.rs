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
    let mut listing = Listing::default();
    while let Some(ev) = next(&mut stream).await {
        if listing.on(ev, target.map(), &mut notify) {
            synced.store(true, Ordering::Release);
        }
    }
}

/// What a watch has read of its current listing: the objects buffered until the listing is
/// whole, the newest resourceVersion among them, and whether an event was skipped since it began.
struct Listing<T> {
    buffer: Vec<T>,
    listed: u64,
    /// The map may lack a change its mark would vouch for: it vouches for nothing until the next
    /// listing.
    skipped: bool,
}

impl<T> Default for Listing<T> {
    fn default() -> Self {
        Listing {
            buffer: Vec::new(),
            listed: 0,
            skipped: false,
        }
    }
}

impl<T: Wire> Listing<T> {
    /// Apply one item of the watch to `map`, then `notify`, then its `Mark` (so a reader that
    /// sees the version sees the map and the indexes `notify` keeps). True once a listing is
    /// whole (the map synced).
    fn on(
        &mut self,
        ev: Result<Event<Decoded<T>>, watcher::Error>,
        map: &ObjectMap<T>,
        notify: &mut impl FnMut(Change<T>),
    ) -> bool {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                if skips_an_event(&e) {
                    self.skipped = true;
                    map.mark.relisting();
                }
                let skipped = self.skipped;
                tracing::warn!(kind = T::KIND, error = %e, skipped, "watch error; retrying");
                return false;
            }
        };
        let version = |t: &T| version_of(t.meta().resource_version.as_deref());
        match ev {
            Event::Init => {
                *self = Listing::default();
            }
            Event::InitApply(d) => {
                let t = d.into_inner();
                self.listed = self.listed.max(version(&t));
                self.buffer.push(t);
            }
            Event::InitDone => {
                map.mark.relisting();
                map.replace(std::mem::take(&mut self.buffer));
                tracing::info!(kind = T::KIND, objects = map.len(), "cache synced");
                notify(Change::Relisted);
                self.vouch(map, self.listed);
                return true;
            }
            Event::Apply(d) => {
                let t = d.into_inner();
                let v = version(&t);
                let (ns, name) = (t.meta().namespace.clone(), t.meta().name.clone());
                let old = map.apply(t);
                if let Some(new) = map.get(&ns, &name) {
                    notify(Change::Applied { old, new });
                }
                self.vouch(map, v);
            }
            Event::Delete(d) => {
                let mut t = d.into_inner();
                let v = version(&t);
                let m = t.meta();
                let old = map.delete(&m.namespace, &m.name);
                t.prune();
                notify(Change::Deleted(old.unwrap_or_else(|| Arc::new(t))));
                self.vouch(map, v);
            }
        }
        false
    }

    fn vouch(&self, map: &ObjectMap<T>, version: u64) {
        if !self.skipped {
            map.mark.applied(version);
        }
    }
}

/// A resourceVersion as a number (0: none, or not a number).
fn version_of(v: Option<&str>) -> u64 {
    v.and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Whether a watch error means an event was skipped, the stream going on without it: a line
/// that did not decode (kube's client reports it and reads the next). A failed connection or
/// request is resumed from the last version received, and an expired one relisted: nothing lost.
fn skips_an_event(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::WatchFailed(
            kube::Error::SerdeError(_) | kube::Error::LinesCodecMaxLineLengthExceeded
        )
    )
}

async fn next<S: Stream + Unpin>(s: &mut S) -> Option<S::Item> {
    s.next().await
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
