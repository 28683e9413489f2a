//! csi-addons NetworkFences (the `networkfence` fence backend, rules.md §7): the one place
//! volguard reads them (by the view) and writes them (`Write::NetworkFence`, by the writer). The backend decides; this only talks to the
//! apiserver.

use crate::rules::Fact;
use crate::rules::decision::ReadError;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;

fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("csiaddons.openshift.io", "v1alpha1", "NetworkFence"),
        "networkfences",
    )
}

pub(super) fn api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &resource())
}

/// What a NetworkFence says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `status.result`: `Succeeded`, `Failed`, or none yet.
    pub result: Option<String>,
    pub message: String,
    /// Being deleted (csi-addons unfences, then lets it go).
    pub deleting: bool,
}

impl super::View {
    /// The NetworkFence `name` as the apiserver has it now (a live read with no deadline, as
    /// fencing reads; a `--state` file holds none: `Unknown`).
    pub(super) async fn network_fence(&self, name: &str) -> Fact<Seen> {
        let what = || format!("reading NetworkFence {name:?}");
        let Some(live) = &self.live else {
            return Fact::Unknown(ReadError::Api {
                what: what(),
                message: "a --state file holds no NetworkFences".into(),
            });
        };
        match api(&live.client).get_opt(name).await {
            Err(e) => Fact::Unknown(super::live::read_error(what(), e)),
            Ok(None) => Fact::Missing,
            Ok(Some(o)) => Fact::Found(Seen {
                result: o.data["status"]["result"].as_str().map(str::to_string),
                message: o.data["status"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                deleting: o.metadata.deletion_timestamp.is_some(),
            }),
        }
    }
}

/// Create `name` with `spec`, labelled with the node it fences (`Write::NetworkFence`).
pub(super) async fn create(
    client: &kube::Client,
    name: &str,
    node: &str,
    spec: serde_json::Value,
) -> Result<(), kube::Error> {
    let mut o = DynamicObject::new(name, &resource());
    o.metadata.labels = Some(
        [(
            crate::model::fence::NODE_LABEL.to_string(),
            super::fences::label_value(node),
        )]
        .into(),
    );
    o.data = serde_json::json!({ "spec": spec });
    api(client)
        .create(&PostParams::default(), &o)
        .await
        .map(drop)
}
