//! `volguard report unused` (and `kubectl volguard unused`)'s arguments.

use crate::runtime::flags::Format;
use clap::{Args, Subcommand};
use std::path::PathBuf;

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
