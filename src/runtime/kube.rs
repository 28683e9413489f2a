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
        (None, _) if std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()) => {
            let list = std::env::var_os("KUBECONFIG").unwrap_or_default();
            match kubeconfig_list(&list)? {
                Some(kc) => kube::Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .context("using the kubeconfig files $KUBECONFIG lists")?,
                // None of them exists: as kubectl, fall back (in-cluster, ~/.kube/config).
                None => kube::Config::infer()
                    .await
                    .context("no file $KUBECONFIG lists exists, and no in-cluster or default kubeconfig found")?,
            }
        }
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

/// The files `$KUBECONFIG` lists, merged as kubectl merges them (the first to set a value wins);
/// a file that does not exist is skipped, as kubectl skips it (kube's own reader fails on it).
/// `None` when none exists.
pub fn kubeconfig_list(list: &std::ffi::OsStr) -> anyhow::Result<Option<kube::config::Kubeconfig>> {
    let mut merged: Option<kube::config::Kubeconfig> = None;
    for path in std::env::split_paths(list).filter(|p| !p.as_os_str().is_empty()) {
        if !path.exists() {
            continue;
        }
        let kc = kube::config::Kubeconfig::read_from(&path)
            .with_context(|| format!("reading kubeconfig {}", path.display()))?;
        merged = Some(match merged {
            None => kc,
            Some(m) => m
                .merge(kc)
                .with_context(|| format!("merging kubeconfig {}", path.display()))?,
        });
    }
    Ok(merged)
}

#[cfg(test)]
#[path = "kube_tests.rs"]
mod tests;
