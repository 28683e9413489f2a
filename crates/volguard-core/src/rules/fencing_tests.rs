//! Unit tests of `src/rules/fencing.rs`.

use super::*;

fn secs(s: i64) -> SignedDuration {
    SignedDuration::from_secs(s)
}
fn now() -> Timestamp {
    "2026-11-23T12:00:00Z".parse().expect("ts")
}
fn partitioned() -> NodeHealth {
    NodeHealth {
        lease_silent_for: Some(secs(60)),
        ready: Some(false),
        ready_changed: Some(now() - secs(30)),
        control_plane: false,
        maintenance: None,
    }
}
fn limits() -> Limits {
    Limits {
        partition_after: secs(20),
        max_unhealthy: MaxUnhealthy::Count(1),
        max_concurrent: 1,
    }
}

#[test]
fn mode_namespace_over_class_default_off() {
    assert_eq!(mode(None, None, None), Mode::Off);
    assert_eq!(mode(None, None, Some("auto")), Mode::Auto);
    assert_eq!(mode(None, Some("manual"), Some("auto")), Mode::Manual);
    assert_eq!(mode(None, None, Some("yes")), Mode::Off);
}

/// Issue 40 point 5: one tenant must not opt a whole node in; a pod may only opt out.
#[test]
fn a_pod_may_only_lower_its_mode() {
    assert_eq!(mode(Some("off"), Some("manual"), Some("auto")), Mode::Off);
    assert_eq!(mode(Some("manual"), None, Some("auto")), Mode::Manual);
    assert_eq!(mode(Some("auto"), None, None), Mode::Off);
    assert_eq!(mode(Some("auto"), Some("manual"), None), Mode::Manual);
    assert_eq!(mode(Some("auto"), None, Some("auto")), Mode::Auto);
    assert_eq!(mode(Some("bogus"), None, Some("auto")), Mode::Auto);
}

#[test]
fn forgiveness_is_the_longest_toleration() {
    use Tolerates::*;
    assert_eq!(forgiveness([]), Some(secs(0)));
    assert_eq!(
        forgiveness([NotAtAll, Seconds(5), Seconds(300)]),
        Some(secs(300))
    );
    assert_eq!(forgiveness([Seconds(5), Forever]), None);
}

#[test]
fn storm_counts_and_percentages() {
    assert!(!storm(1, 3, MaxUnhealthy::Count(1)));
    assert!(storm(2, 3, MaxUnhealthy::Count(1)));
    assert!(!storm(10, 100, MaxUnhealthy::Percent(10)));
    assert!(storm(11, 100, MaxUnhealthy::Percent(10)));
    assert_eq!("10%".parse(), Ok(MaxUnhealthy::Percent(10)));
    assert_eq!("3".parse(), Ok(MaxUnhealthy::Count(3)));
    assert!("101%".parse::<MaxUnhealthy>().is_err());
    assert!("many".parse::<MaxUnhealthy>().is_err());
}

#[test]
fn unhealthy_needs_silent_lease_and_not_ready() {
    let mut h = partitioned();
    assert!(h.unhealthy(secs(20)));
    assert!(!h.unhealthy(secs(61)));
    h.ready = Some(true);
    assert!(!h.unhealthy(secs(20)), "a Ready node is never partitioned");
    h.ready = Some(false);
    h.lease_silent_for = None;
    assert!(!h.unhealthy(secs(20)), "a lease never seen is not evidence");
}

#[test]
fn open_yes_and_each_hold() {
    let l = limits();
    assert_eq!(
        open(&partitioned(), 1, Some(secs(5)), false, 0, &l, now()),
        Open::Yes
    );
    let hold = |o: Open| match o {
        Open::Hold(r) => r,
        Open::Yes => panic!("expected a hold"),
    };
    let mut cp = partitioned();
    cp.control_plane = true;
    assert!(hold(open(&cp, 1, Some(secs(5)), false, 0, &l, now())).contains("control-plane"));
    assert!(hold(open(&partitioned(), 0, Some(secs(5)), false, 0, &l, now())).contains("opted in"));
    assert!(hold(open(&partitioned(), 1, Some(secs(5)), true, 0, &l, now())).contains("storm"));
    assert!(hold(open(&partitioned(), 1, None, false, 0, &l, now())).contains("forever"));
    assert!(
        hold(open(&partitioned(), 1, Some(secs(60)), false, 0, &l, now())).contains("toleration")
    );
    assert!(
        hold(open(&partitioned(), 1, Some(secs(5)), false, 1, &l, now())).contains("in progress")
    );
}

#[test]
fn proof_needs_a_silent_lease_and_not_ready() {
    assert!(proof(Some("t1"), Some("t1"), Some(false)).is_ok());
    assert!(proof(None, Some("t1"), None).is_ok());
    let e = proof(Some("t2"), Some("t1"), Some(false)).unwrap_err();
    assert!(e.contains("renewed since"), "{e}");
    assert!(proof(Some("t1"), Some("t1"), Some(true)).is_err());
}

#[test]
fn healed_needs_renewal_and_ready() {
    assert!(healed(Some("t2"), Some("t1"), Some(true)));
    assert!(!healed(Some("t1"), Some("t1"), Some(true)));
    assert!(!healed(Some("t2"), Some("t1"), Some(false)));
}

#[test]
fn backends_in_order() {
    assert_eq!(next_backend(0, 2), Some(1));
    assert_eq!(next_backend(1, 2), None);
}

/// Issue 40 point 4: a node that reports Ready or renewed its Lease within --partition-after is not
/// down, whoever says so.
#[test]
fn a_node_that_heartbeats_is_alive() {
    let now: Timestamp = "2026-11-25T10:00:00Z".parse().expect("ts");
    let after = SignedDuration::from_secs(40);
    let ago = |s: i64| Some(now - SignedDuration::from_secs(s));
    assert_eq!(
        alive(Some(true), None, after, now).as_deref(),
        Some("it reports Ready")
    );
    let why = alive(Some(false), ago(2), after, now).expect("alive");
    assert!(why.contains("renewed 2s ago"), "{why}");
    assert_eq!(alive(Some(false), ago(41), after, now), None);
    assert_eq!(alive(None, None, after, now), None);
    // A kubelet clock ahead of ours: renewed "in the future" is alive.
    assert!(
        alive(
            Some(false),
            Some(now + SignedDuration::from_secs(5)),
            after,
            now
        )
        .is_some()
    );
}

/// Issue 40 point 8: planned maintenance is not a partition (KEP-5683 conditions).
#[test]
fn a_node_in_planned_maintenance_is_never_fenced() {
    for c in MAINTENANCE_CONDITIONS {
        let mut h = partitioned();
        h.maintenance = Some(c.to_string());
        match open(&h, 1, Some(secs(0)), false, 0, &limits(), now()) {
            Open::Hold(why) => assert!(
                why.contains(c) && why.contains("planned maintenance"),
                "{why}"
            ),
            Open::Yes => panic!("{c}: fenced a node in maintenance"),
        }
    }
}

/// Issue 40 point 2: recovery waits for a reboot, or for the released volumes to be gone.
#[test]
fn recovery_needs_a_reboot_or_the_released_volumes_gone() {
    let released = vec!["kubernetes.io/csi/drv^vol-1".to_string()];
    let same = rebooted_or_released(Some("b1"), Some("b1"), &released, &released);
    let why = same.expect_err("same boot, volume still mounted");
    assert!(
        why.contains("without a reboot") && why.contains("vol-1"),
        "{why}"
    );
    assert_eq!(
        rebooted_or_released(Some("b2"), Some("b1"), &released, &released),
        Ok(())
    );
    assert_eq!(
        rebooted_or_released(Some("b1"), Some("b1"), &[], &released),
        Ok(())
    );
    // A boot never seen proves nothing: the volumes decide.
    assert!(rebooted_or_released(None, Some("b1"), &released, &released).is_err());
    assert!(rebooted_or_released(Some("b1"), None, &released, &released).is_err());
}

/// Issue 40 point 1: a fence covers one storage system or the whole machine; the taint releases
/// every volume, so it waits until the fence covers all the node's pods use.
#[test]
fn a_fence_covers_its_scope_only() {
    let used = vec![
        Storage::Csi("rbd.csi.ceph.com".into()),
        Storage::InTree("nfs".into()),
        Storage::Csi("rbd.csi.ceph.com".into()),
    ];
    assert!(uncovered(&Scope::Machine, &used).is_empty());
    assert_eq!(
        uncovered(&Scope::Driver("rbd.csi.ceph.com".into()), &used),
        vec![Storage::InTree("nfs".into())]
    );
    assert!(uncovered(&Scope::Driver("rbd.csi.ceph.com".into()), &used[..1]).is_empty());
    assert_eq!(uncovered(&Scope::Unknown, &used[..1]).len(), 1);
    let unknown = vec![Storage::Unknown("ns/data".into())];
    assert_eq!(uncovered(&Scope::Driver("x".into()), &unknown), unknown);
    let m = scope_message(
        "n1",
        &Scope::Driver("rbd.csi.ceph.com".into()),
        &[Storage::InTree("nfs".into())],
    );
    assert!(
        m.contains("covers CSI driver rbd.csi.ceph.com") && m.contains("also use nfs volumes"),
        "{m}"
    );
}

/// A deletion record of node n1 (a release on a person's proof), made at `at`.
fn deletion_record(at: Timestamp) -> std::sync::Arc<crate::model::fence::NodeFence> {
    // A release record's action is a Node deletion unless it says otherwise.
    let mut f = crate::model::testing::incident(crate::model::fence::Phase::Done, true);
    f.metadata.creation_timestamp = Some(at);
    std::sync::Arc::new(f)
}

#[test]
fn a_deletion_record_proves_a_node_gone_only_while_its_lease_is_silent() {
    use crate::rules::Fact;
    let at = now();
    let records = [deletion_record(at)];
    let found = |r: &Fact<Option<Timestamp>>| gone_on_record(&records, "n1", None, r).is_some();
    // No Lease, one renewed before the record, or at its very second: the record stands.
    assert!(found(&Fact::Found(None)));
    assert!(found(&Fact::Missing));
    assert!(found(&Fact::Found(Some(at - secs(30)))));
    assert!(found(&Fact::Found(Some(at))));
    // Renewed after the record: a kubelet still runs there, whatever the record says.
    assert!(!found(&Fact::Found(Some(at + secs(1)))));
    // The Lease unread: unsure, no proof.
    assert!(!found(&Fact::Unknown(
        crate::rules::decision::ReadError::Timeout {
            what: "the Lease".into(),
        }
    )));
    // Another node's record, or one older than what it would release, proves nothing.
    assert!(gone_on_record(&records, "n2", None, &Fact::Found(None)).is_none());
    assert!(gone_on_record(&records, "n1", Some(at + secs(5)), &Fact::Found(None)).is_none());
    assert!(gone_on_record(&records, "n1", Some(at - secs(5)), &Fact::Found(None)).is_some());
}

/// A record voided by a later heartbeat does not hide a newer one, made once the machine stopped
/// after that heartbeat (found by an adversary review: the first record listed was the only one
/// judged).
#[test]
fn a_voided_record_does_not_hide_a_later_one() {
    use crate::rules::Fact;
    let (first, second) = (now(), now() + secs(120));
    let mut later = (*deletion_record(second)).clone();
    later.metadata.name = "n1-2".into();
    let records = [deletion_record(first), std::sync::Arc::new(later)];
    let renewed = Fact::Found(Some(first + secs(60)));
    let found = gone_on_record(&records, "n1", None, &renewed).map(|f| f.metadata.name.as_str());
    assert_eq!(found, Some("n1-2"));
    // Renewed after both: neither counts.
    let renewed = Fact::Found(Some(second + secs(1)));
    assert!(gone_on_record(&records, "n1", None, &renewed).is_none());
}
