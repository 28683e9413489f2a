//! Unit tests of `src/rules/force_delete.rs`.

use super::*;
use crate::model::testing::{self, user};
use crate::rules::proof;

fn pod() -> Pod {
    testing::pod("ns", "db-0")
        .on(Some("n1"))
        .in_phase("Running")
}
fn node() -> Node {
    testing::node("n1")
}
fn decide(u: &UserInfo, p: &Pod, grace: Option<i64>, n: Fact<&Node>) -> Decision {
    let confirmed = proof::assumed(&p.metadata, CONFIRM_FORCE_DELETE);
    pod_delete(
        u,
        p,
        grace,
        n,
        None,
        &ForceDeletePolicy::default(),
        confirmed.as_ref(),
    )
}

#[test]
fn row1_graceful_allowed() {
    let admin = user("admin", &["system:masters"]);
    let n = node();
    assert_eq!(
        decide(&admin, &pod(), None, Fact::Found(&n)).row,
        "graceful-delete"
    );
    assert_eq!(
        decide(&admin, &pod(), Some(30), Fact::Found(&n)).row,
        "graceful-delete"
    );
    assert!(!decide(&admin, &pod(), Some(0), Fact::Found(&n)).allowed);
    // The apiserver turns a negative grace period into 1 s: graceful, not a force delete.
    assert_eq!(
        decide(&admin, &pod(), Some(-1), Fact::Found(&n)).row,
        "graceful-delete"
    );
}

#[test]
fn row2_own_kubelet_only() {
    let n = node();
    let own = user("system:node:n1", &["system:nodes", "system:authenticated"]);
    assert!(decide(&own, &pod(), Some(0), Fact::Found(&n)).allowed);
    let other = user("system:node:n2", &["system:nodes"]);
    assert!(!decide(&other, &pod(), Some(0), Fact::Found(&n)).allowed);
    let no_group = user("system:node:n1", &[]);
    assert!(!decide(&no_group, &pod(), Some(0), Fact::Found(&n)).allowed);
}

#[test]
fn row3_unscheduled_or_terminal() {
    let ctl = user(
        "system:serviceaccount:kube-system:pod-garbage-collector",
        &["system:serviceaccounts"],
    );
    let mut p = pod();
    p.spec.node_name = None;
    assert!(decide(&ctl, &p, Some(0), Fact::Missing).allowed);
    for phase in ["Succeeded", "Failed"] {
        let mut p = pod();
        p.status.phase = Some(phase.into());
        assert_eq!(
            decide(&ctl, &p, Some(0), Fact::Found(&node())).row,
            "force-delete-not-running"
        );
    }
}

#[test]
fn row4_and_5_node_gone_or_out_of_service() {
    let ctl = user(
        "system:serviceaccount:kube-system:pod-garbage-collector",
        &[],
    );
    let claimed = pod().mounting("data-db-0");
    let gone = |record| {
        pod_delete(
            &ctl,
            &claimed,
            Some(0),
            Fact::Missing,
            record,
            &ForceDeletePolicy::default(),
            None,
        )
    };
    assert_eq!(gone(Some("n1-deleted-1")).row, "force-delete-node-gone");
    // Issue 40 point 6: a node gone without a record of its deletion on proof proves nothing.
    let d = gone(None);
    assert_eq!((d.allowed, d.row), (false, "force-delete-running-pod"));
    let m = d.message.unwrap_or_default();
    assert!(
        m.contains("no longer exists") && m.contains("kubectl volguard fence confirm n1"),
        "{m}"
    );
    // A pod that uses no claim has no volume to protect: its node's deletion needed no proof.
    let stateless = pod_delete(
        &ctl,
        &pod(),
        Some(0),
        Fact::Missing,
        None,
        &ForceDeletePolicy::default(),
        None,
    );
    assert_eq!(stateless.row, "force-delete-node-gone");
    let n = node().out_of_service();
    assert!(decide(&ctl, &pod(), Some(0), Fact::Found(&n)).allowed);
    // Unknown node is not a confirmed partition.
    assert!(
        !decide(
            &ctl,
            &pod(),
            Some(0),
            Fact::Unknown(crate::rules::decision::ReadError::Timeout {
                what: "the fact".into()
            })
        )
        .allowed
    );
}

#[test]
fn row6_pod_opted_in_warns() {
    let mut p = pod();
    p.spec.termination_grace_period_seconds = Some(0);
    let d = decide(
        &user("system:serviceaccount:x:y", &[]),
        &p,
        Some(0),
        Fact::Found(&node()),
    );
    assert!(d.allowed);
    assert_eq!(d.warnings.len(), 1);
}

#[test]
fn row7_allow_list() {
    let policy = ForceDeletePolicy {
        allow_users: vec!["system:serviceaccount:ops:fencer".into()],
        allow_groups: vec!["storage-admins".into()],
        ..Default::default()
    };
    let n = node();
    for (name, groups, allowed) in [
        ("system:serviceaccount:ops:fencer", &[][..], true),
        ("bob", &["storage-admins"][..], true),
        ("bob", &["devs"][..], false),
    ] {
        let d = pod_delete(
            &user(name, groups),
            &pod(),
            Some(0),
            Fact::Found(&n),
            None,
            &policy,
            None,
        );
        assert_eq!(d.allowed, allowed, "{name} {groups:?}");
        if allowed {
            assert_eq!(d.row, "force-delete-allow-listed");
        }
    }
}

#[test]
fn row8_humans_confirm_or_warn_mode() {
    let n = node();
    let alice = user("alice", &["system:authenticated"]);
    let d = decide(&alice, &pod(), Some(0), Fact::Found(&n));
    assert!(!d.allowed);
    let msg = d.message.unwrap_or_default();
    assert!(msg.contains("may keep running"));
    assert!(msg.contains(OUT_OF_SERVICE_TAINT) && msg.contains(CONFIRM_FORCE_DELETE.annotation()));
    let mut p = pod();
    p.metadata.annotations = Some(
        [
            (
                CONFIRM_FORCE_DELETE.annotation().to_string(),
                "true".to_string(),
            ),
            (proof::CONFIRMED_BY.to_string(), "alice".to_string()),
        ]
        .into(),
    );
    let d = decide(&alice, &p, Some(0), Fact::Found(&n));
    assert!(d.allowed);
    // volguard's account first (the break-glass Event's message), kubectl's generic text after.
    assert_eq!(d.warnings.len(), 2, "{:?}", d.warnings);
    assert!(
        d.warnings[0].contains("on \"alice\"'s confirmation")
            && d.warnings[0].contains(CONFIRM_FORCE_DELETE.annotation())
            && d.warnings[0].contains("the risk accepted"),
        "{}",
        d.warnings[0]
    );
    assert_eq!(d.warnings[1], KUBECTL_WARNING);
    // Controllers cannot use the human confirmation.
    let sa = user(
        "system:serviceaccount:kube-system:statefulset-controller",
        &["system:serviceaccounts"],
    );
    assert!(!decide(&sa, &p, Some(0), Fact::Found(&n)).allowed);
    let sa_no_prefix = user("robot", &["system:serviceaccounts"]);
    assert!(!decide(&sa_no_prefix, &p, Some(0), Fact::Found(&n)).allowed);
    let warn = ForceDeletePolicy {
        human: HumanForceDelete::Warn,
        ..Default::default()
    };
    assert!(pod_delete(&alice, &pod(), Some(0), Fact::Found(&n), None, &warn, None).allowed);
    assert!(!pod_delete(&sa, &pod(), Some(0), Fact::Found(&n), None, &warn, None).allowed);
}
