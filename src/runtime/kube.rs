//! Kubernetes client construction (explicit kubeconfig, else kube's inference, in-cluster
//! first) and the cluster view built from a `--state` file or a live cluster.

use crate::state::{Cluster, Store, live::LiveCluster, loader};
use anyhow::Context;
use std::path::Path;
use std::sync::Arc;

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

/// Build the cluster view for `--state` or a live cluster. `watch_pods`: the live view also
/// watches pods (the RWO guard's holders, evictions' pods).
pub async fn cluster_from(
    state: Option<&Path>,
    kubeconfig: Option<&Path>,
    watch_pods: bool,
) -> anyhow::Result<Cluster> {
    match state {
        Some(path) => {
            let store = Store::default();
            let started = std::time::Instant::now();
            let summary = loader::load_file(path, &store)?;
            crate::alloc::release_free_memory();
            tracing::info!(
                file = %path.display(), pvcs = summary.pvcs, pvs = summary.pvs, nodes = summary.nodes,
                pods = summary.pods, skipped = ?summary.skipped, seconds = started.elapsed().as_secs_f64(),
                "state loaded"
            );
            Ok(Cluster::Offline(Arc::new(store)))
        }
        None => {
            let client = client(kubeconfig).await?;
            Ok(Cluster::Live(LiveCluster::start(client, watch_pods)))
        }
    }
}
