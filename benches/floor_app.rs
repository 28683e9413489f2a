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

/// What a writing floor reads of a bind's review (`floor_writer.rs`, `floor_store_writer.rs`).
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

impl BindReq<'_> {
    /// The node a `pods/binding` names (`None` for any other request).
    pub fn bound_to(&self) -> Option<&str> {
        let node = self.object.as_ref()?.target.as_ref()?.name;
        (self.sub_resource == Some("binding") && !node.is_empty()).then_some(node)
    }
}

/// The Binding's target: the node.
#[derive(Deserialize)]
pub struct BindTarget<'a> {
    #[serde(default, borrow)]
    target: Option<NodeRef<'a>>,
}

#[derive(Deserialize)]
struct NodeRef<'a> {
    #[serde(default)]
    name: &'a str,
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
