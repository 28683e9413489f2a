//! The one place a proof's annotation keys are spelled (rules.md §8). Guards never read these
//! annotations: they take a [`super::Proof`] that [`super::Reader::read`] built, which has checked
//! the stamp, its time and the break-glass mode. Messages, the CEL policies and the
//! registration's matchConditions name the keys through [`Key`] (a test fails when a key's text
//! appears anywhere else in `src/`).

use std::fmt;

/// Each key as a literal, for `concat!` in the generated CEL (registration's matchConditions and
/// policies): the text exists here once.
#[macro_export]
macro_rules! proof_key {
    (allow_finalizer_removal) => {
        "volguard.io/allow-finalizer-removal"
    };
    (confirm_force_delete) => {
        "volguard.io/confirm-force-delete"
    };
    (allow_lock_removal) => {
        "volguard.io/allow-lock-removal"
    };
    (confirm_node_down) => {
        "volguard.io/confirm-node-down"
    };
    (confirmed_by) => {
        "volguard.io/confirmed-by"
    };
    (confirmed_at) => {
        "volguard.io/confirmed-at"
    };
}
pub use crate::proof_key;

/// Who set the confirmations beside it: the apiserver's username, written by volguard's
/// mutating stamp in the same request (never by hand).
pub const CONFIRMED_BY: &str = proof_key!(confirmed_by);
/// When (RFC 3339, volguard's clock): with `--break-glass-expiry` a proof counts for that long.
pub const CONFIRMED_AT: &str = proof_key!(confirmed_at);

/// A person's override or confirmation, each the break glass of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    /// rules.md §2c: strip a protection finalizer from a volume in use.
    AllowFinalizerRemoval,
    /// rules.md §2d row 8 and §2h: force-delete (or end) a pod that may still run.
    ConfirmForceDelete,
    /// rules.md §2f: remove a claim's ReadWriteOnce lock.
    AllowLockRemoval,
    /// rules.md §7: the machine is down (the out-of-service taint, a Node's deletion).
    ConfirmNodeDown,
}

impl Key {
    pub const ALL: [Key; 4] = [
        Key::AllowFinalizerRemoval,
        Key::ConfirmForceDelete,
        Key::AllowLockRemoval,
        Key::ConfirmNodeDown,
    ];

    /// The annotation's key. For messages, policies and registration only: a guard that reads
    /// it from an object bypasses the stamp and expiry checks of [`super::Reader::read`].
    pub const fn annotation(self) -> &'static str {
        match self {
            Key::AllowFinalizerRemoval => proof_key!(allow_finalizer_removal),
            Key::ConfirmForceDelete => proof_key!(confirm_force_delete),
            Key::AllowLockRemoval => proof_key!(allow_lock_removal),
            Key::ConfirmNodeDown => proof_key!(confirm_node_down),
        }
    }

    /// The rule whose break glass it is: the SubjectAccessReview's `name` and the `rule` label
    /// of `volguard_break_glass_total`.
    pub const fn rule(self) -> &'static str {
        match self {
            Key::AllowFinalizerRemoval => "finalizer-removal",
            Key::ConfirmForceDelete => "force-delete",
            Key::AllowLockRemoval => "claim-metadata",
            Key::ConfirmNodeDown => "out-of-service-taint",
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.annotation())
    }
}
