//! What every rule's facts are gathered with: the view of the cluster, the flags that shape the
//! rules (force-delete policy, enforcement, RWO guard, break glass), the lock's metrics and clock.
//! Routing (`dispatch`) and gathering (`facts`, `placement`) both work on it; neither owns it.

use crate::rules::enforcement::Enforcement;
use crate::rules::force_delete::ForceDeletePolicy;
use crate::state::{View, Writer};
use std::collections::HashSet;
use std::sync::Mutex;

pub struct Admission {
    pub cluster: View,
    /// The lock's compare-and-swap and release records (in memory for a `--state` file).
    pub writer: Writer,
    pub policy: ForceDeletePolicy,
    /// Usernames of volguard's own controller (exempt from the finalizer guard).
    pub own_controllers: Vec<String>,
    /// Every identity of volguard's (its controller's and its webhook's): the writers of the
    /// RWO lock annotation.
    pub own_identities: Vec<String>,
    pub enforcement: Enforcement,
    /// Who is exempted from which rule (`--exempt`).
    pub exemptions: crate::rules::exemptions::Exemptions,
    /// `--rwo-guard=off` turns rules.md §2f off.
    pub rwo_guard: bool,
    /// Who may use a `volguard.io/*` override (rules.md §8).
    pub break_glass: crate::rules::proof::BreakGlass,
    /// How long an override counts after it was set (`None`: until removed).
    pub break_glass_expiry: Option<jiff::SignedDuration>,
    /// The RWO lock's outcomes (`volguard_rwo_locks_total`), registered by whoever serves.
    pub locks: prometheus_client::metrics::family::Family<
        LockLabels,
        prometheus_client::metrics::counter::Counter,
    >,
    /// How long each RWO lock's compare-and-swap took (`volguard_rwo_lock_write_duration_seconds`):
    /// the one etcd write a bind waits for, apart from the decision around it.
    pub lock_writes: prometheus_client::metrics::histogram::Histogram,
    /// How long each RWO lock has been seen, on this process's own clock (rules.md §2f).
    pub lock_clock: crate::state::lock_clock::LockClock,
    /// A node whose Lease was renewed within this is alive, whoever confirms it down (rules.md §7).
    pub partition_after: jiff::SignedDuration,
    pub(super) unknown_kinds: Mutex<HashSet<String>>,
}

impl Admission {
    pub fn new(cluster: View, policy: ForceDeletePolicy, own_controllers: Vec<String>) -> Self {
        let lock_clock = match cluster.is_file() {
            true => {
                let pvcs = cluster.store().pvcs.all();
                crate::state::lock_clock::LockClock::offline(pvcs.iter().filter_map(|p| {
                    let raw = p.metadata.annotation(crate::rules::rwo_lock::RWO_LOCK)?;
                    Some((p.metadata.namespace.as_str(), p.metadata.name.as_str(), raw))
                }))
            }
            false => crate::state::lock_clock::LockClock::live(),
        };
        let mut own_identities = own_controllers.clone();
        own_identities.push(crate::runtime::identity::webhook_user());
        // The swap and the release record are written with no field manager, as ever. No
        // identity: the webhook's writer publishes no Event (the audit trail has its own).
        let writer = cluster.writer("volguard-webhook", String::new());
        Admission {
            lock_clock,
            writer,
            cluster,
            policy,
            own_identities,
            own_controllers,
            enforcement: Enforcement::default(),
            exemptions: Default::default(),
            rwo_guard: true,
            break_glass: Default::default(),
            break_glass_expiry: None,
            locks: Default::default(),
            lock_writes: lock_write_histogram(),
            partition_after: jiff::SignedDuration::from_secs(40),
            unknown_kinds: Mutex::new(HashSet::new()),
        }
    }

    pub fn with_enforcement(mut self, enforcement: Enforcement) -> Self {
        self.enforcement = enforcement;
        self
    }

    pub fn with_exemptions(mut self, exemptions: crate::rules::exemptions::Exemptions) -> Self {
        self.exemptions = exemptions;
        self
    }

    pub fn with_partition_after(mut self, d: jiff::SignedDuration) -> Self {
        self.partition_after = d;
        self
    }

    pub fn with_break_glass(mut self, mode: crate::rules::proof::BreakGlass) -> Self {
        self.break_glass = mode;
        self
    }

    /// `0s`: overrides do not expire.
    pub fn with_break_glass_expiry(mut self, d: std::time::Duration) -> Self {
        self.break_glass_expiry = jiff::SignedDuration::try_from(d)
            .ok()
            .filter(|d| !d.is_zero());
        self
    }

    pub fn with_rwo_guard(mut self, on: bool) -> Self {
        self.rwo_guard = on;
        self
    }
}

/// `volguard_rwo_lock_write_duration_seconds`: an etcd write through the apiserver, with the
/// admission calls of that write (0.5 ms .. the swap's 1.5 s timeout).
pub fn lock_write_histogram() -> prometheus_client::metrics::histogram::Histogram {
    prometheus_client::metrics::histogram::Histogram::new([
        0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5,
    ])
}

/// `volguard_rwo_locks_total{result}`: taken, taken_over, conflict_retried, waited, refused,
/// unconfirmed, write_failed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct LockLabels {
    pub result: &'static str,
}
