//! Unit tests of `src/server/trail.rs`.

use super::*;
use crate::model::testing::{self, user};
use crate::rules::Fact;
use crate::rules::force_delete::{ForceDeletePolicy, KUBECTL_WARNING, pod_delete};
use crate::rules::proof::{self, Key};

/// A force delete allowed on a person's confirmation: the break-glass Event says volguard's
/// reason (rule, row, who, the risk accepted), not kubectl's generic force-delete warning.
#[test]
fn the_break_glass_event_of_a_confirmed_force_delete_says_volguard_s_reason() {
    let mut pod = testing::pod("team", "db-0")
        .on(Some("n1"))
        .in_phase("Running");
    pod.metadata.annotations = Some(
        [
            (
                Key::ConfirmForceDelete.annotation().to_string(),
                "true".to_string(),
            ),
            (proof::CONFIRMED_BY.to_string(), "alice".to_string()),
        ]
        .into(),
    );
    let node = testing::node("n1");
    let alice = user("alice", &["system:authenticated"]);
    let d = pod_delete(
        &alice,
        &pod,
        Some(0),
        Fact::Found(&node),
        None,
        &ForceDeletePolicy::default(),
        proof::assumed(&pod.metadata, Key::ConfirmForceDelete).as_ref(),
    );
    assert!(d.allowed && d.row == "force-delete-confirmed");
    let Some(crate::rules::Effect::Record(kind)) = d.effect else {
        panic!("{:?} leaves no record", d.row)
    };
    assert_eq!(kind, crate::rules::Recorded::BreakGlass);
    let note = event_note(
        kind.verb(),
        "DELETE Pod team/db-0",
        "alice",
        "force-delete",
        &d,
    );
    assert!(!note.contains(KUBECTL_WARNING), "{note}");
    for want in [
        "by alice",
        "rule force-delete",
        "row force-delete-confirmed",
        "on \"alice\"'s confirmation",
        Key::ConfirmForceDelete.annotation(),
        "node \"n1\"",
        "the risk accepted",
    ] {
        assert!(note.contains(want), "{want:?} in {note}");
    }
}

/// Only kubectl's generic warning: the row stands in for it.
#[test]
fn an_event_never_carries_kubectl_s_generic_warning() {
    let d = crate::rules::Decision::allow("force-delete-confirmed").with_warning(KUBECTL_WARNING);
    let note = event_note("allowed", "DELETE Pod team/db-0", "bob", "force-delete", &d);
    assert!(note.ends_with("): force-delete-confirmed"), "{note}");
}
