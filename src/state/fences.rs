//! NodeFence incidents (rules.md §7) as the apiserver stores them: the webhook reads one to judge
//! an out-of-service taint; the fencing controller lists, creates and updates them.

use crate::model::fence::{GROUP, KIND, NodeFence, PLURAL, VERSION};
use crate::rules::Fact;
use crate::rules::decision::ReadError;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use std::sync::Arc;

pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL)
}

pub fn api(client: kube::Client) -> Api<DynamicObject> {
    Api::all_with(client, &resource())
}

/// The typed incident from the apiserver's object.
pub fn decode(o: DynamicObject) -> Result<NodeFence, serde_json::Error> {
    serde_json::to_value(o).and_then(serde_json::from_value)
}

/// Read one incident live (never from a cache: it decides a release).
pub async fn get(client: &kube::Client, name: &str) -> Fact<Arc<NodeFence>> {
    let what = || format!("reading NodeFence {name:?}");
    let read = api(client.clone());
    match tokio::time::timeout(std::time::Duration::from_secs(2), read.get_opt(name)).await {
        Err(_) => Fact::Unknown(ReadError::Timeout { what: what() }),
        Ok(Err(e)) => Fact::Unknown(ReadError::Api {
            what: what(),
            message: crate::error::chain(&e),
        }),
        Ok(Ok(None)) => Fact::Missing,
        Ok(Ok(Some(o))) => match decode(o) {
            Ok(f) => Fact::Found(Arc::new(f)),
            Err(e) => Fact::Unknown(ReadError::Decode {
                what: what(),
                message: e.to_string(),
            }),
        },
    }
}
