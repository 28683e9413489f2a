//! The pure rules of docs/rules.md: every admission decision and every "is this volume in use" answer.
//!
//! Nothing here does I/O, reads a clock or logs. Callers (the admission dispatcher, the
//! controller) gather the facts a rule needs and pass them in as plain data, so "why was this
//! denied" is answered by reading the one file of that rule:
//!
//! | rules.md | file |
//! |---|---|
//! | words: claims of a pod | `claims.rs` |
//! | 1 finalizers on create | `protect.rs` |
//! | 2a pod on terminating claim | `pod_create.rs` |
//! | 2b binding to terminating PV | `binding.rs` |
//! | 2c finalizer stripping | `finalizer_guard.rs` |
//! | 2f the lock and 3 the ephemeral owner: who may change them | `claim_metadata.rs` |
//! | 2d force delete | `force_delete.rs` |
//! | 2f RWO claims on one node | `rwo.rs`, the lock: `rwo_lock.rs`, the placement hint: `placement.rs` |
//! | 2g enforcement modes | `enforcement.rs` |
//! | 2h pod status: only the kubelet ends a running pod | `pod_status.rs` |
//! | 7 the out-of-service taint needs proof | `node_taint.rs` |
//! | 8 a proof is judged when written: who may set a confirmation | `proof.rs` |
//! | 8 who confirmed: the apiserver's word, stamped | `stamp.rs` |
//! | 7 partition healing: detect, decide, each incident's next step | `fencing.rs` |
//! | the rule table: names (and so paths), failure policies, requests judged and by which method | `rule.rs` |
//! | 3 in use | `in_use.rs` |
//! | 4 controller decisions | `release.rs` |
//! | 4-5 unused claims, since when (report, gauges, explain) | `unused.rs` |
//! | upstream's own decisions that destroy data or free a volume, ported (Kubernetes v1.37.2) | `upstream/` |

pub mod binding;
pub mod claim_metadata;
pub mod claims;
pub mod decision;
pub mod delete_protection;
pub mod enforcement;
pub mod exemptions;
pub mod fencing;
pub mod fencing_step;
pub mod finalizer_guard;
pub mod force_delete;
pub mod in_use;
pub mod node_delete;
pub mod node_taint;
pub mod placement;
pub mod pod_create;
pub mod pod_status;
pub mod proof;
pub mod protect;
pub mod release;
pub mod remediators;
pub mod rule;
pub mod rwo;
pub mod rwo_lock;
pub mod stamp;
pub mod unused;
pub mod upstream;

pub use decision::{Decision, Effect, Fact};

/// A setting named by one word on the command line: every value with its word and what it means.
/// The command line lists them in `--help` and parses the word back (the core knows no parser).
pub trait Choices: Sized + Copy + Send + Sync + 'static {
    const CHOICES: &'static [(Self, &'static str, &'static str)];

    /// The word for this value.
    fn word(self) -> &'static str
    where
        Self: PartialEq,
    {
        Self::CHOICES
            .iter()
            .find(|(v, _, _)| *v == self)
            .map_or("", |(_, w, _)| w)
    }
}

/// Why an allowed request leaves a record all the same (the audit trail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// A person's override decided (rules.md §8 break glass): a Warning Event, a warn-level log
    /// line and `volguard_break_glass_total`.
    BreakGlass,
    /// A person lifted a deletion protection (rules.md §2i).
    DeleteProtectionLifted,
    /// A person set a confirmation or override (rules.md §8): who, and when.
    ConfirmationSet,
}

impl Recorded {
    /// The Event's reason.
    pub fn reason(self) -> &'static str {
        match self {
            Recorded::BreakGlass => "BreakGlass",
            Recorded::DeleteProtectionLifted => "DeleteProtectionLifted",
            Recorded::ConfirmationSet => "ConfirmationSet",
        }
    }

    /// What the Event says volguard did.
    pub fn verb(self) -> &'static str {
        match self {
            Recorded::BreakGlass => "allowed on a person's override",
            Recorded::DeleteProtectionLifted | Recorded::ConfirmationSet => "allowed and recorded",
        }
    }
}

#[cfg(test)]
mod tests;
