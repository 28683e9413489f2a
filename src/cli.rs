//! The command line. Every flag has an environment twin.
//! Each subsystem owns its flags (`server::args`, `controller::args`, `fencing::args`,
//! `explain::args`, `report::args`, `registration::args`); this module assembles them into the
//! command line and re-exports them.

pub use crate::controller::args::*;
pub use crate::explain::args::*;
pub use crate::fencing::args::*;
pub use crate::registration::args::*;
pub use crate::report::args::*;
pub use crate::runtime::flags::*;
pub use crate::runtime::identity::*;
pub use crate::server::args::*;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

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

#[derive(Debug, Subcommand)]
// Parsed once at startup: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
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

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
