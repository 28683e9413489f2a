//! `volguard serve`'s flags (each with an environment twin).

use crate::rules::force_delete::{ForceDeletePolicy, HumanForceDelete};
use crate::runtime::flags::{duration, either};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// HTTPS admission listener.
    #[arg(long, default_value = "0.0.0.0:8443", env = "VOLGUARD_LISTEN")]
    pub listen: String,
    /// Plain-HTTP listener for /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080", env = "VOLGUARD_PROBE_LISTEN")]
    pub probe_listen: String,
    /// PEM certificate chain (leaf first).
    #[arg(long, env = "VOLGUARD_TLS_CERT")]
    pub tls_cert: PathBuf,
    /// PEM private key.
    #[arg(long, env = "VOLGUARD_TLS_KEY")]
    pub tls_key: PathBuf,
    /// How often the certificate files are re-read.
    #[arg(long, default_value = "2s", value_parser = duration, env = "VOLGUARD_TLS_RELOAD_INTERVAL")]
    pub tls_reload_interval: std::time::Duration,
    /// The former --tls-reload-interval, in milliseconds (kept as an alias).
    #[arg(long, hide = true, env = "VOLGUARD_TLS_RELOAD_INTERVAL_MS")]
    pub tls_reload_interval_ms: Option<u64>,
    /// Serve from a state file (Kubernetes List or multi-document YAML) instead of a cluster.
    #[arg(long, env = "VOLGUARD_STATE")]
    pub state: Option<PathBuf>,
    /// Kubeconfig file (default: $KUBECONFIG, which may list several files as kubectl reads it,
    /// then ~/.kube/config, then the in-cluster config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub force_delete: ForceDeleteArgs,
    /// Usernames of volguard's controller: exempt from the finalizer-stripping guard, and the
    /// only callers whose out-of-service taint a `Fenced` incident proves (rules.md §7).
    /// Default: the `volguard-controller` ServiceAccount of the namespace volguard runs in.
    #[arg(
        long = "controller-user",
        value_delimiter = ',',
        env = "VOLGUARD_CONTROLLER_USERS"
    )]
    pub controller_users: Vec<String>,
    /// Who may use a volguard.io/* override (allow-finalizer-removal, confirm-force-delete,
    /// allow-lock-removal, confirm-node-down): `rbac` (whom RBAC allows `use` on
    /// breakglass.volguard.io: the ClusterRole volguard-break-glass), `anyone`, or `off`.
    #[arg(long, value_parser = crate::runtime::flags::choice::<crate::admission::break_glass::BreakGlass>(), default_value = "rbac", env = "VOLGUARD_BREAK_GLASS")]
    pub break_glass: crate::admission::break_glass::BreakGlass,
    /// How long an AuditReport line (a refusal, warning, exemption or break glass, kept per
    /// namespace after its Event expires) is kept after it last happened.
    #[arg(long, default_value = "720h", value_parser = duration, env = "VOLGUARD_AUDIT_RETENTION")]
    pub audit_retention: std::time::Duration,
    /// Lines one namespace's AuditReport keeps (the newest); 0: no AuditReports, Events only.
    #[arg(long, default_value_t = 100, env = "VOLGUARD_AUDIT_REPORT_ENTRIES")]
    pub audit_report_entries: usize,
    /// How long an override counts after a person set it (`1h`, `30m`; `0s`: until it is
    /// removed). volguard stamps the time in volguard.io/confirmed-at; Events expire with the
    /// apiserver's --event-ttl, overrides must too.
    #[arg(long, default_value = "1h", value_parser = duration, env = "VOLGUARD_BREAK_GLASS_EXPIRY")]
    pub break_glass_expiry: std::time::Duration,
    /// A node whose Lease was renewed within this (or that reports Ready) is alive: its
    /// confirmation, out-of-service taint and deletion are refused whoever asks (rules.md §7).
    /// Keep it equal to the controller's --partition-after.
    #[arg(long, default_value = "40s", env = "VOLGUARD_PARTITION_AFTER")]
    pub partition_after: jiff::SignedDuration,
    /// kube-apiserver's `--request-timeout` (default 1m): no placement admitted before a
    /// ReadWriteOnce lock was written can land later than this, so a lock nobody uses holds that
    /// long (its grace; never under the default minute). Keep it equal to the controller's and
    /// to the apiserver's own (rules.md §2f).
    #[arg(long, default_value = "60s", value_parser = duration, env = "VOLGUARD_APISERVER_REQUEST_TIMEOUT")]
    pub apiserver_request_timeout: std::time::Duration,
    /// Admission requests decided at once; more wait.
    #[arg(long, default_value_t = 512, env = "VOLGUARD_MAX_CONCURRENT_REQUESTS")]
    pub max_concurrent_requests: usize,
    /// Bound on a TLS handshake, on reading request headers and on reading a request body
    /// (slow clients, slowloris).
    #[arg(long, default_value = "10s", value_parser = duration, env = "VOLGUARD_READ_TIMEOUT")]
    pub read_timeout: std::time::Duration,
    /// The former --read-timeout, in milliseconds (kept as an alias).
    #[arg(long, hide = true, env = "VOLGUARD_READ_TIMEOUT_MS")]
    pub read_timeout_ms: Option<u64>,
    /// Open HTTPS connections; more are closed at accept.
    #[arg(long, default_value_t = 1024, env = "VOLGUARD_MAX_CONNECTIONS")]
    pub max_connections: usize,
    /// Open HTTPS connections from one peer address; more are closed at accept (one client must
    /// not take every slot).
    #[arg(long, default_value_t = 128, env = "VOLGUARD_MAX_CONNECTIONS_PER_PEER")]
    pub max_connections_per_peer: usize,
    /// A connection with no request in flight for this long is closed (h2: GOAWAY). A
    /// connection's first request must come within --read-timeout.
    #[arg(long, default_value = "120s", value_parser = duration, env = "VOLGUARD_IDLE_TIMEOUT")]
    pub idle_timeout: std::time::Duration,
    /// PEM CA bundle: serve only clients presenting a certificate it signed (the apiserver, through
    /// its AdmissionConfiguration kubeconfig). Unset: any TLS client (restrict with a NetworkPolicy).
    #[arg(long, env = "VOLGUARD_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// Request body bytes held in memory at once over all requests (bodies wait for room).
    #[arg(long, default_value_t = 64 * 1024 * 1024, env = "VOLGUARD_MAX_BODY_BYTES_IN_FLIGHT")]
    pub max_body_bytes_in_flight: usize,
    /// Time budget of one decision; a rule that cannot decide in time answers as its failure
    /// policy says (Ignore rules allow with a warning, Fail rules deny with code 500).
    #[arg(long, default_value = "2500ms", value_parser = duration, env = "VOLGUARD_DECIDE_TIMEOUT")]
    pub decide_timeout: std::time::Duration,
    /// Time budget of the ReadWriteOnce placement (`/validate/rwo-single-node`), registered with
    /// its own longer timeout: the lock's write waits for the apiserver's answer within it.
    #[arg(long, default_value = "9500ms", value_parser = duration, env = "VOLGUARD_PLACEMENT_DECIDE_TIMEOUT")]
    pub placement_decide_timeout: std::time::Duration,
    /// The former --decide-timeout, in milliseconds (kept as an alias).
    #[arg(long, hide = true, env = "VOLGUARD_DECIDE_TIMEOUT_MS")]
    pub decide_timeout_ms: Option<u64>,
    /// `deny` (default), `warn`, or `RULE=deny|warn,...` (rules.md §2g): in warn a would-be denial is
    /// allowed with the denial message as a warning, counted as decision="warned".
    #[arg(long, default_value = "deny", env = "VOLGUARD_ENFORCEMENT")]
    pub enforcement: crate::rules::enforcement::Enforcement,
    /// `RULE=USER` or `RULE=group:GROUP` (repeatable): that identity is exempted from that rule (a
    /// backup or GitOps tool's service account). Its would-be refusals are allowed with a warning,
    /// counted as decision="exempted", logged and recorded; only the rules that can warn.
    #[arg(long = "exempt", value_delimiter = ',', env = "VOLGUARD_EXEMPT")]
    pub exempt: Vec<crate::rules::exemptions::Exemption>,
    /// `all`: a ReadWriteOnce claim is used on one node at a time (rules.md §2f); `off`: not checked.
    #[arg(long, value_enum, default_value_t = RwoGuard::All, env = "VOLGUARD_RWO_GUARD")]
    pub rwo_guard: RwoGuard,
    /// Read a ReadWriteOnce lock's users by consistent LISTs only. By default a take-over lists
    /// them "not older than" the claim's resourceVersion (the apiserver's watch cache), which
    /// needs one etcd revision to number pods and claims alike: set this on a cluster that keeps
    /// pods or PersistentVolumeClaims in an etcd of their own (`--etcd-servers-overrides`).
    #[arg(long, env = "VOLGUARD_CONSISTENT_LISTS")]
    pub consistent_lists: bool,
    /// On SIGTERM, report not ready and keep serving this long before closing the listener
    /// (`15s`, `1m`): longer than the Service endpoints take to drop this replica, so the
    /// apiserver's calls during a rollout never meet a closed port. Keep the pod's
    /// terminationGracePeriodSeconds above it.
    #[arg(long, default_value = "15s", value_parser = duration, env = "VOLGUARD_SHUTDOWN_DRAIN")]
    pub shutdown_drain: std::time::Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RwoGuard {
    All,
    Off,
}

#[derive(Debug, Args, Clone)]
pub struct ForceDeleteArgs {
    /// Row 8 of the force-delete rule: `confirm` needs the pod annotation
    /// volguard.io/confirm-force-delete=true; `warn` always lets humans through with a warning.
    #[arg(
        long,
        value_parser = crate::runtime::flags::choice::<HumanForceDelete>(),
        default_value = "confirm",
        env = "VOLGUARD_HUMAN_FORCE_DELETE"
    )]
    pub human_force_delete: HumanForceDelete,
    #[command(flatten)]
    pub allow: crate::registration::allow_list::AllowListArgs,
    /// A node remediator you run, trusted for what it does after its own fencing (rules.md §7):
    /// `IDENTITY=ACTION[+ACTION]`, ACTION one of `taint` (the out-of-service taint),
    /// `delete-node` (a Node whose pods use claims), `force-delete` (a running pod); IDENTITY a
    /// username or `group:NAME`. Repeat the flag (or separate with `,`). Its actions are recorded.
    /// Nobody is trusted by default.
    #[arg(
        long = "trusted-remediator",
        value_delimiter = ',',
        env = "VOLGUARD_TRUSTED_REMEDIATORS"
    )]
    pub trusted_remediators: Vec<crate::rules::remediators::Remediator>,
}

impl ServeArgs {
    pub fn force_delete_policy(&self) -> ForceDeletePolicy {
        ForceDeletePolicy {
            human: self.force_delete.human_force_delete,
            allow_users: self.force_delete.allow.users.clone(),
            allow_groups: self.force_delete.allow.groups.clone(),
            remediators: crate::rules::remediators::Remediators(
                self.force_delete.trusted_remediators.clone(),
            ),
        }
    }
}

impl ServeArgs {
    pub fn tls_reload_interval(&self) -> std::time::Duration {
        either(
            self.tls_reload_interval,
            self.tls_reload_interval_ms,
            std::time::Duration::from_millis,
        )
    }
    pub fn read_timeout(&self) -> std::time::Duration {
        either(
            self.read_timeout,
            self.read_timeout_ms,
            std::time::Duration::from_millis,
        )
    }
    pub fn decide_timeout(&self) -> std::time::Duration {
        either(
            self.decide_timeout,
            self.decide_timeout_ms,
            std::time::Duration::from_millis,
        )
    }
}
