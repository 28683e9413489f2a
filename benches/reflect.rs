//! One kube-rs reflector, as kube-rs's documentation runs it: a `watcher` over the whole
//! collection, reflected into a `Store`, its stream driven by a task. Shared by the peers' cache
//! (`kube_rs_cache.rs`) and the writing floor (`floor_writer.rs`).

use futures::StreamExt;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};

pub fn reflect<K>(api: Api<K>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    store
}
