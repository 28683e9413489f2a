//! `volguard controller`'s flags (each with an environment twin).

use crate::fencing::args::FencingArgs;
use crate::runtime::flags::{duration, either};
use crate::runtime::identity::process_identity;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Kubeconfig file (default: $KUBECONFIG, which may list several files as kubectl reads it,
    /// then ~/.kube/config, then the in-cluster config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Plain-HTTP listener for /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080", env = "VOLGUARD_PROBE_LISTEN")]
    pub probe_listen: String,
    /// Run only while holding the Lease (several replicas, one active).
    #[arg(long, env = "VOLGUARD_LEADER_ELECT")]
    pub leader_elect: bool,
    #[arg(
        long,
        default_value = "volguard-controller",
        env = "VOLGUARD_LEASE_NAME"
    )]
    pub lease_name: String,
    /// Namespace of the Lease (default: the namespace volguard runs in).
    #[arg(long, env = "VOLGUARD_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Lease duration: a follower takes over at most this long after the leader stops renewing.
    #[arg(long, default_value = "15s", value_parser = duration, env = "VOLGUARD_LEASE_DURATION")]
    pub lease_duration: std::time::Duration,
    /// The former --lease-duration, in seconds (kept as an alias).
    #[arg(long, hide = true, env = "VOLGUARD_LEASE_DURATION_SECONDS")]
    pub lease_duration_seconds: Option<u64>,
    /// How often the leader renews (and followers retry).
    #[arg(long, default_value = "2s", value_parser = duration, env = "VOLGUARD_LEASE_RENEW")]
    pub lease_renew: std::time::Duration,
    /// The former --lease-renew, in seconds (kept as an alias).
    #[arg(long, hide = true, env = "VOLGUARD_LEASE_RENEW_SECONDS")]
    pub lease_renew_seconds: Option<u64>,
    /// The leader gives up (and stops its workers) when no renewal succeeded for this long; each
    /// renewal is cut off at it. Shorter than the lease duration, as client-go's RenewDeadline:
    /// the workers are stopped before any follower may take over.
    #[arg(long, default_value = "10s", value_parser = duration, env = "VOLGUARD_LEASE_RENEW_DEADLINE")]
    pub lease_renew_deadline: std::time::Duration,
    /// The former --lease-renew-deadline, in seconds (kept as an alias).
    #[arg(long, hide = true, env = "VOLGUARD_LEASE_RENEW_DEADLINE_SECONDS")]
    pub lease_renew_deadline_seconds: Option<u64>,
    /// Holder identity (default: $POD_NAME or hostname, plus the process id).
    #[arg(long, env = "VOLGUARD_IDENTITY")]
    pub identity: Option<String>,
    /// Reconcile workers.
    #[arg(long, default_value_t = 4, env = "VOLGUARD_WORKERS")]
    pub workers: usize,
    /// Client-side rate limit for writes and consistent LISTs (requests per second).
    #[arg(long, default_value_t = 50.0, env = "VOLGUARD_QPS")]
    pub qps: f64,
    #[arg(long, default_value_t = 100, env = "VOLGUARD_BURST")]
    pub burst: u32,
    /// Read a ReadWriteOnce lock's users by consistent LISTs only. By default a take-over lists
    /// them "not older than" the claim's resourceVersion (the apiserver's watch cache), which
    /// needs one etcd revision to number pods and claims alike: set this on a cluster that keeps
    /// pods or PersistentVolumeClaims in an etcd of their own (`--etcd-servers-overrides`).
    #[arg(long, env = "VOLGUARD_CONSISTENT_LISTS")]
    pub consistent_lists: bool,
    /// Most terminating PVCs of one namespace released on one consistent pod LIST.
    #[arg(long, default_value_t = 100, env = "VOLGUARD_LIST_BATCH")]
    pub list_batch: usize,
    /// Per-key retry backoff: the first delay.
    #[arg(long, default_value = "200ms", value_parser = duration, env = "VOLGUARD_BACKOFF_BASE")]
    pub backoff_base: std::time::Duration,
    /// The former --backoff-base, in milliseconds (kept as an alias).
    #[arg(long, hide = true, env = "VOLGUARD_BACKOFF_BASE_MS")]
    pub backoff_base_ms: Option<u64>,
    /// Per-key retry backoff: the longest delay.
    #[arg(long, default_value = "2m", value_parser = duration, env = "VOLGUARD_BACKOFF_MAX")]
    pub backoff_max: std::time::Duration,
    /// The former --backoff-max, in seconds (kept as an alias).
    #[arg(long, hide = true, env = "VOLGUARD_BACKOFF_MAX_SECONDS")]
    pub backoff_max_seconds: Option<u64>,
    /// How long a Bound claim is seen unused before it is first marked `volguard.io/unused-since`
    /// (with the time it was first seen so: the grace delays the write, not the time written). A
    /// claim bound just before its pod, between a StatefulSet's pod and its replacement, or across
    /// a churn, is then not written twice (marked, unmarked) for a moment of disuse.
    #[arg(long, default_value = "10m", value_parser = duration, env = "VOLGUARD_UNUSED_GRACE")]
    pub unused_grace: std::time::Duration,
    /// The webhook's --apiserver-request-timeout (keep them equal; the chart does): kube-apiserver's
    /// `--request-timeout`, the grace a ReadWriteOnce lock nobody uses is kept before it is
    /// cleared (never under the default minute).
    #[arg(long, default_value = "60s", value_parser = duration, env = "VOLGUARD_APISERVER_REQUEST_TIMEOUT")]
    pub apiserver_request_timeout: std::time::Duration,
    /// The webhook's --break-glass: with `off` no override counts, and none is lifted.
    #[arg(long, value_parser = crate::runtime::flags::choice::<crate::rules::proof::BreakGlass>(), default_value = "rbac", env = "VOLGUARD_BREAK_GLASS")]
    pub break_glass: crate::rules::proof::BreakGlass,
    /// The webhook's --break-glass-expiry (keep them equal; the chart does): a person's override
    /// on a claim or volume stamped longer ago than this (plus 30 s for the two clocks) is lifted,
    /// so that setting it again (`kubectl annotate --overwrite` included) stamps and judges it
    /// anew. `0s`: overrides do not expire.
    #[arg(long, default_value = "1h", value_parser = duration, env = "VOLGUARD_BREAK_GLASS_EXPIRY")]
    pub break_glass_expiry: std::time::Duration,
    /// Lift expired overrides (`false`: leave them, a person removes one before setting it again).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "VOLGUARD_LIFT_EXPIRED_OVERRIDES")]
    pub lift_expired_overrides: bool,
    /// Export `volguard_pvc_unused_seconds` with one series per unused PVC (cardinality grows
    /// with the number of unused claims; off by default).
    #[arg(long, env = "VOLGUARD_PER_PVC_UNUSED_METRICS")]
    pub per_pvc_unused_metrics: bool,
    #[command(flatten)]
    pub registration: RegistrationArgs,
    #[command(flatten)]
    pub fencing: FencingArgs,
}

/// The webhook registration, watched by the leader (docs/rules.md §9 "The registration, watched").
#[derive(Debug, Args)]
pub struct RegistrationArgs {
    /// How often the live webhook configurations are compared with volguard's (0s: never).
    #[arg(long, default_value = "10s", value_parser = duration, env = "VOLGUARD_REGISTRATION_CHECK_INTERVAL")]
    pub registration_check_interval: std::time::Duration,
    /// Put back what drifted (matchConditions, failure policy, rules) as well as report it.
    /// Without it drift is reported only (metric, Event, /readyz detail).
    #[arg(long, env = "VOLGUARD_REPAIR_REGISTRATION")]
    pub repair_registration: bool,
    /// The CEL policies are installed (the chart's `policies.enabled`): the force-delete entry is
    /// then registered `Ignore`, not `Fail`.
    #[arg(long, env = "VOLGUARD_POLICIES_INSTALLED")]
    pub policies_installed: bool,
    /// The webhook's `--enforcement`: the entries of a rule in warn are registered `Ignore` (a
    /// warned rule never blocks, not even while volguard is down), and drift repair keeps them so.
    #[arg(long, default_value = "deny", env = "VOLGUARD_ENFORCEMENT")]
    pub enforcement: crate::rules::enforcement::Enforcement,
    /// The Secret, in volguard's namespace, whose `ca.crt` is the CA of the webhook's serving
    /// certificate (cert-manager's `volguard-webhook-tls`). Every check then keeps each entry's
    /// `caBundle` equal to it, with or without --repair-registration: volguard's configurations
    /// carry no cainjector annotation (cainjector before cert-manager 1.12 erased their
    /// matchConditions at each injection). Unset: the caBundle is the chart's (`tls.caBundle`),
    /// only reported when empty.
    #[arg(long, env = "VOLGUARD_CA_SECRET")]
    pub ca_secret: Option<String>,
    /// Every entry registered `Ignore` (the chart's `forceFailurePolicyIgnore`): nothing waits on
    /// volguard, and nothing is refused while it is down.
    #[arg(long, env = "VOLGUARD_FORCE_FAILURE_POLICY_IGNORE")]
    pub force_failure_policy_ignore: bool,
    /// The webhook's allow-list: the force-delete entries carry a condition that answers these
    /// identities in the apiserver (rules.md §2d row 7), checked like any other.
    #[command(flatten)]
    pub force_delete_allow: crate::registration::allow_list::AllowListArgs,
}

impl ControllerArgs {
    pub fn lease_duration(&self) -> std::time::Duration {
        either(
            self.lease_duration,
            self.lease_duration_seconds,
            std::time::Duration::from_secs,
        )
    }
    pub fn lease_renew(&self) -> std::time::Duration {
        either(
            self.lease_renew,
            self.lease_renew_seconds,
            std::time::Duration::from_secs,
        )
    }
    pub fn lease_renew_deadline(&self) -> std::time::Duration {
        either(
            self.lease_renew_deadline,
            self.lease_renew_deadline_seconds,
            std::time::Duration::from_secs,
        )
    }
    pub fn backoff_base(&self) -> std::time::Duration {
        either(
            self.backoff_base,
            self.backoff_base_ms,
            std::time::Duration::from_millis,
        )
    }
    pub fn backoff_max(&self) -> std::time::Duration {
        either(
            self.backoff_max,
            self.backoff_max_seconds,
            std::time::Duration::from_secs,
        )
    }

    pub fn identity(&self) -> String {
        self.identity.clone().unwrap_or_else(process_identity)
    }
}
