//! The view's changes to the work queue, in the leader only. Every replica keeps warm caches
//! (a take-over starts from synced state), but only the leader's workers drain the queue: a
//! follower that queued what it saw would hold a key for every claim and volume in the cluster
//! for as long as it follows, the largest part of a standby's memory above its caches
//! (docs/performance.md). Taking the lead queues everything once (`Leads::lead`), so nothing a
//! follower let pass is missed.

use super::reconcile::{Key, Reconciler};
use crate::state::ViewChange;
use crate::state::live::Change;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this replica leads (shared by the task that follows the view and the one that leads).
#[derive(Clone, Default)]
pub struct Leads(Arc<AtomicBool>);

impl Leads {
    /// Start leading: from here on every change is queued, and everything the caches hold is
    /// queued once. In that order: a change the follower dropped was applied to the caches before
    /// it was published, so the sweep that follows the flag sees it.
    pub fn lead(&self, r: &Reconciler) {
        self.0.store(true, Ordering::SeqCst);
        enqueue_all(r);
    }

    fn leading(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The view's changes to the queue: every change enqueues the keys rules.md §4 names. A
/// subscriber that fell behind looks at everything again. A follower queues nothing.
pub async fn follow(
    mut changes: tokio::sync::broadcast::Receiver<ViewChange>,
    r: Arc<Reconciler>,
    leads: Leads,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let change = changes.recv().await;
        if !leads.leading() && !matches!(change, Err(RecvError::Closed)) {
            continue;
        }
        match change {
            Ok(ViewChange::Pvc(c)) => match c {
                Change::Applied { new, .. } => r
                    .queue
                    .add(Key::pvc(&new.metadata.namespace, &new.metadata.name)),
                Change::Deleted(old) => r.forget_pvc(&old.metadata.namespace, &old.metadata.name),
                Change::Relisted => enqueue_all(&r),
            },
            Ok(ViewChange::Pv(c)) => match c {
                Change::Applied { new, .. } => r.queue.add(Key::Pv(new.metadata.name.clone())),
                Change::Deleted(_) => {}
                Change::Relisted => enqueue_all(&r),
            },
            Ok(ViewChange::Pod(c)) => r.on_pod_change(c),
            Ok(ViewChange::Node(_)) => {}
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "fell behind the cluster view's changes; looking at every volume again"
                );
                enqueue_all(&r);
            }
            Err(RecvError::Closed) => return,
        }
    }
}

fn enqueue_all(r: &Reconciler) {
    for p in r.view.sweep::<crate::model::Pvc>(None) {
        r.queue
            .add(Key::pvc(&p.metadata.namespace, &p.metadata.name));
    }
    for p in r.view.sweep::<crate::model::Pv>(None) {
        r.queue.add(Key::Pv(p.metadata.name.clone()));
    }
}

#[cfg(test)]
#[path = "follow_tests.rs"]
mod tests;
