//! A write as a value: what a job decided to change, made by `Writer::apply`, the one door of
//! every write. A plan is then data: a job decides its writes (each carrying the
//! `test`, resourceVersion or uid it was decided on) and hands them over; the writer knows how
//! each reaches the apiserver.
//!
//! Each kind of write names the answer its caller acts on (`Apply::Answer`): a `Write` answers
//! done or not; the writes whose answer decides the next step answer with what was stored: the
//! lock's swap how it ended (`LockSwap`), an incident as stored (`NewFence`, `FenceStatus`,
//! `GoneConfirmation`), a release record its name (`ReleaseRecord`), the Lease as stored, with its new
//! resourceVersion (`LeasePut`), a new audit Event its name (`audit`: `AuditEvent`; its series
//! count and a namespace's AuditReport fold answer done or not).

use super::writer::Writer;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PostParams};
use kube::runtime::events::{Event, EventType};

/// One write.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A patch on a claim: JSON (its ops begin with their `test`s) or merge (carrying the uid or
    /// resourceVersion it was decided on).
    Pvc {
        namespace: String,
        name: String,
        patch: Patch<serde_json::Value>,
    },
    /// A patch on a volume, as on a claim.
    Pv {
        name: String,
        patch: Patch<serde_json::Value>,
    },
    /// An Event about `on` (its reporter is the writer's).
    Event { note: Note, on: ObjectReference },
    /// Delete a pod at once (grace period 0), only the pod that was read (its UID and
    /// resourceVersion as preconditions): what PodGC does to a released node's terminating pods.
    /// Gone already is done.
    DeletePodNow {
        namespace: String,
        name: String,
        uid: String,
        resource_version: Option<String>,
    },
    /// Add the out-of-service taint, naming the incident (the webhook checks that it is
    /// `Fenced`); a JSON patch testing the Node's resourceVersion as read.
    Taint { node: String, incident: String },
    /// Remove the out-of-service taint and the annotations that went with it.
    Untaint { node: String },
    /// Stamp a person's confirmation on an incident, as read (resourceVersion-checked).
    ConfirmFence {
        name: String,
        resource_version: Option<String>,
        by: String,
    },
    /// Create csi-addons NetworkFence `name` with `spec`, labelled with the node it fences.
    NetworkFence {
        name: String,
        node: String,
        spec: serde_json::Value,
    },
    /// Delete NetworkFence `name` (csi-addons unfences, then lets it go).
    DeleteNetworkFence { name: String },
    /// Write one of volguard's webhook configurations back (`kind`: Validating… or
    /// Mutating…), if nobody wrote it since it was read (its resourceVersion rides in `fixed`).
    Registration {
        kind: String,
        name: String,
        fixed: Box<DynamicObject>,
    },
}

/// What an Event says (kube-runtime's `Event`, as a value a plan can hold and a test compare).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    /// PascalCase, at most 128 characters.
    pub reason: String,
    /// Cut to `NOTE_MAX` bytes when published.
    pub note: String,
    pub action: String,
}

impl Write {
    /// The Event `note` on `on`.
    pub fn event(
        on: ObjectReference,
        warning: bool,
        reason: &str,
        note: String,
        action: &str,
    ) -> Write {
        Write::Event {
            on,
            note: Note {
                warning,
                reason: reason.to_string(),
                note,
                action: action.to_string(),
            },
        }
    }
}

/// A write the writer makes, and the answer its caller acts on.
pub trait Apply: Send {
    type Answer;
    /// Make this write through `w`: called by `Writer::apply` (which counts it as touching the
    /// cluster) with the `Door` only `state` can make, so no job writes around the door.
    fn apply_to(
        self,
        w: &Writer,
        door: Door,
    ) -> impl std::future::Future<Output = Self::Answer> + Send;
}

/// The writer's door, made only inside `state`: what `Apply::apply_to` asks for.
pub struct Door(pub(super) ());

impl Writer {
    /// Make `write`: the one door of every write. Each write that changes an object it decided
    /// on is checked by the apiserver against what it was decided on (a `test`, a
    /// resourceVersion, a uid): a write that finds its object changed fails (409 or 422, or
    /// `Swap::Conflict`) and the job decides again from what it reads next. Events (the
    /// controller's, the audit trail's) only add. On a `--state` file the lock's swap and release
    /// records are kept in memory, and any other write fails (`Offline`).
    pub async fn apply<A: Apply>(&self, write: A) -> A::Answer {
        super::reads::note();
        write.apply_to(self, Door(())).await
    }
}

impl Apply for Write {
    type Answer = Result<(), kube::Error>;

    async fn apply_to(self, w: &Writer, _: Door) -> Result<(), kube::Error> {
        let client = w.client()?.clone();
        match self {
            Write::Pvc {
                namespace,
                name,
                patch,
            } => Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(
                client, &namespace,
            )
            .patch(&name, &w.params, &patch)
            .await
            .map(drop),
            Write::Pv { name, patch } => {
                Api::<k8s_openapi::api::core::v1::PersistentVolume>::all(client)
                    .patch(&name, &w.params, &patch)
                    .await
                    .map(drop)
            }
            Write::Event { note, on } => w.publish(note, &on).await,
            Write::DeletePodNow {
                namespace,
                name,
                uid,
                resource_version,
            } => {
                let params = DeleteParams {
                    grace_period_seconds: Some(0),
                    preconditions: Some(kube::api::Preconditions {
                        uid: Some(uid),
                        resource_version,
                    }),
                    ..Default::default()
                };
                let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client, &namespace);
                match pods.delete(&name, &params).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Write::Taint { node, incident } => {
                super::fence_writer::taint_out_of_service(w, &node, &incident).await
            }
            Write::Untaint { node } => super::fence_writer::untaint_out_of_service(w, &node).await,
            Write::ConfirmFence {
                name,
                resource_version,
                by,
            } => super::fence_writer::confirm_fence(w, &name, resource_version, &by).await,
            Write::NetworkFence { name, node, spec } => {
                super::network_fences::create(&client, &name, &node, spec).await
            }
            Write::DeleteNetworkFence { name } => super::network_fences::api(&client)
                .delete(&name, &DeleteParams::default())
                .await
                .map(drop),
            Write::Registration { kind, name, fixed } => {
                let params = PostParams {
                    // Named, so a conflict Helm reports says who wrote (not "unknown").
                    field_manager: Some("volguard-controller".into()),
                    ..PostParams::default()
                };
                super::registrations::api(&client, &kind)
                    .replace(&name, &params, &fixed)
                    .await
                    .map(drop)
            }
        }
    }
}

impl Note {
    pub(super) fn event(self) -> Event {
        Event {
            type_: if self.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: self.reason,
            note: Some(cut_note(self.note)),
            action: self.action,
            secondary: None,
        }
    }
}

/// The apiserver refuses an Event whose note is longer (events.k8s.io/v1 validation, in bytes).
const NOTE_MAX: usize = 1024;

/// An Event's note cut to at most `NOTE_MAX` bytes, at a character boundary (the webhook's audit
/// Events too).
pub(super) fn cut_note(mut s: String) -> String {
    if s.len() > NOTE_MAX {
        let mut at = NOTE_MAX;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_cut_to_what_the_apiserver_accepts_at_a_character_boundary() {
        assert_eq!(cut_note("short".into()), "short");
        let long = "é".repeat(600); // 1,200 bytes
        let c = cut_note(long);
        assert!(
            c.len() <= NOTE_MAX && c.len() >= NOTE_MAX - 1,
            "{}",
            c.len()
        );
        assert!(c.chars().all(|ch| ch == 'é'));
        let note = Note {
            warning: true,
            reason: "DeletionPostponed".into(),
            note: "x".repeat(5000),
            action: "KeepFinalizer".into(),
        };
        let ev = note.event();
        assert_eq!(ev.note.map(|n| n.len()), Some(NOTE_MAX));
        assert!(matches!(ev.type_, EventType::Warning));
    }
}
