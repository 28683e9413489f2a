//! csi-addons NetworkFences (the `networkfence` fence backend, rules.md §7): the one place
//! volguard reads and writes them, by the writer. The backend decides; this only talks to the
//! apiserver.

use super::Writer;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::core::GroupVersionKind;

pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("csiaddons.openshift.io", "v1alpha1", "NetworkFence"),
        "networkfences",
    )
}

fn api(client: &kube::Client) -> Api<DynamicObject> {
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

impl Writer {
    /// The NetworkFence `name` as the apiserver has it now.
    pub async fn network_fence(&self, name: &str) -> Result<Option<Seen>, kube::Error> {
        Ok(api(self.client()?).get_opt(name).await?.map(|o| Seen {
            result: o.data["status"]["result"].as_str().map(str::to_string),
            message: o.data["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            deleting: o.metadata.deletion_timestamp.is_some(),
        }))
    }

    /// Create `name` with `spec`, labelled with the node it fences.
    pub async fn create_network_fence(
        &self,
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
        api(self.client()?)
            .create(&PostParams::default(), &o)
            .await
            .map(|_| ())
    }

    pub async fn delete_network_fence(&self, name: &str) -> Result<(), kube::Error> {
        api(self.client()?)
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
    }
}
