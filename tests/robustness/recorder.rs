//! The history's recorder: every pod and Node change the watches see (a pod removed from the API
//! while a container of it still ran is a release; so is a Node given the out-of-service taint),
//! and every record each volume's log held at any read (a record seen once and gone later is lost).

use super::checker::{NotReady, Release};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Seconds since the machine booted: the writers' clock.
pub fn uptime() -> f64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

#[derive(Default)]
pub struct Recorded {
    /// Per volume log, every (writer, seq) any read found.
    pub seen: BTreeMap<PathBuf, BTreeSet<(String, u64)>>,
    pub releases: Vec<Release>,
    pub not_ready: Vec<NotReady>,
}

pub struct Recorder {
    out: Arc<Mutex<Recorded>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A container of the pod was running when it was last seen: removing it from the API frees its
/// volumes while it may still write.
fn still_running(p: &Pod) -> bool {
    let s = p.status.as_ref();
    s.and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()))
        })
}

fn release_of(p: &Pod) -> Release {
    Release {
        at: uptime(),
        node: p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
        what: format!(
            "pod {}/{}",
            p.metadata.namespace.as_deref().unwrap_or_default(),
            p.metadata.name.as_deref().unwrap_or_default()
        ),
    }
}

fn ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn out_of_service(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == "node.kubernetes.io/out-of-service")
        })
}

/// Every event of `api` from now on, resumed from the last resourceVersion seen whenever the
/// stream breaks (the apiserver restarting): the apiserver runs without its watch cache and without
/// compaction, so a watch from an old resourceVersion replays what happened meanwhile and nothing is
/// missed (a relist would show a pod gone without its last state).
async fn every_event<K>(api: Api<K>, mut on: impl FnMut(WatchEvent<K>) + Send)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut rv = loop {
        match api.list(&ListParams::default()).await {
            Ok(l) => {
                for o in l.items {
                    on(WatchEvent::Added(o));
                }
                break l.metadata.resource_version.unwrap_or_default();
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    };
    loop {
        if let Ok(s) = api.watch(&WatchParams::default().timeout(60), &rv).await {
            let mut s = s.boxed();
            while let Some(Ok(e)) = s.next().await {
                match &e {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                        if let Some(v) = o.meta().resource_version.clone() {
                            rv = v;
                        }
                    }
                    WatchEvent::Bookmark(b) => rv = b.metadata.resource_version.clone(),
                    WatchEvent::Error(e) => {
                        panic!("the history's watch failed: {e:?} (compacted?)")
                    }
                }
                on(e);
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

impl Recorder {
    pub fn start(client: kube::Client, ns: &str, logs: Vec<PathBuf>) -> Recorder {
        let out = Arc::new(Mutex::new(Recorded::default()));
        let mut tasks = Vec::new();
        // Pods: the last state of each; a deletion whose object still ran is a release.
        let (o, pods) = (out.clone(), Api::<Pod>::namespaced(client.clone(), ns));
        tasks.push(tokio::spawn(async move {
            let mut last: BTreeMap<String, Pod> = BTreeMap::new();
            every_event(pods, move |e| match e {
                WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                    last.insert(p.metadata.uid.clone().unwrap_or_default(), p);
                }
                WatchEvent::Deleted(p) => {
                    let before = last.remove(p.metadata.uid.as_deref().unwrap_or_default());
                    if before.as_ref().is_some_and(still_running) || still_running(&p) {
                        lock(&o).releases.push(release_of(&p));
                    }
                }
                _ => {}
            })
            .await;
        }));
        // Nodes: the out-of-service taint appearing is a release of every volume on the node.
        let (o, nodes) = (out.clone(), Api::<Node>::all(client));
        tasks.push(tokio::spawn(async move {
            let mut tainted: BTreeSet<String> = BTreeSet::new();
            let mut not_ready: BTreeSet<String> = BTreeSet::new();
            every_event(nodes, move |e| {
                let (WatchEvent::Added(n) | WatchEvent::Modified(n)) = e else {
                    return;
                };
                let name = n.metadata.name.clone().unwrap_or_default();
                if !ready(&n) {
                    if not_ready.insert(name.clone()) {
                        lock(&o).not_ready.push(NotReady {
                            at: uptime(),
                            node: name.clone(),
                        });
                    }
                } else {
                    not_ready.remove(&name);
                }
                if out_of_service(&n) {
                    if tainted.insert(name.clone()) {
                        lock(&o).releases.push(Release {
                            at: uptime(),
                            node: name,
                            what: "taint".into(),
                        });
                    }
                } else {
                    tainted.remove(&name);
                }
            })
            .await;
        }));
        // The logs, read every half second.
        let o = out.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                for p in &logs {
                    let text = std::fs::read_to_string(p).unwrap_or_default();
                    let snap = super::support::records::snapshot(&text);
                    lock(&o).seen.entry(p.clone()).or_default().extend(snap);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }));
        Recorder { out, tasks }
    }

    pub fn stop(self) -> Recorded {
        for t in &self.tasks {
            t.abort();
        }
        std::mem::take(&mut *lock(&self.out))
    }
}
