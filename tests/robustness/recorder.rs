//! The history's recorder: every pod and Node change the watches see (a pod removed from the API
//! while a container of it still ran is a release; so is a Node given the out-of-service taint),
//! and every record each volume's log held at any read (a record seen once and gone later is lost).

use super::checker::Release;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
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

fn out_of_service(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == "node.kubernetes.io/out-of-service")
        })
}

impl Recorder {
    pub fn start(client: kube::Client, ns: &str, logs: Vec<PathBuf>) -> Recorder {
        let out = Arc::new(Mutex::new(Recorded::default()));
        let mut tasks = Vec::new();
        // Pods: the last state of each; a Delete whose object still ran is a release.
        let (o, pods) = (out.clone(), Api::<Pod>::namespaced(client.clone(), ns));
        tasks.push(tokio::spawn(async move {
            let mut last: BTreeMap<String, Pod> = BTreeMap::new();
            let mut s = watcher::watcher(pods, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(e) = s.next().await {
                let Ok(e) = e else { continue };
                match e {
                    Event::Apply(p) | Event::InitApply(p) => {
                        let uid = p.metadata.uid.clone().unwrap_or_default();
                        last.insert(uid, p);
                    }
                    Event::Delete(p) => {
                        let uid = p.metadata.uid.clone().unwrap_or_default();
                        let before = last.remove(&uid);
                        let ran = before.as_ref().is_some_and(still_running) || still_running(&p);
                        if ran {
                            let node = p
                                .spec
                                .as_ref()
                                .and_then(|s| s.node_name.clone())
                                .unwrap_or_default();
                            lock(&o).releases.push(Release {
                                at: uptime(),
                                node,
                                what: format!(
                                    "pod {}/{}",
                                    p.metadata.namespace.unwrap_or_default(),
                                    p.metadata.name.unwrap_or_default()
                                ),
                            });
                        }
                    }
                    Event::Init | Event::InitDone => {}
                }
            }
        }));
        // Nodes: the out-of-service taint appearing is a release of every volume on the node.
        let (o, nodes) = (out.clone(), Api::<Node>::all(client));
        tasks.push(tokio::spawn(async move {
            let mut tainted: BTreeSet<String> = BTreeSet::new();
            let mut s = watcher::watcher(nodes, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(e) = s.next().await {
                let Ok(Event::Apply(n) | Event::InitApply(n)) = e else {
                    continue;
                };
                let name = n.metadata.name.clone().unwrap_or_default();
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
            }
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
