//! Kubernetes client construction (explicit kubeconfig, else kube's inference, in-cluster
//! first). The cluster view itself is `state::open`.

use anyhow::Context;
use std::path::Path;

pub async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    client_for(kubeconfig, None).await
}

/// As `client`, with kubectl's `--context` (a context of the kubeconfig other than the current).
pub async fn client_for(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        (None, Some(ctx)) => kube::Config::from_kubeconfig(&options)
            .await
            .with_context(|| format!("using context {ctx:?} of the default kubeconfig"))?,
        (None, None) => kube::Config::infer()
            .await
            .context("no kubeconfig given and no in-cluster or default kubeconfig found")?,
    };
    kube::Client::try_from(config).context("building the Kubernetes client")
}
