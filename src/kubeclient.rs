//! Kubernetes client construction: explicit kubeconfig, else kube's inference (in-cluster first).

use anyhow::Context;
use std::path::Path;

pub async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig given and no in-cluster or default kubeconfig found")?,
    };
    kube::Client::try_from(config).context("building the Kubernetes client")
}
