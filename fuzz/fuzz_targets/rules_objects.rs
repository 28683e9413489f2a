//! Every rule over arbitrary objects: decode what decodes, run each rule with each kind of fact.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volguard::model::{Node, Pod, Pv, Pvc, UserInfo};
use volguard::rules::claims::claims_of;
use volguard::rules::decision::ReadError;
use volguard::rules::rwo_lock::{self, NodeHold, RwoLock};
use volguard::rules::{
    Fact, binding, finalizer_guard, force_delete, in_use, pod_create, protect, release,
};

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let pod: Pod = serde_json::from_value(v["pod"].clone()).unwrap_or_default();
    let pvc: Pvc = serde_json::from_value(v["pvc"].clone()).unwrap_or_default();
    let pv: Pv = serde_json::from_value(v["pv"].clone()).unwrap_or_default();
    let node: Node = serde_json::from_value(v["node"].clone()).unwrap_or_default();
    let user: UserInfo = serde_json::from_value(v["user"].clone()).unwrap_or_default();
    let grace = v["grace"].as_i64();
    let pods = vec![pod.clone()];

    let claims: Vec<_> = claims_of(&pod).map(|c| (c, Fact::Found(&pvc))).collect();
    let _ = pod_create::pod_create(&pod, &claims);
    let _ = pod_create::pod_create(
        &pod,
        &claims_of(&pod)
            .map(|c| (c, Fact::Missing))
            .collect::<Vec<_>>(),
    );
    if let Some(name) = binding::newly_bound_volume(None, &pvc) {
        let _ = binding::pvc_binding(&pvc, name, Fact::Found(&pv));
    }
    // The finalizer guard's first look at an update that drops every finalizer (and at one
    // that keeps them), then each strip judged on each kind of fact.
    let proofs = volguard::rules::proof::Reader::new(Default::default());
    let (bare_pvc, bare_pv) = (Pvc::default(), Pv::default());
    let (mut stripped_pvc, mut stripped_pv) = (pvc.clone(), pv.clone());
    stripped_pvc.metadata.finalizers = None;
    stripped_pv.metadata.finalizers = None;
    for new in [&bare_pvc, &stripped_pvc, &pvc] {
        if let finalizer_guard::Look::Strip(s) =
            finalizer_guard::look(&user, &[], &proofs, &pvc, new)
        {
            assert!(s.stored().metadata.has_finalizer(volguard::model::PVC_FINALIZER));
            let _ = pods.iter().filter(|p| s.blocks(p)).count();
            let _ = s.judge(Fact::Found(&pods));
        }
    }
    for c in [
        Fact::Found(&pvc),
        Fact::Missing,
        Fact::Unknown(ReadError::Timeout {
            what: "the fact".into(),
        }),
    ] {
        for new in [&bare_pv, &stripped_pv, &pv] {
            if let finalizer_guard::Look::Strip(s) =
                finalizer_guard::look(&user, &[], &proofs, &pv, new)
            {
                let _ = s.claim_ref();
                let _ = s.judge(c.clone());
            }
        }
        let _ = release::pv_plan(&pv, c);
    }
    for n in [
        Fact::Found(&node),
        Fact::Missing,
        Fact::Unknown(ReadError::Timeout {
            what: "the fact".into(),
        }),
    ] {
        // The pod's confirmation as the one proof reader finds it (any annotations the input
        // carries: stamped, expired, forged).
        let confirmed = volguard::rules::proof::Reader::new(Default::default()).valid(
            &pod.metadata,
            volguard::rules::proof::Key::ConfirmForceDelete,
        );
        for record in [None, Some("rec")] {
            let d = force_delete::pod_delete(
                &user,
                &pod,
                grace,
                n.clone(),
                record,
                &Default::default(),
                confirmed.as_ref(),
            );
            // A graceful delete is never refused.
            if !force_delete::is_force(grace) {
                assert!(d.allowed);
            }
        }
    }
    let _ = protect::protect_on_create(&pvc.metadata, "kubernetes.io/pvc-protection");
    let _ = in_use::pod_blocks_deletion(&pod, &pvc);
    let _ = release::pvc_plan(&pvc, &pods);
    let _ = release::unused_since(&pvc, &pods, std::time::Duration::ZERO);
    let _ = release::unused_since(&pvc, &pods, std::time::Duration::from_secs(120));
    let _ = release::claims_to_requeue(Some(&pod), Some(&pod));
    // The RWO lock as any annotation may carry it: parse or not, never a panic.
    let lock = RwoLock::of(&pvc);
    let now = jiff::Timestamp::UNIX_EPOCH;
    let users = [pod.clone()];
    for (u, w, n, quiet) in [
        (
            Fact::Found(&users[..]),
            Fact::Found(&pod),
            Fact::Found(&node),
            0,
        ),
        (
            Fact::Found(&[][..]),
            Fact::Found(&pod),
            Fact::Found(&node),
            3600,
        ),
        (Fact::Found(&[][..]), Fact::Missing, Fact::Found(&node), 0),
        (Fact::Missing, Fact::Missing, Fact::Missing, 0),
        (
            Fact::Unknown(ReadError::Timeout {
                what: "the fact".into(),
            }),
            Fact::Unknown(ReadError::Timeout {
                what: "the fact".into(),
            }),
            Fact::Unknown(ReadError::Timeout {
                what: "the fact".into(),
            }),
            3600,
        ),
    ] {
        let h = NodeHold {
            claim: "data",
            users: u,
            writer: w.clone().into(),
            node: n,
            gone_recorded: quiet == 0,
            // The grace the lock asks (its writer's), or the default: a fuzzed lock's value never
            // overflows a reader's arithmetic.
            observed: rwo_lock::LockAge {
                quiet: std::time::Duration::from_secs(quiet),
                grace: lock.as_ref().map_or(rwo_lock::DEFAULT_GRACE, RwoLock::grace),
            },
            writer_stored: quiet != 3600,
        };
        let node_name = pod.node_name().unwrap_or("n");
        let named = rwo_lock::Named {
            writer: w.into(),
            observed: rwo_lock::LockAge::quiet(std::time::Duration::from_secs(quiet)),
            writer_stored: quiet == 0,
        };
        for via in [rwo_lock::Via::Bind, rwo_lock::Via::Create] {
            let _ = rwo_lock::step(&pod, node_name, via, lock.as_ref(), Some(&h), None, now);
            // On the lock's own node, the named placement as read.
            let _ = rwo_lock::step(&pod, node_name, via, lock.as_ref(), None, Some(&named), now);
        }
        // The controller's look from its caches and after its live read: no fuzzed lock (its
        // grace included) makes either panic.
        let cached = rwo_lock::CachedHold {
            in_use: quiet == 0,
            node: Some(&node),
            via: lock.as_ref().and_then(|l| l.via),
        };
        let _ = rwo_lock::cleanup_cached(&cached, h.observed);
        if let Some(l) = &lock {
            let _ = rwo_lock::cleanup_live(l, &h);
        }
        // A lock that holds is never cleared.
        if let Some(l) = &lock
            && matches!(rwo_lock::standing(l, &h), rwo_lock::Standing::Holds(_))
        {
            assert_eq!(rwo_lock::clearable(l, &h), None);
        }
    }
    // What fencing reads of the model (rules.md §7): never a panic, and the cache's prune keeps
    // what detection reads.
    let forgiveness = volguard::rules::fencing::forgiveness([pod.spec.tolerates_unreachable]);
    if pod.spec.tolerates_unreachable == volguard::model::Tolerates::Forever {
        assert_eq!(forgiveness, None);
    }
    let _ = volguard::rules::fencing::Storage::of(&pv);
    let (ready, addresses, boot, maintenance) = (
        node.ready_since(),
        node.addresses(),
        node.boot_id().map(str::to_string),
        node.maintenance().map(str::to_string),
    );
    let _ = (node.volumes(), node.is_control_plane());
    let mut pruned = node.clone();
    pruned.prune();
    assert_eq!(pruned.ready_since().0, ready.0);
    assert_eq!(pruned.addresses(), addresses);
    assert_eq!(pruned.boot_id().map(str::to_string), boot);
    assert_eq!(pruned.maintenance().map(str::to_string), maintenance);
    assert!(pruned.volumes().is_empty());
});
