//! The fence backends (rules.md §7 "Fence"): each answers "fenced", "not yet" or "failed" for an
//! incident, and can undo its fence. Every call is idempotent by incident: a controller that
//! restarts asks again and the backend fences once.

use crate::fencing::incident::Records;
use crate::model::fence::{BackendKind, NodeFence};
use crate::rules::Fact;
use crate::state::Write;
use crate::state::query;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What a backend answered: `rules::fencing::Answer` (the phase machine reads it).
pub use crate::rules::fencing::Answer;

/// The webhook backend's settings (`--fence-webhook-*`).
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    pub url: String,
    /// PEM bundle the agent's certificate chains to (none: the system roots).
    pub ca_pem: Option<Vec<u8>>,
    pub timeout: Duration,
}

/// The networkfence backend's settings (`--networkfence-*`).
#[derive(Debug, Clone, Default)]
pub struct NetworkFenceConfig {
    pub class: Option<String>,
    pub driver: Option<String>,
    pub secret: Option<(String, String)>,
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct Backends {
    pub webhook: Option<WebhookConfig>,
    pub networkfence: NetworkFenceConfig,
    pub manual_timeout: Duration,
    http: Option<reqwest::Client>,
}

/// The fence agent protocol (docs/fencing.md): one JSON request per call, idempotent by incident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FenceRequest {
    pub incident: String,
    pub node: String,
    #[serde(default)]
    pub addresses: Vec<String>,
    /// `fence` or `unfence`.
    pub action: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FenceResponse {
    /// `Done`, `InProgress` or `Failed`.
    pub state: String,
    #[serde(default)]
    pub message: String,
}

impl Backends {
    pub fn new(
        webhook: Option<WebhookConfig>,
        networkfence: NetworkFenceConfig,
        manual_timeout: Duration,
    ) -> anyhow::Result<Backends> {
        let http = match &webhook {
            None => None,
            Some(w) => {
                let mut b = reqwest::Client::builder()
                    .use_rustls_tls()
                    .https_only(true)
                    .connect_timeout(Duration::from_secs(5));
                if let Some(pem) = &w.ca_pem {
                    for cert in reqwest::Certificate::from_pem_bundle(pem)? {
                        b = b.add_root_certificate(cert);
                    }
                }
                Some(b.build()?)
            }
        };
        Ok(Backends {
            webhook,
            networkfence,
            manual_timeout,
            http,
        })
    }

    /// How long `kind` may take before the next backend is tried.
    pub fn timeout(&self, kind: BackendKind) -> Duration {
        match kind {
            BackendKind::Webhook => self.webhook.as_ref().map_or(Duration::ZERO, |w| w.timeout),
            BackendKind::Networkfence => self.networkfence.timeout,
            BackendKind::Manual => self.manual_timeout,
        }
    }

    /// What a fence by `kind` cuts off (rules.md §7 "A fence has a scope"): the fence agent
    /// powers the machine off and a person confirms the machine is down (every volume); a
    /// NetworkFence cuts one CSI driver's storage network (`--networkfence-driver`; with only a
    /// class, volguard cannot name what it covers).
    pub fn scope(&self, kind: BackendKind) -> crate::rules::fencing::Scope {
        use crate::rules::fencing::Scope;
        match kind {
            BackendKind::Webhook | BackendKind::Manual => Scope::Machine,
            BackendKind::Networkfence => self
                .networkfence
                .driver
                .clone()
                .map_or(Scope::Unknown, Scope::Driver),
        }
    }

    /// Whether `kind` is configured at all (an unconfigured one fails at once).
    pub fn configured(&self, kind: BackendKind) -> bool {
        match kind {
            BackendKind::Webhook => self.webhook.is_some(),
            BackendKind::Networkfence => {
                self.networkfence.class.is_some() || self.networkfence.driver.is_some()
            }
            BackendKind::Manual => true,
        }
    }

    /// Ask `kind` to fence the incident's node, waiting at most `budget`.
    pub async fn fence(
        &self,
        records: &Records,
        kind: BackendKind,
        incident: &NodeFence,
        budget: Duration,
    ) -> Answer {
        match kind {
            BackendKind::Webhook => self.call_agent(incident, "fence", budget).await,
            BackendKind::Networkfence => self.network_fence(records, incident).await,
            BackendKind::Manual => manual(incident),
        }
    }

    /// Undo `kind`'s fence (the node came back): done when the backend says so.
    pub async fn unfence(
        &self,
        records: &Records,
        kind: BackendKind,
        incident: &NodeFence,
        budget: Duration,
    ) -> Answer {
        match kind {
            BackendKind::Webhook => self.call_agent(incident, "unfence", budget).await,
            BackendKind::Networkfence => network_unfence(records, incident).await,
            // The person who confirmed the node down brought it back.
            BackendKind::Manual => Answer::Done("nothing to undo for a manual fence".into()),
        }
    }

    async fn call_agent(&self, incident: &NodeFence, action: &str, budget: Duration) -> Answer {
        let (Some(w), Some(http)) = (&self.webhook, &self.http) else {
            return Answer::Failed("no fence agent configured (--fence-webhook-url)".into());
        };
        let body = FenceRequest {
            incident: incident.metadata.name.clone(),
            node: incident.spec.node.clone(),
            addresses: incident.spec.addresses.clone(),
            action: action.to_string(),
        };
        let sent = http
            .post(&w.url)
            .timeout(budget.max(Duration::from_millis(100)))
            .json(&body)
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Answer::Pending(format!("fence agent {} gave no answer in time", w.url));
            }
            Err(e) => return Answer::Pending(format!("fence agent {} unreachable: {e}", w.url)),
        };
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            return Answer::Pending(format!(
                "fence agent answered HTTP {status}: {}",
                text.chars().take(200).collect::<String>()
            ));
        }
        match serde_json::from_str::<FenceResponse>(&text) {
            Ok(r) => match r.state.as_str() {
                "Done" => Answer::Done(format!("fence agent: {action} done: {}", r.message)),
                "InProgress" => Answer::Pending(format!("fence agent: {}", r.message)),
                _ => Answer::Failed(format!("fence agent: {action} failed: {}", r.message)),
            },
            Err(e) => Answer::Pending(format!("fence agent's answer is not a FenceResponse: {e}")),
        }
    }

    async fn network_fence(&self, records: &Records, incident: &NodeFence) -> Answer {
        let name = network_fence_name(incident);
        match records.view.read(query::NetworkFence(&name)).await {
            Fact::Unknown(e) => Answer::Pending(e.to_string()),
            Fact::Found(seen) => match seen.result.as_deref() {
                Some("Succeeded") => Answer::Done(format!(
                    "NetworkFence {name} result Succeeded: {}",
                    seen.message
                )),
                Some("Failed") => Answer::Failed(format!(
                    "NetworkFence {name} result Failed: {}",
                    seen.message
                )),
                _ => Answer::Pending(format!("NetworkFence {name} has no result yet")),
            },
            Fact::Missing => {
                let cidrs: Vec<String> = incident.spec.addresses.iter().map(|a| cidr(a)).collect();
                if cidrs.is_empty() {
                    return Answer::Failed(format!(
                        "node {} has no addresses to fence",
                        incident.spec.node
                    ));
                }
                let c = &self.networkfence;
                let mut spec = serde_json::json!({"fenceState": "Fenced", "cidrs": cidrs});
                if let Some(class) = &c.class {
                    spec["networkFenceClassName"] = class.clone().into();
                }
                if let Some(driver) = &c.driver {
                    spec["driver"] = driver.clone().into();
                }
                if let Some((ns, n)) = &c.secret {
                    spec["secret"] = serde_json::json!({"name": n, "namespace": ns});
                }
                let create = Write::NetworkFence {
                    name: name.clone(),
                    node: incident.spec.node.clone(),
                    spec,
                };
                match records.writer.apply(create).await {
                    Ok(()) => Answer::Pending(format!("NetworkFence {name} created for {cidrs:?}")),
                    Err(e) => Answer::Pending(format!("creating NetworkFence {name}: {e}")),
                }
            }
        }
    }
}

/// The manual backend: fenced once a person ran `kubectl volguard fence confirm`.
fn manual(incident: &NodeFence) -> Answer {
    match crate::rules::proof::fence_confirmed_by(incident) {
        Some(who) => Answer::Done(format!("confirmed down by {who}")),
        None => Answer::Pending(format!(
            "waiting for a person: kubectl volguard fence confirm {}",
            incident.spec.node
        )),
    }
}

async fn network_unfence(records: &Records, incident: &NodeFence) -> Answer {
    let name = network_fence_name(incident);
    match records.view.read(query::NetworkFence(&name)).await {
        Fact::Missing => Answer::Done(format!("NetworkFence {name} deleted (unfenced)")),
        Fact::Found(seen) if seen.deleting => {
            Answer::Pending(format!("NetworkFence {name} is being unfenced"))
        }
        Fact::Found(_) => {
            let delete = Write::DeleteNetworkFence { name: name.clone() };
            match records.writer.apply(delete).await {
                Ok(()) => Answer::Pending(format!("NetworkFence {name} deleted: unfencing")),
                Err(e) => Answer::Pending(format!("deleting NetworkFence {name}: {e}")),
            }
        }
        Fact::Unknown(e) => Answer::Pending(e.to_string()),
    }
}

/// A fresh NetworkFence per incident (never one a previous incident left behind).
pub fn network_fence_name(incident: &NodeFence) -> String {
    format!("volguard-{}", incident.metadata.name)
}

fn cidr(address: &str) -> String {
    if address.contains('/') {
        address.to_string()
    } else if address.contains(':') {
        format!("{address}/128")
    } else {
        format!("{address}/32")
    }
}
