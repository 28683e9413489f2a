//! rules.md §7: one incident's phase machine, pure. The driver (`fencing::driver`) reads the
//! node, its Lease and (while `Fenced`) the storage its pods use, asks `step` what to do, calls a
//! backend when told to and feeds its answer to `after_fence` / `after_unfence`, then writes the
//! transition (status first, then the effects that act on the cluster, as the record says). The
//! model (`tests/model_fencing.rs`) drives these same functions.

use super::fencing::{Scope, Storage, healed, next_backend, proof, rebooted_or_released};
use crate::model::OUT_OF_SERVICE_TAINT;
use crate::model::fence::{BackendKind, Phase};

/// What a backend answered (fence or unfence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Done (fenced, or unfenced for `unfence`); the evidence to record.
    Done(String),
    /// Working on it: ask again later.
    Pending(String),
    /// It will not happen through this backend.
    Failed(String),
}

/// The incident as recorded in its NodeFence.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    pub node: &'a str,
    pub phase: Phase,
    /// The Lease's renewTime when the partition was detected (what the proof compares against).
    pub lease_at_detection: Option<&'a str>,
    pub boot_id_at_detection: Option<&'a str>,
    /// What the kubelet reported mounted or attached when the taint went on.
    pub released_volumes: &'a [String],
    /// The last message written (a note is written only when it changes).
    pub message: Option<&'a str>,
    pub backend_index: usize,
    /// The backends to try, in order, with each one's timeout in seconds.
    pub backends: &'a [(BackendKind, u64)],
}

/// What the driver read just now (live).
#[derive(Debug, Clone)]
pub struct Now<'a> {
    /// The Node exists.
    pub node: bool,
    pub ready: Option<bool>,
    pub lease: Option<&'a str>,
    pub boot_id: Option<&'a str>,
    /// What the kubelet reports mounted or attached now.
    pub volumes: &'a [String],
    /// While `Fenced`: the current backend's scope and the storage the node's pods use that it
    /// does not cover (read only in that phase).
    pub scope: Option<(&'a Scope, &'a [Storage])>,
}

/// An Event beside the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announce {
    pub reason: &'static str,
    pub warning: bool,
    pub note: String,
}

/// What a transition does besides writing the record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    /// Undo whatever the backend did so far (best effort: nothing was released).
    pub unfence_best_effort: bool,
    /// The backend at this index is asked next (recorded before it is asked).
    pub request: Option<usize>,
    /// The current backend failed (a metric).
    pub backend_failed: bool,
    /// The fence is proven: stamp it (and who confirmed a manual one).
    pub fenced: bool,
    /// Add the out-of-service taint, recording the volumes the kubelet reports now.
    pub taint: bool,
    /// Storage the fence does not cover (`Some(empty)`: clear it).
    pub uncovered: Option<Vec<String>>,
    /// The node is back: unfencing asked from now.
    pub unfence_requested: bool,
    /// Remove the out-of-service taint (the fence was undone).
    pub untaint: bool,
    /// Tell each released pod and claim.
    pub announce_affected: bool,
}

/// One transition of the incident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub phase: Phase,
    pub step: &'static str,
    pub message: String,
    pub announce: Option<Announce>,
    pub effects: Effects,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Do {
    Nothing,
    Write(Transition),
    /// Ask the current backend to fence, then `after_fence`.
    AskFence,
    /// The reboot proof holds: ask the backend to unfence, then `after_unfence`.
    AskUnfence,
}

fn go(phase: Phase, step: &'static str, message: String) -> Transition {
    Transition {
        phase,
        step,
        message,
        announce: None,
        effects: Effects::default(),
    }
}

impl Transition {
    fn announced(mut self, reason: &'static str, warning: bool) -> Self {
        self.announce = Some(Announce {
            reason,
            warning,
            note: self.message.clone(),
        });
        self
    }
}

/// A progress note: written only when the message changed.
fn note(r: &Record<'_>, message: String, event: Option<&'static str>) -> Do {
    if r.message == Some(message.as_str()) {
        return Do::Nothing;
    }
    let t = go(r.phase, "progress", message);
    Do::Write(match event {
        Some(reason) => t.announced(reason, true),
        None => t,
    })
}

/// Record "fence requested from backend `index`" before anything is asked of it; no backend
/// left fails the incident (nothing was released).
pub fn request(r: &Record<'_>, index: usize, why: Option<String>) -> Transition {
    let Some((kind, timeout)) = r.backends.get(index) else {
        let msg = format!(
            "no fence backend left{}",
            why.map(|w| format!(": {w}")).unwrap_or_default()
        );
        let mut t = go(Phase::Failed, "failed", msg.clone());
        t.announce = Some(Announce {
            reason: "FenceFailed",
            warning: true,
            note: format!("{msg}; nothing was released"),
        });
        return t;
    };
    let msg = format!(
        "fence requested from backend {} (timeout {timeout}s){}",
        kind.as_str(),
        why.map(|w| format!(" after: {w}")).unwrap_or_default()
    );
    let mut t = go(Phase::Fencing, "fence-requested", msg).announced("FenceRequested", true);
    t.effects.request = Some(index);
    t
}

/// The incident's next move from what was just read.
pub fn step(r: &Record<'_>, now: &Now<'_>) -> Do {
    let healed = healed(now.lease, r.lease_at_detection, now.ready);
    match r.phase {
        Phase::Detected | Phase::Fencing if healed => {
            let msg = format!(
                "node {} renewed its Lease and is Ready again before any release",
                r.node
            );
            let mut t = go(Phase::Aborted, "aborted", msg).announced("FenceAborted", false);
            t.effects.unfence_best_effort = r.phase == Phase::Fencing;
            Do::Write(t)
        }
        Phase::Detected | Phase::Fencing if !now.node => Do::Write(go(
            Phase::Done,
            "node-deleted",
            "the Node was deleted: PodGC releases its pods (rules.md §2d row 4)".into(),
        )),
        Phase::Detected => Do::Write(request(r, 0, None)),
        Phase::Fencing => Do::AskFence,
        Phase::Fenced => release(r, now),
        Phase::Released if !now.node => Do::Write(go(
            Phase::Done,
            "node-deleted",
            "the Node was deleted".into(),
        )),
        Phase::Released if healed => {
            let msg = format!(
                "node {} is back (Lease renewed, Ready): the taint stays until its fence is undone",
                r.node
            );
            let mut t = go(Phase::Recovering, "recovering", msg).announced("NodeReturned", true);
            t.effects.unfence_requested = true;
            Do::Write(t)
        }
        Phase::Released => Do::Nothing,
        // The released pods' processes may still run, or flush buffered writes, when storage
        // returns: unfence only after a reboot or once the kubelet reports none of the released
        // volumes (rules.md §7 "Recover", rook#17790).
        Phase::Recovering => match rebooted_or_released(
            now.boot_id,
            r.boot_id_at_detection,
            now.volumes,
            r.released_volumes,
        ) {
            Err(why) => note(r, why, Some("RecoveryHeld")),
            Ok(()) => Do::AskUnfence,
        },
        Phase::Done | Phase::Failed | Phase::Aborted => Do::Nothing,
    }
}

/// A fenced incident: the taint, once the proof still holds and the fence covers every volume.
fn release(r: &Record<'_>, now: &Now<'_>) -> Do {
    // Re-checked right before the taint (rules.md §7), also for an incident found `Fenced` after
    // a restart: the Lease still silent since detection, not Ready.
    if let Err(reason) = proof(now.lease, r.lease_at_detection, now.ready) {
        let msg = format!("{reason} (re-checked before the taint); nothing was released");
        let mut t = go(Phase::Failed, "proof-failed", msg).announced("FenceFailed", true);
        t.effects.backend_failed = true;
        return Do::Write(t);
    }
    // The taint releases every volume on the node: only when the fence covers them all (rules.md
    // §7 "A fence has a scope"); otherwise the incident holds, saying why. Not read (`None`):
    // unknown, so it holds too.
    let Some((scope, missing)) = now.scope else {
        return Do::Nothing;
    };
    if !missing.is_empty() {
        let why = super::fencing::scope_message(r.node, scope, missing);
        return match note(r, why, Some("FenceScopeIncomplete")) {
            Do::Write(mut t) => {
                t.effects.uncovered = Some(missing.iter().map(ToString::to_string).collect());
                Do::Write(t)
            }
            other => other,
        };
    }
    let msg = format!(
        "{OUT_OF_SERVICE_TAINT} added to node {}: PodGC removes its pods and their volumes are detached",
        r.node
    );
    let mut t = go(Phase::Released, "released", msg).announced("NodeReleased", true);
    t.effects.taint = true;
    t.effects.uncovered = Some(Vec::new());
    t.effects.announce_affected = true;
    Do::Write(t)
}

/// After the current backend answered a fence request; `now` is read after the answer (a fence
/// that did not hold shows there).
pub fn after_fence(r: &Record<'_>, now: &Now<'_>, answer: Answer) -> Do {
    let kind = r
        .backends
        .get(r.backend_index)
        .map(|(k, _)| k.as_str())
        .unwrap_or("manual");
    match answer {
        Answer::Done(ev) => match proof(now.lease, r.lease_at_detection, now.ready) {
            Ok(()) => {
                let msg = format!(
                    "{ev}; proof: the Lease is still at renewTime {} and the node is not Ready",
                    r.lease_at_detection.unwrap_or("never")
                );
                let mut t = go(Phase::Fenced, "fenced", msg).announced("NodeFenced", false);
                t.effects.fenced = true;
                Do::Write(t)
            }
            Err(reason) => {
                let mut t = go(Phase::Failed, "proof-failed", reason.clone());
                t.announce = Some(Announce {
                    reason: "FenceFailed",
                    warning: true,
                    note: format!("{reason}; nothing was released"),
                });
                t.effects.backend_failed = true;
                Do::Write(t)
            }
        },
        Answer::Pending(msg) => note(r, msg, None),
        Answer::Failed(msg) => {
            let why = format!("backend {kind} failed: {msg}");
            let next = next_backend(r.backend_index, r.backends.len()).unwrap_or(r.backends.len());
            let mut t = request(r, next, Some(why));
            t.effects.backend_failed = true;
            Do::Write(t)
        }
    }
}

/// After the backend answered an unfence request.
pub fn after_unfence(r: &Record<'_>, answer: Answer) -> Do {
    match answer {
        Answer::Done(ev) => {
            let msg = format!("{ev}; {OUT_OF_SERVICE_TAINT} removed from node {}", r.node);
            let mut t = go(Phase::Done, "recovered", msg).announced("NodeRecovered", false);
            t.effects.untaint = true;
            Do::Write(t)
        }
        Answer::Pending(msg) => note(r, msg, None),
        // The taint stays: a node whose fence cannot be undone does not take pods (the driver
        // counts the failure whether or not the note changed).
        Answer::Failed(msg) => note(r, format!("unfence failed, will retry: {msg}"), None),
    }
}

#[cfg(test)]
#[path = "fencing_step_tests.rs"]
mod tests;
