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
mod tests {
    use super::kubeconfig_list;

    const ONE: &str = "apiVersion: v1\nkind: Config\ncurrent-context: one\nclusters:\n- name: one\n  cluster: {server: https://one.example:6443}\ncontexts:\n- name: one\n  context: {cluster: one, user: one}\nusers:\n- name: one\n  user: {token: t1}\n";
    const TWO: &str = "apiVersion: v1\nkind: Config\ncurrent-context: two\nclusters:\n- name: two\n  cluster: {server: https://two.example:6443}\ncontexts:\n- name: two\n  context: {cluster: two, user: two}\nusers:\n- name: two\n  user: {token: t2}\n";

    #[test]
    fn a_missing_file_in_the_list_is_skipped_as_kubectl_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (one, two) = (dir.path().join("one.yaml"), dir.path().join("two.yaml"));
        std::fs::write(&one, ONE).expect("write");
        std::fs::write(&two, TWO).expect("write");
        let missing = dir.path().join("missing.yaml");
        let list = std::env::join_paths([&missing, &one, &two]).expect("join");
        let kc = kubeconfig_list(&list).expect("read").expect("some");
        // The first file that sets current-context wins; both files' contexts are there.
        assert_eq!(kc.current_context.as_deref(), Some("one"));
        assert_eq!(kc.contexts.len(), 2);
        let none = std::env::join_paths([&missing]).expect("join");
        assert!(kubeconfig_list(&none).expect("read").is_none());
        // A file that exists but does not parse is an error naming it.
        std::fs::write(&two, "clusters: [").expect("write");
        let e = kubeconfig_list(&list).expect_err("bad file");
        assert!(format!("{e:#}").contains("two.yaml"), "{e:#}");
    }
}
