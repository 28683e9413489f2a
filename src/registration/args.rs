//! `volguard manifests admission-dir`'s arguments.

use clap::Args;
use std::path::PathBuf;

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
    /// Users the policies trust to force-delete running pods (as the policies' ConfigMap's
    /// force-delete-users), such as a remediator the webhook trusts by `--trusted-remediator`.
    #[arg(long = "force-delete-user")]
    pub force_delete_users: Vec<String>,
    /// Groups the policies trust to force-delete running pods.
    #[arg(long = "force-delete-group")]
    pub force_delete_groups: Vec<String>,
    /// The webhook's allow-list: trusted by the policies too, and answered in the apiserver by
    /// the force-delete entries' `not-allow-listed` condition (volguard not called).
    #[command(flatten)]
    pub force_delete_allow: super::allow_list::AllowListArgs,
}
