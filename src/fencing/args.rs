//! Partition healing's flags: the controller's fencing, `fence confirm` and `fence agent`.

use clap::{Args, Subcommand};
use std::path::PathBuf;

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
        value_parser = crate::runtime::flags::choice::<crate::model::fence::BackendKind>(),
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
    /// Who deletes a released node's terminating pods: `now`, volguard as soon as it has tainted
    /// the node (the pods PodGC's gcTerminating selects, and only those), or `podgc`, PodGC at its
    /// next pass (up to 20 s later, the replacement waiting meanwhile).
    #[arg(long, value_enum, default_value = "now", env = "VOLGUARD_RELEASE_PODS")]
    pub release_pods: ReleasePods,
}

/// Who deletes the pods of a released node (`--release-pods`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReleasePods {
    Now,
    Podgc,
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
        after_help = "Example:\n  volguard fence agent --tls-cert tls.crt --tls-key tls.key --fence-command='ipmitool -H $NODE-bmc power off' --verify-command='ipmitool -H $NODE-bmc power status | grep -q off' --unfence-command='ipmitool -H $NODE-bmc power on' --state /var/lib/fence-agent/ledger.json"
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
    /// Proves the fence (the machine reads powered off, none of its processes is left): run as
    /// --fence-command, after it exits 0, every second until it exits 0 itself. Only then does
    /// the agent answer `Done`; a fence it cannot prove within --verify-timeout is `Failed`.
    #[arg(long)]
    pub verify_command: String,
    /// How long --verify-command may take to prove the fence.
    #[arg(long, default_value = "30s")]
    pub verify_timeout: jiff::SignedDuration,
    /// As --fence-command, to undo the fence.
    #[arg(long)]
    pub unfence_command: String,
    /// Where incidents and their outcomes are kept (JSON), so a restart never fences twice.
    #[arg(long)]
    pub state: PathBuf,
}
