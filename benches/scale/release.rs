//! Release throughput: after 10 % of the pods go (as when StatefulSets scale down and their
//! retained claims are deleted), claims released per second by kube-controller-manager's
//! pvc-protection controller alone and by volguard's controller alone, with the requests each made
//! per release (their own FlowSchemas).

use crate::grow;
use crate::load;
use crate::support::harness::{self, ControlPlane};
use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, ListParams};
use std::time::{Duration, Instant};

/// One controller's release of a batch of claims.
#[derive(Clone, Copy, Default)]
pub struct Released {
    pub claims: usize,
    /// Seconds until the apiserver had accepted every delete.
    pub issued: f64,
    /// Seconds until every claim was gone (its finalizer released).
    pub gone: f64,
    /// Requests the releasing controller made, per claim.
    pub requests_per_claim: f64,
}

impl Released {
    pub fn per_second(&self) -> f64 {
        self.claims as f64 / self.gone.max(1e-9)
    }
}

/// Delete claims `range` (32 requests at a time) and time their release; `who` is the releasing
/// controller's FlowSchema.
async fn release(cp: &ControlPlane, range: std::ops::Range<usize>, who: &str) -> Released {
    let c = cp.admin().await;
    let before = load::sample(&c).await;
    let started = Instant::now();
    let errors: Vec<_> = futures::stream::iter(range.clone())
        .map(|i| {
            let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), &grow::namespace_of(i));
            async move {
                pvcs.delete(&grow::claim_of(i), &DeleteParams::default())
                    .await
                    .err()
            }
        })
        .buffer_unordered(32)
        .filter_map(|e| async move { e })
        .collect()
        .await;
    assert!(errors.is_empty(), "deleting claims: {errors:?}");
    let issued = started.elapsed().as_secs_f64();
    let namespaces: std::collections::BTreeSet<String> =
        range.clone().map(grow::namespace_of).collect();
    loop {
        let mut left = 0;
        for ns in &namespaces {
            let list = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
                .list_metadata(&ListParams::default().match_any())
                .await
                .expect("list claims");
            left += list
                .items
                .iter()
                .filter_map(|p| {
                    p.metadata
                        .name
                        .as_deref()?
                        .strip_prefix("data-")?
                        .parse::<usize>()
                        .ok()
                })
                .filter(|i| range.contains(i))
                .count();
        }
        if left == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "{left} claims not released in 30 min\n{}",
            cp.logs()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let gone = started.elapsed().as_secs_f64();
    let after = load::sample(&c).await;
    let claims = range.len();
    Released {
        claims,
        issued,
        gone,
        requests_per_claim: load::requests(&before, &after, who) / claims.max(1) as f64,
    }
}

/// volguard's controller (the single replica left) holds the lease.
pub async fn controller_leads(cp: &ControlPlane) {
    let probe = *cp.controller_probes.last().expect("a controller");
    let started = Instant::now();
    loop {
        let text = crate::support::objects::metrics_text(probe).await;
        if text
            .lines()
            .any(|l| l.starts_with("volguard_controller_leader ") && l.ends_with(" 1"))
        {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "volguard's controller does not lead"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Pods `from..to` go; then their claims' first half is released by kube-controller-manager's
/// pvc-protection controller alone (volguard's controller stopped; its webhook still guards the
/// finalizer's removal, as in a cluster running both), the second half by volguard's controller
/// alone (kcm restarted without its pvc-protection controller).
pub async fn release_tenth(cp: &mut ControlPlane, from: usize, to: usize) -> (Released, Released) {
    let c = cp.admin().await;
    let left = grow::pod_total(&c).await - (to - from);
    // Pods of the growth's generation: the churn takes others.
    grow::delete_pods(cp, &c, (from, to), 0, left).await;
    let mid = from + (to - from) / 2;
    for mut p in std::mem::take(&mut cp.controllers) {
        p.kill();
    }
    cp.controller_probes.clear();
    let kcm = release(cp, from..mid, load::KCM_PVC_PROTECTION_SA).await;
    let mut extra = harness::SCALE_CLIENT.to_vec();
    extra.push("--node-monitor-grace-period=240s");
    extra.push("--controllers=*,-persistentvolumeclaim-protection-controller");
    cp.start_kcm_all(&extra);
    cp.start_controller("replica-a").await;
    controller_leads(cp).await;
    let volguard = release(cp, mid..to, load::CONTROLLER).await;
    (kcm, volguard)
}
