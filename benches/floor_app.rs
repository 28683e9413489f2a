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
