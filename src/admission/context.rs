//! What every rule's facts are gathered with: the view of the cluster, the flags that shape the
//! rules (force-delete policy, enforcement, RWO guard, break glass), the RWO lock's protocol; and
//! all that can be asked of it, here in one place (built, configured, asked to decide). Routing
//! (`dispatch`) and gathering (`facts`, `nodes`, `proofs`, `break_glass`) are functions over it.

use crate::rules::enforcement::Enforcement;
use crate::rules::force_delete::ForceDeletePolicy;
use crate::state::{View, Writer};
use std::collections::HashSet;
use std::sync::Mutex;

pub struct Admission {
    pub cluster: View,
    /// Release records of a Node DELETE or a taint on a remediator's word (in memory for a
    /// `--state` file).
    pub writer: Writer,
    /// The RWO lock's protocol: its reads, its swap, its clock and its metrics (rules.md §2f).
    pub locks: super::rwo_lock::RwoLocks,
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
    /// A node whose Lease was renewed within this is alive, whoever confirms it down (rules.md §7).
    pub partition_after: jiff::SignedDuration,
    pub(super) unknown_kinds: Mutex<HashSet<String>>,
}

impl Admission {
    pub fn new(cluster: View, policy: ForceDeletePolicy, own_controllers: Vec<String>) -> Self {
        let mut own_identities = own_controllers.clone();
        own_identities.push(crate::runtime::identity::webhook_user());
        // The swap and the release record are written with no field manager, as ever. No
        // identity: the webhook's writer publishes no Event (the audit trail has its own).
        let writer = cluster.writer("volguard-webhook", String::new());
        let locks = super::rwo_lock::RwoLocks::new(
            cluster.clone(),
            writer.clone(),
            crate::rules::rwo_lock::DEFAULT_GRACE,
        );
        Admission {
            locks,
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
            partition_after: jiff::SignedDuration::from_secs(40),
            unknown_kinds: Mutex::new(HashSet::new()),
        }
    }

    /// Decide a request within `budget`: every rule of `endpoint` that judges it, in table
    /// order (`dispatch`).
    pub async fn decide(
        &self,
        endpoint: super::Endpoint,
        req: &super::Request<'_>,
        budget: std::time::Duration,
    ) -> super::dispatch::Verdict {
        super::dispatch::decide(self, endpoint, req, budget).await
    }

    /// The answer when the whole decision ran out of time (the server's backstop).
    pub fn late_verdict(
        &self,
        endpoint: super::Endpoint,
        req: &super::Request<'_>,
        budget: std::time::Duration,
    ) -> super::dispatch::Verdict {
        super::dispatch::late_verdict(self, endpoint, req, budget)
    }

    /// The metric label for a kind no rule judges (bounded: `dispatch::MAX_UNKNOWN_KINDS`).
    pub fn unknown_kind_label(&self, req: &super::Request<'_>) -> String {
        super::dispatch::unknown_kind_label(self, req)
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

    /// kube-apiserver's `--request-timeout`: the RWO lock's grace (`rwo_lock::LockAge`), made
    /// before any request is decided (the lock clock starts anew).
    pub fn with_apiserver_request_timeout(mut self, t: std::time::Duration) -> Self {
        self.locks.set_request_timeout(t);
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
