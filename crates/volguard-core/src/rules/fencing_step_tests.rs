//! Unit tests of `src/rules/fencing_step.rs`: one per row of the phase machine.

use super::*;

const BACKENDS: &[(BackendKind, u64)] = &[(BackendKind::Webhook, 30), (BackendKind::Manual, 86400)];

fn record(phase: Phase) -> Record<'static> {
    Record {
        node: "n1",
        phase,
        lease_at_detection: Some("t1"),
        boot_id_at_detection: Some("boot-1"),
        released_volumes: &[],
        message: None,
        backend_index: 0,
        backends: BACKENDS,
    }
}

/// Down: Lease still at t1, not Ready.
fn down() -> Now<'static> {
    Now {
        node: true,
        ready: Some(false),
        lease: Some("t1"),
        boot_id: Some("boot-1"),
        volumes: &[],
        scope: None,
    }
}

/// Back: Lease renewed, Ready.
fn back() -> Now<'static> {
    Now {
        lease: Some("t2"),
        ready: Some(true),
        ..down()
    }
}

fn write(d: Do) -> Transition {
    match d {
        Do::Write(t) => t,
        other => panic!("expected a write, got {other:?}"),
    }
}

#[test]
fn detected_requests_the_first_backend() {
    let t = write(step(&record(Phase::Detected), &down()));
    assert_eq!((t.phase, t.step), (Phase::Fencing, "fence-requested"));
    assert_eq!(t.effects.request, Some(0));
    assert!(
        t.message.contains("backend webhook (timeout 30s)"),
        "{}",
        t.message
    );
}

#[test]
fn a_node_that_heals_before_the_release_aborts_and_undoes_a_started_fence() {
    let t = write(step(&record(Phase::Detected), &back()));
    assert_eq!(t.phase, Phase::Aborted);
    assert!(!t.effects.unfence_best_effort);
    let t = write(step(&record(Phase::Fencing), &back()));
    assert_eq!(t.phase, Phase::Aborted);
    assert!(t.effects.unfence_best_effort);
}

#[test]
fn a_deleted_node_ends_the_incident() {
    let gone = Now {
        node: false,
        ..down()
    };
    for p in [Phase::Detected, Phase::Fencing, Phase::Released] {
        assert_eq!(write(step(&record(p), &gone)).phase, Phase::Done, "{p:?}");
    }
}

#[test]
fn fencing_asks_the_backend_and_a_done_needs_the_proof() {
    assert_eq!(step(&record(Phase::Fencing), &down()), Do::AskFence);
    let r = record(Phase::Fencing);
    let t = write(after_fence(&r, &down(), Answer::Done("agent: off".into())));
    assert_eq!((t.phase, t.effects.fenced), (Phase::Fenced, true));
    // The Lease renewed after the backend said done: the fence did not hold.
    let renewed = Now {
        lease: Some("t2"),
        ..down()
    };
    let t = write(after_fence(&r, &renewed, Answer::Done("agent: off".into())));
    assert_eq!((t.phase, t.step), (Phase::Failed, "proof-failed"));
    assert!(t.effects.backend_failed);
}

#[test]
fn a_failed_backend_hands_over_to_the_next_then_fails_the_incident() {
    let r = record(Phase::Fencing);
    let t = write(after_fence(&r, &down(), Answer::Failed("refused".into())));
    assert_eq!((t.phase, t.effects.request), (Phase::Fencing, Some(1)));
    assert!(
        t.message.contains("after: backend webhook failed: refused"),
        "{}",
        t.message
    );
    let last = Record {
        backend_index: 1,
        ..r
    };
    let t = write(after_fence(
        &last,
        &down(),
        Answer::Failed("timeout".into()),
    ));
    assert_eq!(t.phase, Phase::Failed);
    assert!(
        t.announce
            .expect("event")
            .note
            .ends_with("nothing was released")
    );
}

#[test]
fn a_pending_answer_is_noted_once() {
    let r = record(Phase::Fencing);
    let t = write(after_fence(
        &r,
        &down(),
        Answer::Pending("powering off".into()),
    ));
    assert_eq!((t.phase, t.step), (Phase::Fencing, "progress"));
    let same = Record {
        message: Some("powering off"),
        ..r
    };
    assert_eq!(
        after_fence(&same, &down(), Answer::Pending("powering off".into())),
        Do::Nothing
    );
}

#[test]
fn fenced_taints_only_when_the_proof_still_holds_and_the_scope_covers() {
    let machine = Scope::Machine;
    let driver = Scope::Driver("rbd.csi.ceph.com".into());
    let nfs = [Storage::InTree("nfs".into())];
    let covered = Now {
        scope: Some((&machine, &[])),
        ..down()
    };
    let t = write(step(&record(Phase::Fenced), &covered));
    assert_eq!(t.phase, Phase::Released);
    assert!(t.effects.taint && t.effects.announce_affected);
    // Not covered: holds, saying why, once.
    let partial = Now {
        scope: Some((&driver, &nfs)),
        ..down()
    };
    let t = write(step(&record(Phase::Fenced), &partial));
    assert_eq!((t.phase, t.step), (Phase::Fenced, "progress"));
    assert!(!t.effects.taint);
    assert_eq!(
        t.announce.as_ref().map(|a| a.reason),
        Some("FenceScopeIncomplete")
    );
    let said = Record {
        message: Some(t.message.as_str()),
        ..record(Phase::Fenced)
    };
    assert_eq!(step(&said, &partial), Do::Nothing);
    // Scope not read: unknown, no taint.
    assert_eq!(step(&record(Phase::Fenced), &down()), Do::Nothing);
    // The node came back between the fence and the taint: no taint.
    let t = write(step(
        &record(Phase::Fenced),
        &Now {
            scope: Some((&machine, &[])),
            ..back()
        },
    ));
    assert_eq!(t.phase, Phase::Failed);
    assert!(!t.effects.taint);
}

#[test]
fn a_returned_node_recovers_only_after_a_reboot_or_with_its_volumes_gone() {
    let t = write(step(&record(Phase::Released), &back()));
    assert_eq!(
        (t.phase, t.effects.unfence_requested),
        (Phase::Recovering, true)
    );
    assert_eq!(step(&record(Phase::Released), &down()), Do::Nothing);
    let released = ["pvc-1".to_string()];
    let r = Record {
        released_volumes: &released,
        ..record(Phase::Recovering)
    };
    // Same boot, the volume still mounted: held.
    let still = Now {
        volumes: &released,
        ..back()
    };
    let t = write(step(&r, &still));
    assert_eq!(t.announce.map(|a| a.reason), Some("RecoveryHeld"));
    // Rebooted: unfence.
    let rebooted = Now {
        boot_id: Some("boot-2"),
        ..still.clone()
    };
    assert_eq!(step(&r, &rebooted), Do::AskUnfence);
    // Same boot, volumes gone: unfence.
    assert_eq!(step(&r, &back()), Do::AskUnfence);
    let t = write(after_unfence(&r, Answer::Done("agent: on".into())));
    assert_eq!((t.phase, t.effects.untaint), (Phase::Done, true));
    let t = write(after_unfence(&r, Answer::Failed("busy".into())));
    assert_eq!((t.phase, t.effects.untaint), (Phase::Recovering, false));
}

#[test]
fn final_phases_do_nothing() {
    for p in [Phase::Done, Phase::Failed, Phase::Aborted] {
        assert_eq!(step(&record(p), &back()), Do::Nothing);
    }
}
