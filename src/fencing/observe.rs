//! What the fencing controller reads: node Leases (with volguard's own clock of when each last
//! changed), Nodes, and the pods, claims, classes and namespaces that decide whether a node's
//! partition concerns volguard at all. Reads are live: a partition is rare, and a decision to
//! fence must not rest on a cache.

use crate::model::fence::{BackendKind, FENCE_BACKENDS, FENCING};
use crate::rules::fencing::{self, Mode, NodeHealth, Storage, Tolerates};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

pub const LEASE_NAMESPACE: &str = "kube-node-lease";
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// When each node's Lease renewTime last changed, by this process's clock (the kubelet's clock
/// is never compared with ours, as kube-controller-manager does it). A process that just started
/// has seen every Lease change "now": it waits a full `--partition-after` before it fences.
#[derive(Default)]
pub struct LeaseClock {
    seen: HashMap<String, (Option<String>, Instant)>,
}

impl LeaseClock {
    pub fn observe(
        &mut self,
        node: &str,
        renew: Option<String>,
        now: Instant,
    ) -> std::time::Duration {
        let entry = self
            .seen
            .entry(node.to_string())
            .or_insert_with(|| (renew.clone(), now));
        if entry.0 != renew {
            *entry = (renew, now);
        }
        now.duration_since(entry.1)
    }
    pub fn forget_except(&mut self, nodes: &[String]) {
        self.seen.retain(|n, _| nodes.contains(n));
    }
}

/// A Lease's renewTime as written (compared as text: only "changed or not" matters).
pub fn renew_time(l: &Lease) -> Option<String> {
    l.spec
        .as_ref()?
        .renew_time
        .as_ref()
        .map(|t| t.0.to_string())
}

pub fn ready(n: &Node) -> (Option<bool>, Option<jiff::Timestamp>) {
    let Some(c) = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
    else {
        return (None, None);
    };
    let changed = c
        .last_transition_time
        .as_ref()
        .and_then(|t| t.0.to_string().parse().ok());
    (Some(c.status == "True"), changed)
}

pub fn is_control_plane(n: &Node) -> bool {
    n.metadata.labels.as_ref().is_some_and(|l| {
        l.contains_key("node-role.kubernetes.io/control-plane")
            || l.contains_key("node-role.kubernetes.io/master")
    })
}

pub fn addresses(n: &Node) -> Vec<String> {
    n.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| {
            a.iter()
                .filter(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP")
                .map(|a| a.address.clone())
                .collect()
        })
        .unwrap_or_default()
}

pub fn health(n: &Node, silent: Option<std::time::Duration>) -> NodeHealth {
    let (ready, ready_changed) = ready(n);
    NodeHealth {
        lease_silent_for: silent.and_then(|d| jiff::SignedDuration::try_from(d).ok()),
        ready,
        ready_changed,
        control_plane: is_control_plane(n),
        maintenance: maintenance(n),
    }
}

/// The machine's boot as the kubelet reports it (`status.nodeInfo.bootID`): a new one after a
/// fence proves the machine restarted.
pub fn boot_id(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .node_info
        .as_ref()
        .map(|i| i.boot_id.clone())
        .filter(|b| !b.is_empty())
}

/// The volumes the kubelet reports mounted (`volumesInUse`) or attached (`volumesAttached`).
pub fn volumes(n: &Node) -> Vec<String> {
    let Some(s) = n.status.as_ref() else {
        return Vec::new();
    };
    let mut v: Vec<String> = s.volumes_in_use.clone().unwrap_or_default();
    v.extend(s.volumes_attached.iter().flatten().map(|a| a.name.clone()));
    v.sort();
    v.dedup();
    v
}

/// The KEP-5683 condition (alpha in 1.37, `NodeLifecycleConditions`) that says the node is in
/// planned maintenance, if one is True: read when present.
pub fn maintenance(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| fencing::MAINTENANCE_CONDITIONS.contains(&c.type_.as_str()) && c.status == "True")
        .map(|c| c.type_.clone())
}

/// The pods on a partitioned node that hold opted-in ReadWriteOnce claims.
#[derive(Debug, Default)]
pub struct Affected {
    /// `namespace/pod` → its claims (namespace/claim).
    pub pods: BTreeMap<String, Vec<String>>,
    /// The incident's backends: manual when any affected pod asks for manual fencing.
    pub mode: Option<Mode>,
    /// The first claim's class that names its own backends (`volguard.io/fence-backends`).
    pub class_backends: Option<Vec<BackendKind>>,
    pub tolerations: Vec<Tolerates>,
}

impl Affected {
    pub fn backends(&self, auto: &[BackendKind]) -> Vec<BackendKind> {
        match (self.mode, &self.class_backends) {
            (Some(Mode::Manual), _) => vec![BackendKind::Manual],
            (_, Some(b)) => b.clone(),
            _ => auto.to_vec(),
        }
    }
}

fn annotation<'a>(
    m: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    m.annotations.as_ref()?.get(key).map(String::as_str)
}

fn tolerates(p: &Pod) -> Tolerates {
    let mut out = Tolerates::NotAtAll;
    for t in p.spec.iter().flat_map(|s| s.tolerations.iter().flatten()) {
        let key_matches = match t.key.as_deref() {
            Some(k) if !k.is_empty() => k == UNREACHABLE,
            _ => t.operator.as_deref() == Some("Exists"),
        };
        let effect_matches = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == "NoExecute");
        if !(key_matches && effect_matches) {
            continue;
        }
        match t.toleration_seconds {
            None => return Tolerates::Forever,
            Some(s) => {
                out = match out {
                    Tolerates::Seconds(o) if o >= s => out,
                    _ => Tolerates::Seconds(s),
                }
            }
        }
    }
    out
}

/// The pod in volguard's model, where "terminal" and "its claims" have their one definition
/// (`model::Pod::is_terminal`, `rules::claims::claims_of`). A pod that does not decode counts
/// as running, with the claims it can be seen to name (when unsure, in use).
fn modelled(p: &Pod) -> crate::model::Pod {
    serde_json::to_string(p)
        .ok()
        .and_then(|t| crate::model::from_json(&t).ok())
        .unwrap_or_default()
}

/// The non-terminal pods of a node with the claims each uses (their namespace's names).
fn running_with_claims(pods: &[Pod]) -> Vec<(String, String, &Pod, Vec<String>)> {
    pods.iter()
        .filter_map(|p| {
            let m = modelled(p);
            if m.is_terminal() {
                return None;
            }
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let name = p.metadata.name.clone().unwrap_or_default();
            let claims = crate::rules::claims::claims_of(&m)
                .map(|c| c.name)
                .collect();
            Some((ns, name, p, claims))
        })
        .collect()
}

/// Read what runs on `node` and which of it opted in (rules.md §7 "Opt in").
pub async fn affected(client: &kube::Client, node: &str) -> Result<Affected, kube::Error> {
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?;
    // Class name → (its fencing mode, its own backends).
    type ClassPolicy = (Option<String>, Option<Vec<BackendKind>>);
    let classes: HashMap<String, ClassPolicy> = Api::<StorageClass>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|c| {
            let mode = annotation(&c.metadata, FENCING).map(str::to_string);
            let backends =
                annotation(&c.metadata, FENCE_BACKENDS).and_then(BackendKind::parse_list);
            (c.metadata.name.unwrap_or_default(), (mode, backends))
        })
        .collect();
    let mut namespaces: HashMap<String, Option<String>> = HashMap::new();
    let mut out = Affected::default();
    for (ns, name, p, claims) in running_with_claims(&pods.items) {
        if claims.is_empty() {
            continue;
        }
        if !namespaces.contains_key(&ns) {
            let a = Api::<Namespace>::all(client.clone())
                .get_opt(&ns)
                .await?
                .and_then(|n| annotation(&n.metadata, FENCING).map(str::to_string));
            namespaces.insert(ns.clone(), a);
        }
        let pvcs = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
        let mut held = Vec::new();
        let mut pod_mode = Mode::Off;
        for c in claims {
            let Some(pvc) = pvcs.get_opt(&c).await? else {
                continue;
            };
            // "Is it ReadWriteOnce" has one definition: the lock's (`model::Pvc::is_rwo`).
            let rwo = serde_json::to_string(&pvc)
                .ok()
                .and_then(|t| crate::model::from_json::<crate::model::Pvc>(&t).ok())
                .is_none_or(|m| m.is_rwo());
            if !rwo {
                continue;
            }
            let spec = pvc.spec.unwrap_or_default();
            let (class, backends) = spec
                .storage_class_name
                .as_ref()
                .and_then(|c| classes.get(c).cloned())
                .unwrap_or_default();
            let m = fencing::mode(
                annotation(&p.metadata, FENCING),
                namespaces.get(&ns).and_then(|a| a.as_deref()),
                class.as_deref(),
            );
            if m != Mode::Off {
                if out.class_backends.is_none() {
                    out.class_backends = backends;
                }
                pod_mode = if pod_mode == Mode::Manual {
                    Mode::Manual
                } else {
                    m
                };
                held.push(format!("{ns}/{c}"));
            }
        }
        if held.is_empty() {
            continue;
        }
        out.mode = match (out.mode, pod_mode) {
            (Some(Mode::Manual), _) | (_, Mode::Manual) => Some(Mode::Manual),
            _ => Some(Mode::Auto),
        };
        out.tolerations.push(tolerates(p));
        out.pods.insert(format!("{ns}/{name}"), held);
    }
    Ok(out)
}

/// The storage systems behind every claim the node's non-terminal pods use (rules.md §7 "A fence
/// has a scope"): what the out-of-service taint would release. Live reads.
pub async fn storage_on(client: &kube::Client, node: &str) -> Result<Vec<Storage>, kube::Error> {
    use k8s_openapi::api::core::v1::PersistentVolume;
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?;
    let pvs = Api::<PersistentVolume>::all(client.clone());
    let mut out = Vec::new();
    for (ns, _, _, claims) in running_with_claims(&pods.items) {
        let pvcs = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
        for claim in claims {
            let volume = pvcs
                .get_opt(&claim)
                .await?
                .and_then(|c| c.spec?.volume_name)
                .filter(|v| !v.is_empty());
            let pv = match volume {
                Some(v) => pvs.get_opt(&v).await?,
                None => None,
            };
            out.push(match pv.and_then(|pv| pv.spec) {
                Some(spec) => storage_of(&spec),
                None => Storage::Unknown(format!("{ns}/{claim}")),
            });
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The storage system of a PersistentVolume: its CSI driver, else the in-tree source's kind.
fn storage_of(spec: &k8s_openapi::api::core::v1::PersistentVolumeSpec) -> Storage {
    if let Some(csi) = &spec.csi {
        return Storage::Csi(csi.driver.clone());
    }
    let kind = serde_json::to_value(spec)
        .ok()
        .and_then(|v| {
            v.as_object()?
                .keys()
                .find(|k| {
                    !matches!(
                        k.as_str(),
                        "accessModes"
                            | "capacity"
                            | "claimRef"
                            | "mountOptions"
                            | "nodeAffinity"
                            | "persistentVolumeReclaimPolicy"
                            | "storageClassName"
                            | "volumeMode"
                            | "volumeAttributesClassName"
                    )
                })
                .cloned()
        })
        .unwrap_or_else(|| "unknown".into());
    Storage::InTree(kind)
}

/// Every node's Lease, by node name.
pub async fn leases(client: &kube::Client) -> Result<HashMap<String, Option<String>>, kube::Error> {
    Ok(Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE)
        .list(&ListParams::default().match_any())
        .await?
        .items
        .into_iter()
        .map(|l| (l.metadata.name.clone().unwrap_or_default(), renew_time(&l)))
        .collect())
}

/// One node's Lease renewTime, read live (quorum): what proof and recovery rest on.
pub async fn lease(client: &kube::Client, node: &str) -> Result<Option<String>, kube::Error> {
    Ok(Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE)
        .get_opt(node)
        .await?
        .and_then(|l| renew_time(&l)))
}
