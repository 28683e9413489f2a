//! The incident record as the fencing controller keeps it: read through the view (live, with no
//! deadline), written by the one writer (`state::Writer`: NodeFence create and status, each status
//! write with the object's resourceVersion; the out-of-service taint), and announced with Events
//! operators read.

use super::Error;
use crate::model::fence::{
    Evidence, GROUP, KIND, NodeFence, NodeFenceSpec, NodeFenceStatus, Phase, VERSION,
};
use crate::rules::Fact;
use crate::state::query;
use crate::state::writer::Writer;
use crate::state::{FenceStatus, FencesOf, Fresh, NewFence, View, Write};
use k8s_openapi::api::core::v1::ObjectReference;
use std::sync::Arc;

pub const FIELD_MANAGER: &str = "volguard-fencing";

/// The fencing controller's reads of incidents and its writes.
pub struct Records {
    pub view: View,
    /// Every write: incidents, taints, Events, and the backends' NetworkFences.
    pub writer: Writer,
}

pub fn now() -> String {
    jiff::Timestamp::now().to_string()
}

impl Records {
    /// `writer` writes as `FIELD_MANAGER` (`View::writer`).
    pub fn new(view: View, writer: Writer) -> Records {
        Records { view, writer }
    }

    /// Every incident, typed (one that does not decode is skipped with a warning), read live
    /// with no deadline, as fencing always read them.
    pub async fn list(&self) -> Result<Vec<NodeFence>, Error> {
        match self
            .view
            .read(query::Fences(FencesOf::All, Fresh::Unbounded))
            .await
        {
            Fact::Found(all) => Ok(all.into_iter().map(Arc::unwrap_or_clone).collect()),
            Fact::Missing => Ok(Vec::new()),
            Fact::Unknown(e) => Err(e.into()),
        }
    }

    /// One incident, read live with no deadline (`None`: gone).
    pub async fn get(&self, name: &str) -> Result<Option<NodeFence>, Error> {
        match self
            .view
            .read(query::Fences(FencesOf::Named(name), Fresh::Unbounded))
            .await
            .first()
        {
            Fact::Found(f) => Ok(Some(Arc::unwrap_or_clone(f))),
            Fact::Missing => Ok(None),
            Fact::Unknown(e) => Err(e.into()),
        }
    }

    /// Create the incident with its first status.
    pub async fn create(
        &self,
        spec: NodeFenceSpec,
        status: NodeFenceStatus,
    ) -> Result<NodeFence, Error> {
        Ok(self.writer.apply(NewFence { spec, status }).await?)
    }

    /// Record a step: the phase, the evidence line, then write (resourceVersion-checked).
    pub async fn step(
        &self,
        f: &mut NodeFence,
        phase: Phase,
        step: &str,
        message: impl Into<String>,
    ) -> Result<(), Error> {
        let message = message.into();
        tracing::info!(incident = %f.metadata.name, node = %f.spec.node, phase = phase.as_str(), step, %message, "fencing step");
        f.status.phase = phase;
        f.status.message = Some(message.clone());
        f.status.evidence.push(Evidence {
            time: now(),
            step: step.into(),
            message,
        });
        *f = self.writer.apply(FenceStatus(f)).await?;
        Ok(())
    }

    /// Add the out-of-service taint, naming the incident.
    pub async fn taint(&self, f: &NodeFence) -> Result<(), Error> {
        let taint = Write::Taint {
            node: f.spec.node.clone(),
            incident: f.metadata.name.clone(),
        };
        Ok(self.writer.apply(taint).await?)
    }

    /// Delete a terminating pod of a released node at once (`Fencer::release_pods`), only the
    /// pod that was read.
    pub async fn delete_pod_now(&self, pod: &crate::model::Pod) -> Result<(), Error> {
        let delete = Write::DeletePodNow {
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.to_string(),
            resource_version: pod.metadata.resource_version.as_deref().map(str::to_string),
        };
        Ok(self.writer.apply(delete).await?)
    }

    /// Remove the out-of-service taint (and the annotations that went with it).
    pub async fn untaint(&self, node: &str) -> Result<(), Error> {
        let node = node.to_string();
        Ok(self.writer.apply(Write::Untaint { node }).await?)
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
            uid: Some(f.metadata.uid.to_string()).filter(|u| !u.is_empty()),
            ..Default::default()
        };
        for on in [&fence_ref, &node_ref] {
            self.event(on, warning, reason, note.clone()).await;
        }
    }

    pub async fn event(&self, on: &ObjectReference, warning: bool, reason: &str, note: String) {
        let ev = Write::event(on.clone(), warning, reason, note, "Fencing");
        if let Err(e) = self.writer.apply(ev).await {
            tracing::warn!(error = %e, reason, "could not record an Event");
        }
    }
}
