//! Fencing's writes (rules.md §7), made by the one writer. Those whose answer is the stored
//! incident: NodeFence create (`NewFence`) and status (`FenceStatus`: each status write carries
//! the object's resourceVersion, so two controllers never both advance one incident) and a
//! deleted node's confirmation (`GoneConfirmation`). As `Write`s: a person's confirmation on an
//! incident, and the out-of-service taint and its removal (a JSON patch that tests the Node's
//! resourceVersion: the node read is the node written).

use super::fences;
use super::write::{Apply, Door};
use super::writer::Writer;
use crate::model::OUT_OF_SERVICE_TAINT;
use crate::model::fence::{
    FENCE_INCIDENT, GROUP, KIND, NODE_LABEL, NodeFence, NodeFenceSpec, NodeFenceStatus, VERSION,
};
use crate::rules::proof::{CONFIRMED_BY, Key};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};

/// A person's confirmation that the machine of deleted Node `node` is down (`fence confirm`),
/// as an incident volguard's controller verifies before it writes the release.
pub struct GoneConfirmation<'a> {
    pub node: &'a str,
    pub by: &'a str,
}

impl Apply for GoneConfirmation<'_> {
    type Answer = Result<NodeFence, kube::Error>;

    async fn apply_to(self, w: &Writer, _: Door) -> Result<NodeFence, kube::Error> {
        fences::confirm_gone(w.client()?, self.node, self.by).await
    }
}

/// Create an incident with its first status (the status subresource is written right after).
pub struct NewFence {
    pub spec: NodeFenceSpec,
    pub status: NodeFenceStatus,
}

impl Apply for NewFence {
    type Answer = Result<NodeFence, kube::Error>;

    async fn apply_to(self, w: &Writer, _: Door) -> Result<NodeFence, kube::Error> {
        let NewFence { spec, status } = self;
        let stamp = jiff::Timestamp::now().as_second();
        let node: String = spec.node.chars().take(230).collect();
        let name = format!("{node}-{stamp}");
        let mut o = DynamicObject::new(&name, &fences::resource());
        o.metadata.labels =
            Some([(NODE_LABEL.to_string(), fences::label_value(&spec.node))].into());
        o.data = serde_json::json!({"spec": spec});
        let created = fences::api(w.client()?.clone())
            .create(&PostParams::default(), &o)
            .await?;
        let mut f = fences::decode(created).map_err(kube::Error::SerdeError)?;
        f.status = status;
        FenceStatus(&f).apply_to(w, Door(())).await
    }
}

/// Replace the incident's status, only if nobody changed the incident since it was read.
pub struct FenceStatus<'a>(pub &'a NodeFence);

impl Apply for FenceStatus<'_> {
    type Answer = Result<NodeFence, kube::Error>;

    async fn apply_to(self, w: &Writer, _: Door) -> Result<NodeFence, kube::Error> {
        let f = self.0;
        let patch = serde_json::json!({
            "apiVersion": format!("{GROUP}/{VERSION}"), "kind": KIND,
            "metadata": {"name": f.metadata.name, "resourceVersion": f.metadata.resource_version},
            "status": f.status,
        });
        let o = fences::api(w.client()?.clone())
            .patch_status(
                &f.metadata.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        fences::decode(o).map_err(kube::Error::SerdeError)
    }
}

/// Stamp a person's confirmation on incident `name` as read (resourceVersion-checked).
pub(super) async fn confirm_fence(
    w: &Writer,
    name: &str,
    resource_version: Option<String>,
    by: &str,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": resource_version,
        "annotations": {CONFIRMED_BY: by},
    }});
    fences::api(w.client()?.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}

/// Add the out-of-service taint, naming the incident (the webhook checks that it is
/// `Fenced`).
pub(super) async fn taint_out_of_service(
    w: &Writer,
    node_name: &str,
    incident: &str,
) -> Result<(), kube::Error> {
    let nodes = Api::<Node>::all(w.client()?.clone());
    let node = nodes.get(node_name).await?;
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
    if taints.is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT)) {
        return Ok(());
    }
    let taint = serde_json::json!({"key": OUT_OF_SERVICE_TAINT, "value": "nodeshutdown", "effect": "NoExecute"});
    let mut ops = vec![test_version(&node)];
    ops.push(match taints {
        Some(_) => serde_json::json!({"op": "add", "path": "/spec/taints/-", "value": taint}),
        None => serde_json::json!({"op": "add", "path": "/spec/taints", "value": [taint]}),
    });
    ops.push(annotation_op(&node, FENCE_INCIDENT, Some(incident)));
    patch_node(w, node_name, ops).await
}

/// Remove the out-of-service taint (and the annotations that went with it).
pub(super) async fn untaint_out_of_service(w: &Writer, node_name: &str) -> Result<(), kube::Error> {
    let Some(node) = Api::<Node>::all(w.client()?.clone())
        .get_opt(node_name)
        .await?
    else {
        return Ok(());
    };
    let mut ops = vec![test_version(&node)];
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    // Highest index first, so earlier removals do not shift later ones.
    for (i, _) in taints
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, t)| t.key == OUT_OF_SERVICE_TAINT)
    {
        ops.push(serde_json::json!({"op": "remove", "path": format!("/spec/taints/{i}")}));
    }
    for key in [FENCE_INCIDENT, Key::ConfirmNodeDown.annotation()] {
        if node
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(key))
        {
            ops.push(annotation_op(&node, key, None));
        }
    }
    if ops.len() == 1 {
        return Ok(());
    }
    patch_node(w, node_name, ops).await
}

async fn patch_node(
    w: &Writer,
    name: &str,
    ops: Vec<serde_json::Value>,
) -> Result<(), kube::Error> {
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::Value::Array(ops)).map_err(kube::Error::SerdeError)?;
    Api::<Node>::all(w.client()?.clone())
        .patch(name, &w.params, &Patch::Json::<()>(patch))
        .await
        .map(|_| ())
}

fn test_version(node: &Node) -> serde_json::Value {
    serde_json::json!({"op": "test", "path": "/metadata/resourceVersion", "value": node.metadata.resource_version})
}

/// A JSON-patch op that sets (`Some`) or removes (`None`) one annotation. Read from the whole
/// Node (the model keeps only volguard's annotations, and whether the map exists decides the op).
fn annotation_op(node: &Node, key: &str, value: Option<&str>) -> serde_json::Value {
    let escaped = key.replace('~', "~0").replace('/', "~1");
    match (value, node.metadata.annotations.is_some()) {
        (Some(v), true) => {
            serde_json::json!({"op": "add", "path": format!("/metadata/annotations/{escaped}"), "value": v})
        }
        (Some(v), false) => {
            serde_json::json!({"op": "add", "path": "/metadata/annotations", "value": {key: v}})
        }
        (None, _) => {
            serde_json::json!({"op": "remove", "path": format!("/metadata/annotations/{escaped}")})
        }
    }
}
