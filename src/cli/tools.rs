//! The operator tools' arguments: `explain`, `report` and `fence`.

use super::*;

/// `-o`: how `report` and `explain` print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    /// The table with where each "unused since" comes from.
    Wide,
    Json,
    Yaml,
    /// `persistentvolumeclaim/NAME` per line (for scripts: `| xargs kubectl delete -n NS`).
    Name,
}

#[derive(Debug, Subcommand)]
pub enum FenceCommand {
    /// Confirm that NODE is down (powered off, cut from its storage): the node's open incident's
    /// `manual` backend then counts it as fenced, recorded with your identity.
    #[command(
        after_help = "Example:\n  kubectl volguard fence confirm node-7     # after powering node-7 off"
    )]
    Confirm(FenceConfirmArgs),
    /// A reference fence agent: an HTTPS endpoint for the `webhook` backend that runs a command
    /// per node (IPMI, a cloud API...), idempotent by incident.
    #[command(
        after_help = "Example:\n  volguard fence agent --tls-cert tls.crt --tls-key tls.key --fence-command='ipmitool -H $NODE-bmc power off' --unfence-command='ipmitool -H $NODE-bmc power on' --state /var/lib/fence-agent/ledger.json"
    )]
    Agent(FenceAgentArgs),
}

#[derive(Debug, Args)]
pub struct FenceConfirmArgs {
    pub node: String,
    /// A node whose Lease was renewed within this (or that reports Ready) is alive and is not
    /// confirmed (rules.md §7); the controller's and webhook's --partition-after.
    #[arg(long, default_value = "40s", env = "VOLGUARD_PARTITION_AFTER")]
    pub partition_after: jiff::SignedDuration,
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    #[arg(long)]
    pub context: Option<String>,
}

#[derive(Debug, Args)]
pub struct FenceAgentArgs {
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub listen: String,
    #[arg(long)]
    pub tls_cert: PathBuf,
    #[arg(long)]
    pub tls_key: PathBuf,
    /// Run with `sh -c`, with NODE, INCIDENT and ADDRESSES (comma-separated) in its environment;
    /// exit 0 means fenced.
    #[arg(long)]
    pub fence_command: String,
    /// As --fence-command, to undo the fence.
    #[arg(long)]
    pub unfence_command: String,
    /// Where incidents and their outcomes are kept (JSON), so a restart never fences twice.
    #[arg(long)]
    pub state: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExplainKind {
    /// A PersistentVolumeClaim (namespaced).
    #[value(alias = "persistentvolumeclaim", alias = "pvcs")]
    Pvc,
    /// A PersistentVolume.
    #[value(alias = "persistentvolume", alias = "pvs")]
    Pv,
    /// A Node: why it is fenced, tainted or not released (rules.md §7).
    #[value(alias = "nodes", alias = "no")]
    Node,
    /// A Pod (namespaced): what in its storage keeps it from starting.
    #[value(alias = "pods", alias = "po")]
    Pod,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// pvc, pv, node or pod.
    #[arg(value_enum)]
    pub kind: ExplainKind,
    pub name: String,
    /// Namespace of the claim (default: the kubeconfig context's namespace, else "default").
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Read a state file instead of a cluster.
    #[arg(long, env = "VOLGUARD_STATE")]
    pub state: Option<PathBuf>,
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (as kubectl's --context).
    #[arg(long)]
    pub context: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// `explain node`: a node whose Lease was renewed within this (or that reports Ready) is alive.
    #[arg(long, default_value = "40s", env = "VOLGUARD_PARTITION_AFTER")]
    pub partition_after: jiff::SignedDuration,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// PVCs no pod has used, since when, and what they hold (KEP-5541 semantics).
    #[command(
        after_help = "Examples:\n  volguard report unused -A --older-than 1d12h\n  volguard report unused --state snapshot.yaml -o json"
    )]
    Unused(ReportArgs),
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Read a state file instead of a cluster.
    #[arg(long, env = "VOLGUARD_STATE")]
    pub state: Option<PathBuf>,
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (as kubectl's --context).
    #[arg(long)]
    pub context: Option<String>,
    /// Only this namespace (default: the context's namespace; with --state, all).
    #[arg(short = 'n', long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// All namespaces.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Label selector on the claims (kubectl syntax).
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Only claims idle at least this long: 30d, 1d12h, 720h, 2w (claims with an unknown time are left out).
    #[arg(long)]
    pub older_than: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Format,
    /// Evaluate at this time instead of now (RFC 3339), for reproducible reports.
    #[arg(long, hide = true)]
    pub now: Option<String>,
}
