//! The audit trail's Events: each aggregated refusal written as a new Event, or its series count
//! brought up to date, through the writer's one door.

use super::{AuditMetrics, CONTROLLER, EVENT, Refusal, Write, event_namespace};
use crate::state::write::{Apply, Door};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};

/// One aggregated write: a new Event (its key and name returned), or a series update.
pub(super) async fn write_event(
    writer: &crate::state::Writer,
    identity: &str,
    w: Write,
    metrics: &AuditMetrics,
) -> Option<(usize, String)> {
    match w {
        Write::Create {
            key,
            refusal,
            count: n,
        } => match writer
            .apply(AuditEvent {
                identity,
                refusal: &refusal,
                count: n,
            })
            .await
        {
            Ok(name) => {
                tracing::debug!(event = %name, "audit Event created");
                metrics.count(EVENT, "created");
                Some((key, name))
            }
            Err(e) => {
                let r = &refusal.regarding;
                tracing::warn!(namespace = %event_namespace(r), regarding = %format!("{} {}", r.kind, r.name),
                    reason = refusal.reason, user = %refusal.user, error = %crate::error::chain(&e),
                    "could not record an audit Event");
                metrics.count(EVENT, "failed");
                None
            }
        },
        Write::Series {
            event,
            namespace,
            count: n,
            last,
            ..
        } => {
            let count = EventCount {
                namespace: &namespace,
                name: &event,
                count: n,
                last,
            };
            match writer.apply(count).await {
                Ok(()) => metrics.count(EVENT, "updated"),
                Err(e) => {
                    tracing::warn!(namespace = %namespace, event = %event, count = n,
                        error = %crate::error::chain(&e), "could not update an audit Event");
                    metrics.count(EVENT, "failed");
                }
            }
            None
        }
    }
}

fn micro(t: jiff::Timestamp) -> MicroTime {
    MicroTime(t)
}

/// A new audit Event on the refusal's object (or its namespace): answers the Event's name.
struct AuditEvent<'a> {
    identity: &'a str,
    refusal: &'a Refusal,
    count: i32,
}

impl Apply for AuditEvent<'_> {
    type Answer = Result<String, kube::Error>;

    async fn apply_to(self, writer: &crate::state::Writer, _: Door) -> Result<String, kube::Error> {
        let (r, count) = (self.refusal, self.count);
        let now = jiff::Timestamp::now();
        let namespace = event_namespace(&r.regarding);
        let note = crate::state::write::cut_note(r.note.clone());
        let ev = Event {
            metadata: ObjectMeta {
                // As kubectl's events are named: the object's name and a unique suffix (the
                // apiserver rejects a generateName ending in '.').
                name: Some(format!(
                    "{}.{:x}",
                    r.regarding.name,
                    now.as_nanosecond().unsigned_abs()
                )),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            event_time: Some(micro(now)),
            action: Some(r.action.clone()),
            reason: Some(r.reason.to_string()),
            regarding: Some(r.regarding.reference()),
            note: Some(note),
            reporting_controller: Some(CONTROLLER.to_string()),
            reporting_instance: Some(self.identity.to_string()),
            type_: Some("Warning".to_string()),
            series: (count > 1).then(|| EventSeries {
                count,
                last_observed_time: micro(now),
            }),
            ..Default::default()
        };
        let api = kube::Api::<Event>::namespaced(writer.client()?.clone(), &namespace);
        let created = api.create(&PostParams::default(), &ev).await?;
        Ok(created.metadata.name.unwrap_or_default())
    }
}

/// An audit Event's `series` brought up to date (its count and when it was last seen).
struct EventCount<'a> {
    namespace: &'a str,
    name: &'a str,
    count: i32,
    last: jiff::Timestamp,
}

impl Apply for EventCount<'_> {
    type Answer = Result<(), kube::Error>;

    async fn apply_to(self, writer: &crate::state::Writer, _: Door) -> Result<(), kube::Error> {
        let last = micro(self.last);
        let patch = serde_json::json!({"series": {"count": self.count, "lastObservedTime": last}});
        kube::Api::<Event>::namespaced(writer.client()?.clone(), self.namespace)
            .patch(self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }
}
