//! Unit tests of `src/controller/follow.rs`.

use super::*;
use crate::controller::reconcile::tests::harness;
use crate::model::{Pod, Pvc, testing};
use crate::state::Store;

fn applied_pvc(p: &Pvc) -> ViewChange {
    ViewChange::Pvc(Change::Applied {
        old: None,
        new: Arc::new(p.clone()),
    })
}

/// Runs `follow` over `changes` until they end; what it queued stays in the reconciler's queue.
async fn followed(r: &Arc<Reconciler>, leads: &Leads, changes: Vec<ViewChange>) {
    let (tx, rx) = tokio::sync::broadcast::channel(64);
    for c in changes {
        tx.send(c).ok();
    }
    drop(tx);
    follow(rx, r.clone(), leads.clone()).await;
}

/// A standby sees every change and queues none: at 5,000 nodes its queue held a key for each of
/// 120,000 claims and volumes it never worked on. What it let pass (already in the caches, which
/// apply a change before publishing it) is queued when it takes the lead.
#[tokio::test]
async fn a_follower_queues_nothing_and_leading_queues_what_it_let_pass() {
    let store = Arc::new(Store::default());
    let claim = testing::pvc("ns1", "data-0");
    store.pvcs.apply(claim.clone());
    let used = testing::pod("ns1", "pod-0").mounting("data-0");
    let r = Arc::new(harness(store.clone()).r);
    let leads = Leads::default();
    let pod_gone = ViewChange::Pod(Change::Deleted(Arc::new(used.clone())));
    followed(
        &r,
        &leads,
        vec![
            applied_pvc(&claim),
            pod_gone,
            ViewChange::Pvc(Change::Relisted),
        ],
    )
    .await;
    assert_eq!(r.queue.len(), 0, "a follower queued work");
    // A claim and a volume that arrive while it follows: applied to the caches, then published
    // (the order the watches keep), and dropped.
    let later = testing::pvc("ns1", "data-1");
    store.pvcs.apply(later.clone());
    let mut volume = crate::model::Pv::default();
    volume.metadata.name = "pv-1".into();
    store.pvs.apply(volume.clone());
    let pv_applied = ViewChange::Pv(Change::Applied {
        old: None,
        new: Arc::new(volume),
    });
    followed(&r, &leads, vec![applied_pvc(&later), pv_applied]).await;
    assert_eq!(r.queue.len(), 0, "a follower queued work");

    leads.lead(&r);
    assert_eq!(
        r.queue.len(),
        3,
        "taking the lead queues every claim and volume the caches hold"
    );
}

/// The leader queues each change (and the keys a pod's change names) as it comes.
#[tokio::test]
async fn the_leader_queues_each_change() {
    let store = Arc::new(Store::default());
    let r = Arc::new(harness(store.clone()).r);
    let leads = Leads::default();
    leads.lead(&r);
    assert_eq!(r.queue.len(), 0);
    let later = testing::pvc("ns1", "data-1");
    let user: Pod = testing::pod("ns1", "pod-1").mounting("data-2");
    followed(
        &r,
        &leads,
        vec![
            applied_pvc(&later),
            ViewChange::Pod(Change::Deleted(Arc::new(user))),
        ],
    )
    .await;
    assert_eq!(
        r.queue.len(),
        2,
        "the applied claim and the claim the deleted pod named"
    );
}
