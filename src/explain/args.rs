//! `volguard explain`'s arguments.

use crate::runtime::flags::Format;
use clap::Args;
use std::path::PathBuf;

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
