//! NodeFence incidents (rules.md §7) as the apiserver stores them: the webhook reads one to judge
//! an out-of-service taint; the fencing controller lists, creates and updates them.

use crate::model::fence::{
    GROUP, KIND, NODE_LABEL, NodeFence, NodeFenceSpec, PLURAL, Release, VERSION,
};
use crate::rules::Fact;
use crate::rules::decision::ReadError;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use std::sync::Arc;

pub(super) fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL)
}

pub(super) fn api(client: kube::Client) -> Api<DynamicObject> {
    Api::all_with(client, &resource())
}

/// The typed incident from the apiserver's object.
pub(super) fn decode(o: DynamicObject) -> Result<NodeFence, serde_json::Error> {
    serde_json::to_value(o).and_then(serde_json::from_value)
}

/// Who the apiserver says the caller is (a SelfSubjectReview): the name a person's
/// confirmation is recorded under.
pub(super) async fn whoami(client: &kube::Client) -> Result<Option<String>, kube::Error> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    Ok(review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username))
}

/// A NodeFence read's cap (`LiveUntil` keeps it too: an incident is never a take-over's read).
const CAP: std::time::Duration = std::time::Duration::from_secs(2);

/// `read`'s answer within the cap (`None`: not in time), or, uncapped, whenever it comes
/// (`Fresh::Unbounded`: fencing's own reads and an operator's, which never had a deadline).
async fn within<F: std::future::Future>(capped: bool, read: F) -> Option<F::Output> {
    if capped {
        tokio::time::timeout(CAP, read).await.ok()
    } else {
        Some(read.await)
    }
}

/// Read one incident live (never from a cache: it decides a release).
pub(super) async fn get(client: &kube::Client, name: &str, capped: bool) -> Fact<Arc<NodeFence>> {
    let what = || format!("reading NodeFence {name:?}");
    let read = api(client.clone());
    match within(capped, read.get_opt(name)).await {
        None => Fact::Unknown(ReadError::Timeout { what: what() }),
        Some(Err(e)) => Fact::Unknown(ReadError::Api {
            what: what(),
            message: crate::error::chain(&e),
        }),
        Some(Ok(None)) => Fact::Missing,
        Some(Ok(Some(o))) => match decode(o) {
            Ok(f) => Fact::Found(Arc::new(f)),
            Err(e) => Fact::Unknown(ReadError::Decode {
                what: what(),
                message: e.to_string(),
            }),
        },
    }
}

/// Every incident, live and typed (one that does not decode is skipped with a warning).
pub(super) async fn all(client: &kube::Client, capped: bool) -> Fact<Vec<Arc<NodeFence>>> {
    let what = || "listing NodeFence incidents".to_string();
    let list = api(client.clone());
    match within(capped, list.list(&ListParams::default())).await {
        None => Fact::Unknown(ReadError::Timeout { what: what() }),
        Some(Err(e)) => Fact::Unknown(super::live::read_error(what(), e)),
        Some(Ok(l)) => Fact::Found(
            l.items
                .into_iter()
                .filter_map(|o| {
                    let name = o.metadata.name.clone().unwrap_or_default();
                    decode(o)
                        .map_err(|e| {
                            tracing::warn!(incident = %name, error = %e, "NodeFence does not decode")
                        })
                        .ok()
                })
                .map(Arc::new)
                .collect(),
        ),
    }
}

/// A node name as a label value (at most 63 characters; longer names are cut, and the incident
/// is still found by `spec.node`).
pub(super) fn label_value(node: &str) -> String {
    let v: String = node.chars().take(63).collect();
    v.trim_end_matches(['-', '.', '_']).to_string()
}

/// The incidents and deletion records of one node, read live (they decide a release).
pub(super) async fn of_node(
    client: &kube::Client,
    node: &str,
    capped: bool,
) -> Fact<Vec<Arc<NodeFence>>> {
    let what = || format!("listing the NodeFence records of node {node:?}");
    let params = ListParams::default().labels(&format!("{NODE_LABEL}={}", label_value(node)));
    let list = api(client.clone());
    match within(capped, list.list(&params)).await {
        None => Fact::Unknown(ReadError::Timeout { what: what() }),
        Some(Err(e)) => Fact::Unknown(ReadError::Api {
            what: what(),
            message: crate::error::chain(&e),
        }),
        Some(Ok(l)) => {
            let mut out = Vec::new();
            for o in l.items {
                match decode(o) {
                    Ok(f) if f.spec.node == node => out.push(Arc::new(f)),
                    Ok(_) => {}
                    Err(e) => {
                        return Fact::Unknown(ReadError::Decode {
                            what: what(),
                            message: e.to_string(),
                        });
                    }
                }
            }
            Fact::Found(out)
        }
    }
}

/// A person's confirmation that the machine of a deleted Node is down (`fence confirm`): an
/// incident with the person's stamp and no release; volguard's controller verifies it (the Node
/// gone, its Lease silent) and only then writes the release (rules.md §8 "Records").
pub(super) async fn confirm_gone(
    client: &kube::Client,
    node: &str,
    by: &str,
) -> Result<NodeFence, kube::Error> {
    let stamp = jiff::Timestamp::now().as_millisecond();
    let base: String = node.chars().take(220).collect();
    let mut o = DynamicObject::new(&format!("{base}-confirmed-{stamp}"), &resource());
    o.metadata.labels = Some([(NODE_LABEL.to_string(), label_value(node))].into());
    o.metadata.annotations = Some(
        [(
            crate::rules::proof::CONFIRMED_BY.to_string(),
            by.to_string(),
        )]
        .into(),
    );
    let spec = NodeFenceSpec {
        node: node.to_string(),
        backends: vec![crate::model::fence::BackendKind::Manual],
        addresses: Vec::new(),
        release: None,
    };
    o.data = serde_json::json!({"spec": spec});
    let created = api(client.clone())
        .create(&PostParams::default(), &o)
        .await?;
    decode(created).map_err(kube::Error::SerdeError)
}

/// Record a release allowed on proof outside volguard's fencing (rules.md §7): a NodeFence whose
/// spec says what, who and why, which outlives the Node and is what "node gone" is read from.
pub(super) async fn record_release(
    client: &kube::Client,
    node: &str,
    release: Release,
) -> Result<NodeFence, kube::Error> {
    let stamp = jiff::Timestamp::now().as_millisecond();
    let base: String = node.chars().take(220).collect();
    let what = match release.action {
        crate::model::fence::ReleaseAction::NodeDelete => "deleted",
        crate::model::fence::ReleaseAction::Taint => "tainted",
    };
    let mut o = DynamicObject::new(&format!("{base}-{what}-{stamp}"), &resource());
    o.metadata.labels = Some([(NODE_LABEL.to_string(), label_value(node))].into());
    let spec = NodeFenceSpec {
        node: node.to_string(),
        backends: Vec::new(),
        addresses: Vec::new(),
        release: Some(release),
    };
    o.data = serde_json::json!({"spec": spec});
    let created = api(client.clone())
        .create(&PostParams::default(), &o)
        .await?;
    decode(created).map_err(kube::Error::SerdeError)
}
