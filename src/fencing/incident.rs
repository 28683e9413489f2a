//! The incident record and the writes it drives: NodeFence create and status updates (each with
//! the object's resourceVersion, so two controllers never both advance one incident), the
//! out-of-service taint, and the Events operators read.

use crate::model::OUT_OF_SERVICE_TAINT;
use crate::model::fence::{
    Evidence, FENCE_INCIDENT, GROUP, KIND, NODE_LABEL, NodeFence, NodeFenceSpec, NodeFenceStatus,
    Phase, VERSION,
};
use crate::state::fences;
use crate::state::writer::Writer;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};

pub const FIELD_MANAGER: &str = "volguard-fencing";

/// Writes of the fencing controller.
pub struct Records {
    pub client: kube::Client,
    /// Events go through the writer every command shares (`state::writer`).
    writer: Writer,
}

pub fn now() -> String {
    jiff::Timestamp::now().to_string()
}

impl Records {
    pub fn new(client: kube::Client, identity: String) -> Records {
        let writer = Writer::new(client.clone(), FIELD_MANAGER, identity);
        Records { client, writer }
    }

    /// Every incident, typed (one that does not decode is skipped with a warning).
    pub async fn list(&self) -> Result<Vec<NodeFence>, kube::Error> {
        let all = fences::api(self.client.clone())
            .list(&Default::default())
            .await?;
        Ok(all
            .items
            .into_iter()
            .filter_map(|o| {
                let name = o.metadata.name.clone().unwrap_or_default();
                fences::decode(o)
                    .map_err(|e| tracing::warn!(incident = %name, error = %e, "NodeFence does not decode"))
                    .ok()
            })
            .collect())
    }

    pub async fn get(&self, name: &str) -> Result<Option<NodeFence>, kube::Error> {
        match fences::api(self.client.clone()).get_opt(name).await? {
            None => Ok(None),
            Some(o) => fences::decode(o).map(Some).map_err(kube::Error::SerdeError),
        }
    }

    /// Create the incident with its first status (the status subresource is written right after).
    pub async fn create(
        &self,
        spec: NodeFenceSpec,
        status: NodeFenceStatus,
    ) -> Result<NodeFence, kube::Error> {
        let stamp = jiff::Timestamp::now().as_second();
        let node: String = spec.node.chars().take(230).collect();
        let name = format!("{node}-{stamp}");
        let mut o = DynamicObject::new(&name, &fences::resource());
        o.metadata.labels =
            Some([(NODE_LABEL.to_string(), fences::label_value(&spec.node))].into());
        o.data = serde_json::json!({"spec": spec});
        let created = fences::api(self.client.clone())
            .create(&PostParams::default(), &o)
            .await?;
        let mut f = fences::decode(created).map_err(kube::Error::SerdeError)?;
        f.status = status;
        self.write_status(&f).await
    }

    /// Replace the incident's status, only if nobody changed the incident since it was read.
    pub async fn write_status(&self, f: &NodeFence) -> Result<NodeFence, kube::Error> {
        let patch = serde_json::json!({
            "apiVersion": format!("{GROUP}/{VERSION}"), "kind": KIND,
            "metadata": {"name": f.metadata.name, "resourceVersion": f.metadata.resource_version},
            "status": f.status,
        });
        let o = fences::api(self.client.clone())
            .patch_status(
                &f.metadata.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        fences::decode(o).map_err(kube::Error::SerdeError)
    }

    /// Record a step: the phase, the evidence line, then write (resourceVersion-checked).
    pub async fn step(
        &self,
        f: &mut NodeFence,
        phase: Phase,
        step: &str,
        message: impl Into<String>,
    ) -> Result<(), kube::Error> {
        let message = message.into();
        tracing::info!(incident = %f.metadata.name, node = %f.spec.node, phase = phase.as_str(), step, %message, "fencing step");
        f.status.phase = phase;
        f.status.message = Some(message.clone());
        f.status.evidence.push(Evidence {
            time: now(),
            step: step.into(),
            message,
        });
        *f = self.write_status(f).await?;
        Ok(())
    }

    /// Record a step, then announce it with an Event on the incident and its Node.
    pub async fn record(
        &self,
        f: &mut NodeFence,
        phase: Phase,
        step: &str,
        warning: bool,
        reason: &str,
        message: String,
    ) -> Result<(), kube::Error> {
        self.step(f, phase, step, message.clone()).await?;
        self.announce(f, warning, reason, message).await;
        Ok(())
    }

    /// An Event on the incident itself and on its Node.
    pub async fn announce(&self, f: &NodeFence, warning: bool, reason: &str, note: String) {
        let node_ref = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(f.spec.node.clone()),
            ..Default::default()
        };
        let fence_ref = ObjectReference {
            api_version: Some(format!("{GROUP}/{VERSION}")),
            kind: Some(KIND.into()),
            name: Some(f.metadata.name.clone()),
            uid: Some(f.metadata.uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        };
        for on in [&fence_ref, &node_ref] {
            self.event(on, warning, reason, note.clone()).await;
        }
    }

    pub async fn event(&self, on: &ObjectReference, warning: bool, reason: &str, note: String) {
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.into(),
            note: Some(note),
            action: "Fencing".into(),
            secondary: None,
        };
        if let Err(e) = self.writer.event(&ev, on).await {
            tracing::warn!(error = %e, reason, "could not record an Event");
        }
    }

    /// Add the out-of-service taint, naming the incident (the webhook checks that it is
    /// `Fenced`). A JSON patch with `test` on the resourceVersion: the node read is the node
    /// written.
    pub async fn taint(&self, f: &NodeFence) -> Result<(), kube::Error> {
        let nodes = Api::<Node>::all(self.client.clone());
        let node = nodes.get(&f.spec.node).await?;
        let has = |n: &Node| {
            n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT))
        };
        if has(&node) {
            return Ok(());
        }
        let taint = serde_json::json!({"key": OUT_OF_SERVICE_TAINT, "value": "nodeshutdown", "effect": "NoExecute"});
        let mut ops = vec![
            serde_json::json!({"op": "test", "path": "/metadata/resourceVersion", "value": node.metadata.resource_version}),
        ];
        match node.spec.as_ref().and_then(|s| s.taints.as_ref()) {
            Some(_) => {
                ops.push(serde_json::json!({"op": "add", "path": "/spec/taints/-", "value": taint}))
            }
            None => {
                ops.push(serde_json::json!({"op": "add", "path": "/spec/taints", "value": [taint]}))
            }
        }
        ops.push(annotation_op(&node, FENCE_INCIDENT, Some(&f.metadata.name)));
        self.patch_node(&nodes, &f.spec.node, ops).await
    }

    /// Remove the out-of-service taint (and the annotations that went with it).
    pub async fn untaint(&self, node_name: &str) -> Result<(), kube::Error> {
        let nodes = Api::<Node>::all(self.client.clone());
        let Some(node) = nodes.get_opt(node_name).await? else {
            return Ok(());
        };
        let mut ops = vec![
            serde_json::json!({"op": "test", "path": "/metadata/resourceVersion", "value": node.metadata.resource_version}),
        ];
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
        for key in [FENCE_INCIDENT, crate::model::fence::CONFIRM_NODE_DOWN] {
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
        self.patch_node(&nodes, node_name, ops).await
    }

    async fn patch_node(
        &self,
        nodes: &Api<Node>,
        name: &str,
        ops: Vec<serde_json::Value>,
    ) -> Result<(), kube::Error> {
        let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops))
            .map_err(kube::Error::SerdeError)?;
        nodes
            .patch(
                name,
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                },
                &Patch::Json::<()>(patch),
            )
            .await
            .map(|_| ())
    }
}

/// A JSON-patch op that sets (`Some`) or removes (`None`) one annotation.
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
