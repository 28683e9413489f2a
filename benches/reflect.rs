//! One kube-rs reflector, as kube-rs's documentation runs it: a `watcher` over the whole
//! collection, reflected into a `Store`, its stream driven by a task. Shared by the peers' cache
//! (`kube_rs_cache.rs`) and the writing floor (`floor_writer.rs`).

use futures::StreamExt;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};

/// `prune` cuts each object down before it is stored (kube-rs's `WatchStreamExt::modify`, the way
/// its documentation keeps a cache small); `|_| {}` keeps whole objects.
pub fn reflect<K, F>(api: Api<K>, prune: F) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    F: FnMut(&mut K) + Send + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(prune)
        .reflect(writer)
        .applied_objects();
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    store
}
