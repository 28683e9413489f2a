//! The floor's application: answer every review "allowed" after parsing only its uid. Shared by
//! the floor server (`floor.rs`) and the in-process handler profile (`handler.rs`).

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use serde::Deserialize;

/// A review's envelope; `R` is what a floor reads of the request.
#[derive(Deserialize)]
pub struct Review<R> {
    pub request: R,
}

#[derive(Deserialize)]
struct Req<'a> {
    uid: &'a str,
}

/// What a writing floor reads of a placement's review: a bind, or a pod created with its node
/// named (`floor_writer.rs`, `floor_store_writer.rs`).
#[derive(Deserialize)]
pub struct BindReq<'a> {
    pub uid: &'a str,
    #[serde(default)]
    pub namespace: &'a str,
    #[serde(default)]
    pub name: &'a str,
    #[serde(default, rename = "subResource")]
    pub sub_resource: Option<&'a str>,
    #[serde(default, borrow)]
    pub object: Option<BindTarget<'a>>,
}

/// Where a review places a pod: on `node`, with the claim named by the request itself (a create)
/// or, when `None`, the first claim of the stored pod (a bind).
pub struct Placement<'a> {
    pub node: &'a str,
    pub claim: Option<&'a str>,
}

impl<'a> BindReq<'a> {
    /// The placement a `pods/binding` or a pod CREATE naming its node makes (`None` for any other
    /// request, and for a created pod without a claim: a lock writes nothing for it).
    pub fn placement(&self) -> Option<Placement<'a>> {
        let object = self.object.as_ref()?;
        if self.sub_resource == Some("binding") {
            let node = object.target.as_ref()?.name;
            return (!node.is_empty()).then_some(Placement { node, claim: None });
        }
        let spec = object.spec.as_ref()?;
        let claim = spec
            .volumes
            .iter()
            .find_map(|v| v.persistent_volume_claim.as_ref())?
            .claim_name;
        (self.sub_resource.is_none() && !spec.node_name.is_empty()).then_some(Placement {
            node: spec.node_name,
            claim: Some(claim),
        })
    }
}

/// The Binding's target (a bind), or the pod's spec (a create).
#[derive(Deserialize)]
pub struct BindTarget<'a> {
    #[serde(default, borrow)]
    target: Option<NodeRef<'a>>,
    #[serde(default, borrow)]
    spec: Option<PlacedSpec<'a>>,
}

#[derive(Deserialize)]
struct NodeRef<'a> {
    #[serde(default)]
    name: &'a str,
}

#[derive(Deserialize)]
struct PlacedSpec<'a> {
    #[serde(default, rename = "nodeName")]
    node_name: &'a str,
    #[serde(default, borrow)]
    volumes: Vec<PlacedVolume<'a>>,
}

#[derive(Deserialize)]
struct PlacedVolume<'a> {
    #[serde(default, borrow, rename = "persistentVolumeClaim")]
    persistent_volume_claim: Option<ClaimRef<'a>>,
}

#[derive(Deserialize)]
struct ClaimRef<'a> {
    #[serde(rename = "claimName")]
    claim_name: &'a str,
}

async fn allow(body: Bytes) -> ([(&'static str, &'static str); 1], String) {
    let uid = serde_json::from_slice::<Review<Req<'_>>>(&body)
        .map(|r| r.request.uid.to_string())
        .unwrap_or_default();
    (
        [("content-type", "application/json")],
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":{},"allowed":true}}}}"#,
            serde_json::Value::String(uid)
        ),
    )
}

pub fn router() -> Router {
    Router::new()
        .route("/mutate", post(allow))
        .route("/validate", post(allow))
        .route("/mutate/{rule}", post(allow))
        .route("/validate/{rule}", post(allow))
}
