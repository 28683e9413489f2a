//! The writing floor in process (`make profile`): what `floor_writer.rs` does on a bind, with
//! volguard's in-memory store standing where the apiserver stands, as it does for volguard's own
//! lock in the same profile (`state::writer`, offline). On each bind it reads the pod and its
//! first claim from the store and writes one annotation onto a copy of the claim, then answers
//! "allowed". A lock must cost at least that much; the bind row's instructions are also given
//! against it, since the no-op floor writes nothing (the reason `make bench` has a writing no-op).

use super::floor_app::BindReq;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use std::sync::{Arc, Mutex};
use volguard::state::Store;

/// The annotation the writing floor puts on a claim (as `floor_writer::ANNOTATION`).
const ANNOTATION: &str = "bench.volguard.io/writer";

struct Writer {
    store: Arc<Store>,
    /// The compare-and-swap's critical section, as the store's own for volguard's lock.
    swap: Mutex<()>,
}

impl Writer {
    /// A placement's write: onto `claim` (a create names it) or the stored pod's first claim.
    fn bind(&self, ns: &str, pod: &str, node: &str, claim: Option<&str>) {
        let claim = match claim {
            Some(c) => self.store.pvcs.get(ns, c),
            None => self.store.pods.get(ns, pod).and_then(|p| {
                p.spec
                    .volumes
                    .iter()
                    .find_map(|v| v.persistent_volume_claim.as_ref())
                    .and_then(|c| self.store.pvcs.get(ns, &c.claim_name))
            }),
        };
        let Some(claim) = claim else {
            return;
        };
        let Ok(_guard) = self.swap.lock() else {
            return;
        };
        let mut next = (*claim).clone();
        next.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANNOTATION, &format!("{node}/{pod}"));
        self.store.pvcs.apply(next);
    }
}

async fn bind(
    State(w): State<Arc<Writer>>,
    body: Bytes,
) -> ([(&'static str, &'static str); 1], String) {
    let mut uid = String::new();
    if let Ok(r) = serde_json::from_slice::<super::floor_app::Review<BindReq<'_>>>(&body) {
        uid = r.request.uid.to_string();
        if let Some(at) = r.request.placement() {
            w.bind(r.request.namespace, r.request.name, at.node, at.claim);
        }
    }
    (
        [("content-type", "application/json")],
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":{},"allowed":true}}}}"#,
            serde_json::Value::String(uid)
        ),
    )
}

/// The floor's routes, with the bind's written.
pub fn router(store: Arc<Store>) -> Router {
    let w = Arc::new(Writer {
        store,
        swap: Mutex::new(()),
    });
    Router::new()
        .route("/validate/rwo-single-node", post(bind))
        .with_state(w)
        .merge(super::floor_app::router())
}
