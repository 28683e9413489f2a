//! Command-line arguments, one struct per subsystem. Every flag has an environment twin.

use crate::rules::force_delete::{ForceDeletePolicy, HumanForceDelete};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

mod tools;
pub use crate::runtime::identity::*;
pub use tools::*;

#[derive(Debug, Parser)]
#[command(
    name = "volguard",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("VOLGUARD_COMMIT"), ")"),
    about = "Storage-safety layer for Kubernetes"
)]
pub struct Cli {
    /// Log format.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "VOLGUARD_LOG_FORMAT"
    )]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// HTTPS admission webhook (mutating + validating).
    #[command(
        after_help = "Example:\n  volguard serve --tls-cert certs/tls.crt --tls-key certs/tls.key --state manifests/examples/state.yaml\n  volguard serve --tls-cert /etc/volguard/tls/tls.crt --tls-key /etc/volguard/tls/tls.key --enforcement=force-delete=warn"
    )]
    Serve(ServeArgs),
    /// Reconcile loop: finalizer backfill, safe release, DeletionPostponed events, unused-since.
    #[command(
        after_help = "Example:\n  volguard controller --leader-elect --fence-backends=webhook,manual --fence-webhook-url=https://fence-agent.ops:9443/"
    )]
    Controller(ControllerArgs),
    /// Reports for operators.
    #[command(subcommand)]
    Report(ReportCommand),
    /// Why is this PVC / PV still here, who uses it, and what to do next.
    #[command(
        after_help = "Examples:\n  kubectl volguard explain pvc data-web-1 -n shop\n  kubectl volguard explain pv pv-data-web-0 -o json\n  volguard explain pvc results -n batch --state snapshot.yaml"
    )]
    Explain(ExplainArgs),
    /// Same as `report unused` (the kubectl plugin's `kubectl volguard unused`).
    #[command(
        after_help = "Examples:\n  kubectl volguard unused                      # the context's namespace\n  kubectl volguard unused -A --older-than 30d -o wide\n  kubectl volguard unused -n team -o name | xargs kubectl delete -n team"
    )]
    Unused(ReportArgs),
    /// Partition healing by hand: confirm a node is down, or run the reference fence agent.
    #[command(subcommand)]
    Fence(FenceCommand),
    /// Generate a development CA and serving certificate (what `make certs` runs).
    #[command(
        after_help = "Example:\n  volguard dev-certs --out-dir certs --san localhost --san 127.0.0.1"
    )]
    DevCerts(DevCertsArgs),
    /// Print what volguard registers beside its webhooks, generated from its rule table.
    #[command(subcommand)]
    Manifests(ManifestsCommand),
    /// Print the version, the commit it was built from and that commit's date.
    #[command(after_help = "Example:\n  kubectl volguard version")]
    Version,
}

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
    #[arg(long, value_enum, default_value_t = crate::admission::break_glass::BreakGlass::Rbac, env = "VOLGUARD_BREAK_GLASS")]
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
    /// On SIGTERM, report not ready and keep serving this long before closing the listener
    /// (`15s`, `1m`): longer than the Service endpoints take to drop this replica, so the
    /// apiserver's calls during a rollout never meet a closed port. Keep the pod's
    /// terminationGracePeriodSeconds above it.
    #[arg(long, default_value = "15s", value_parser = duration, env = "VOLGUARD_SHUTDOWN_DRAIN")]
    pub shutdown_drain: std::time::Duration,
}

/// A duration as people write it: `15s`, `1m30s`, `500ms`, `2h` (jiff's friendly format).
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("{s:?} is not a duration like 15s, 1m30s or 500ms: {e}"))?;
    std::time::Duration::try_from(d).map_err(|_| format!("{s:?} is negative"))
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
        value_enum,
        default_value = "confirm",
        env = "VOLGUARD_HUMAN_FORCE_DELETE"
    )]
    pub human_force_delete: HumanForceDelete,
    /// Users always allowed to force-delete running pods (e.g. a fencing controller).
    #[arg(
        long = "force-delete-allow-user",
        value_delimiter = ',',
        env = "VOLGUARD_FORCE_DELETE_ALLOW_USERS"
    )]
    pub allow_users: Vec<String>,
    /// Groups always allowed to force-delete running pods.
    #[arg(
        long = "force-delete-allow-group",
        value_delimiter = ',',
        env = "VOLGUARD_FORCE_DELETE_ALLOW_GROUPS"
    )]
    pub allow_groups: Vec<String>,
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
            allow_users: self.force_delete.allow_users.clone(),
            allow_groups: self.force_delete.allow_groups.clone(),
            remediators: crate::rules::remediators::Remediators(
                self.force_delete.trusted_remediators.clone(),
            ),
        }
    }
}

#[derive(Debug, Args)]
pub struct DevCertsArgs {
    /// Output directory (ca.crt, tls.crt, tls.key).
    #[arg(long, default_value = "certs")]
    pub out_dir: PathBuf,
    /// DNS names and IPs of the serving certificate.
    #[arg(
        long = "san",
        value_delimiter = ',',
        default_value = "localhost,127.0.0.1,volguard-webhook.volguard-system.svc,volguard-webhook.volguard-system.svc.cluster.local"
    )]
    pub sans: Vec<String>,
}

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
    /// (the mark is later than the truth by up to this much). A claim bound just before its pod,
    /// or between a StatefulSet's pod and its replacement, is then not written twice for nothing.
    #[arg(long, default_value = "2m", value_parser = duration, env = "VOLGUARD_UNUSED_GRACE")]
    pub unused_grace: std::time::Duration,
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
    /// Every entry registered `Ignore` (the chart's `forceFailurePolicyIgnore`): nothing waits on
    /// volguard, and nothing is refused while it is down.
    #[arg(long, env = "VOLGUARD_FORCE_FAILURE_POLICY_IGNORE")]
    pub force_failure_policy_ignore: bool,
}

/// Partition healing (docs/fencing.md). Only nodes running pods whose RWO claims opted in
/// (`volguard.io/fencing` on the StorageClass, namespace or pod) are ever fenced.
#[derive(Debug, Args)]
pub struct FencingArgs {
    /// Run the fencing controller (in the leader).
    #[arg(long = "fencing", default_value_t = true, action = clap::ArgAction::Set, env = "VOLGUARD_FENCING")]
    pub enabled: bool,
    /// A node whose Lease has not changed for this long, and which is not Ready, is partitioned.
    #[arg(long, default_value = "40s", env = "VOLGUARD_PARTITION_AFTER")]
    pub partition_after: jiff::SignedDuration,
    /// More unhealthy nodes than this at once (a count, or a percentage: 10%) is a storm, not a
    /// dead node: nothing new is fenced.
    #[arg(long, default_value = "1", env = "VOLGUARD_MAX_UNHEALTHY_NODES")]
    pub max_unhealthy_nodes: crate::rules::fencing::MaxUnhealthy,
    /// Incidents fencing at once.
    #[arg(long, default_value_t = 1, env = "VOLGUARD_MAX_CONCURRENT_FENCES")]
    pub max_concurrent_fences: usize,
    /// The backends an `auto` incident tries, in order (a `manual` one uses `manual` only).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "manual",
        env = "VOLGUARD_FENCE_BACKENDS"
    )]
    pub fence_backends: Vec<crate::model::fence::BackendKind>,
    /// The fence agent's HTTPS URL (backend `webhook`).
    #[arg(long, env = "VOLGUARD_FENCE_WEBHOOK_URL")]
    pub fence_webhook_url: Option<String>,
    /// PEM CA bundle for the fence agent's certificate (default: the system roots).
    #[arg(long, env = "VOLGUARD_FENCE_WEBHOOK_CA")]
    pub fence_webhook_ca: Option<PathBuf>,
    #[arg(long, default_value = "60s", env = "VOLGUARD_FENCE_WEBHOOK_TIMEOUT")]
    pub fence_webhook_timeout: jiff::SignedDuration,
    /// NetworkFenceClass for backend `networkfence` (or --networkfence-driver).
    #[arg(long, env = "VOLGUARD_NETWORKFENCE_CLASS")]
    pub networkfence_class: Option<String>,
    /// CSI driver for backend `networkfence` (deprecated in csi-addons in favour of a class).
    #[arg(long, env = "VOLGUARD_NETWORKFENCE_DRIVER")]
    pub networkfence_driver: Option<String>,
    /// NAMESPACE/NAME of the Secret the driver needs (with --networkfence-driver).
    #[arg(long, env = "VOLGUARD_NETWORKFENCE_SECRET")]
    pub networkfence_secret: Option<String>,
    #[arg(long, default_value = "2m", env = "VOLGUARD_NETWORKFENCE_TIMEOUT")]
    pub networkfence_timeout: jiff::SignedDuration,
    /// How long a person has to run `kubectl volguard fence confirm` before the incident fails.
    #[arg(long, default_value = "24h", env = "VOLGUARD_MANUAL_FENCE_TIMEOUT")]
    pub manual_fence_timeout: jiff::SignedDuration,
    /// How often incidents are looked at.
    #[arg(long, default_value = "2s", env = "VOLGUARD_FENCING_INTERVAL")]
    pub fencing_interval: jiff::SignedDuration,
}

#[derive(Debug, Subcommand)]
pub enum ManifestsCommand {
    /// The webhook registration (MutatingWebhookConfiguration and ValidatingWebhookConfiguration)
    /// from the rule table: the kustomize base's `webhooks.yaml` or the chart's template.
    #[command(
        after_help = "Examples:\n  volguard manifests webhooks --flavour kustomize > manifests/base/webhooks.yaml\n  volguard manifests webhooks --flavour chart > charts/volguard/templates/webhooks.yaml"
    )]
    Webhooks {
        #[arg(long, value_enum, default_value = "kustomize")]
        flavour: crate::registration::webhooks::Flavour,
    },
    /// The webhook registration and the CEL policies as manifest-based admission configuration
    /// (Kubernetes 1.37, beta): files the apiserver loads at startup, which no API call can delete.
    #[command(
        after_help = "Example:\n  volguard manifests admission-dir /etc/kubernetes/admission/volguard \\\n    --webhook-url https://10.0.0.7:8443 --ca-bundle ca.crt\n  kube-apiserver --admission-control-config-file=/etc/kubernetes/admission/volguard/admission-configuration.yaml ..."
    )]
    AdmissionDir(AdmissionDirArgs),
    /// The rows that need no other object as ValidatingAdmissionPolicy / MutatingAdmissionPolicy
    /// (rules.md §9), with their bindings (Deny) and default parameters: what
    /// manifests/base/policies.yaml holds.
    #[command(
        after_help = "Examples:\n  volguard manifests policies --part policies > policies.yaml\n  volguard manifests policies --part bindings > bindings.yaml"
    )]
    Policies {
        #[arg(long, value_enum, default_value = "policies")]
        part: crate::registration::policies::Part,
    },
}

#[derive(Debug, Args)]
pub struct AdmissionDirArgs {
    /// Where to write admission-configuration.yaml and the four plugin directories.
    pub dir: PathBuf,
    /// Where volguard serves, as the apiserver reaches it (https://HOST:PORT; static webhooks
    /// cannot name a Service).
    #[arg(long)]
    pub webhook_url: String,
    /// PEM file of the CA that signed volguard's serving certificate.
    #[arg(long)]
    pub ca_bundle: PathBuf,
    /// volguard's namespace (its service accounts are named in conditions and policies).
    #[arg(long, default_value = "volguard-system")]
    pub namespace: String,
    /// The kubeconfig the apiserver presents to webhooks (`kubeConfigFile`), if any.
    #[arg(long)]
    pub webhook_kubeconfig: Option<PathBuf>,
    /// Users trusted to force-delete running pods (as the policies' ConfigMap's force-delete-users).
    #[arg(long = "force-delete-user")]
    pub force_delete_users: Vec<String>,
    /// Groups trusted to force-delete running pods.
    #[arg(long = "force-delete-group")]
    pub force_delete_groups: Vec<String>,
}

/// A duration flag, or its former unit-suffixed alias when that was given.
fn either(
    new: std::time::Duration,
    old: Option<u64>,
    unit: fn(u64) -> std::time::Duration,
) -> std::time::Duration {
    old.map_or(new, unit)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn controller(args: &[&str]) -> ControllerArgs {
        let mut all = vec!["volguard", "controller"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all).expect("parse").command {
            Command::Controller(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn durations_read_units_and_the_former_flags_still_work() {
        let d = controller(&[]);
        assert_eq!(d.lease_duration(), std::time::Duration::from_secs(15));
        assert_eq!(d.backoff_base(), std::time::Duration::from_millis(200));
        let new = controller(&["--lease-duration=1m", "--backoff-max=90s"]);
        assert_eq!(new.lease_duration(), std::time::Duration::from_secs(60));
        assert_eq!(new.backoff_max(), std::time::Duration::from_secs(90));
        let old = controller(&["--lease-duration-seconds=6", "--backoff-base-ms=100"]);
        assert_eq!(old.lease_duration(), std::time::Duration::from_secs(6));
        assert_eq!(old.backoff_base(), std::time::Duration::from_millis(100));
        let bad = Cli::try_parse_from(["volguard", "controller", "--lease-duration=fast"])
            .expect_err("not a duration")
            .to_string();
        assert!(bad.contains("\"fast\" is not a duration like 15s"), "{bad}");
    }
}
