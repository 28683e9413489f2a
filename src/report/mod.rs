//! `volguard report unused`: read the claims, ask the unused query (`rules::unused`), render.

pub mod render;

use crate::model::quantity;
use crate::model::selector::Selector;
pub use crate::rules::unused::{Filter, Report, Row, SinceSource, Total, build, unused_since};

/// Run the `report unused` command: read, query, print.
pub async fn run(args: crate::cli::ReportArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let selector = args.selector.as_deref().map(Selector::parse).transpose()?;
    let older_than_seconds = match &args.older_than {
        Some(s) => Some(quantity::parse_duration(s).with_context(|| {
            format!("--older-than {s:?}: expected a number and one of s, m, h, d, w (e.g. 30d)")
        })?),
        None => None,
    };
    let now = match &args.now {
        Some(t) => t
            .parse()
            .with_context(|| format!("--now {t:?} is not an RFC 3339 time"))?,
        None => jiff::Timestamp::now(),
    };
    let filter = Filter {
        namespace: args.namespace.clone(),
        selector,
        older_than_seconds,
    };
    let report = match &args.state {
        Some(path) => {
            let store = crate::state::Store::keeping_labels();
            crate::state::loader::load_file(path, &store)?;
            build(
                &store.pvcs.all(),
                &store.pvs.all(),
                &store.pods.all(),
                &filter,
                now,
            )
        }
        None => {
            let client = crate::runtime::kube::client(args.kubeconfig.as_deref()).await?;
            let (pvcs, pvs, pods) = live::read(&client, &filter).await?;
            build(&pvcs, &pvs, &pods, &filter, now)
        }
    };
    print!("{}", render::render(&report, args.output)?);
    Ok(())
}

mod live {
    use super::Filter;
    use crate::model::{Pod, Pv, Pvc};
    use crate::state::decoded::{Decoded, Wire};
    use kube::api::{Api, ListParams};

    pub async fn read(
        client: &kube::Client,
        f: &Filter,
    ) -> anyhow::Result<(Vec<Pvc>, Vec<Pv>, Vec<Pod>)> {
        let mut lp = ListParams::default();
        if let Some(s) = &f.selector {
            lp = lp.labels(s.as_str());
        }
        let (pvc_api, pod_api) = match &f.namespace {
            Some(ns) => (
                Api::<Decoded<Pvc>>::namespaced(client.clone(), ns),
                Api::<Decoded<Pod>>::namespaced(client.clone(), ns),
            ),
            None => (Api::all(client.clone()), Api::all(client.clone())),
        };
        let pvcs = list(&pvc_api, &lp).await?;
        let pvs = list(
            &Api::<Decoded<Pv>>::all(client.clone()),
            &ListParams::default(),
        )
        .await?;
        let pods = list(&pod_api, &ListParams::default()).await?;
        Ok((pvcs, pvs, pods))
    }

    /// LIST, decoded straight into the pruned model.
    async fn list<T>(api: &Api<Decoded<T>>, lp: &ListParams) -> anyhow::Result<Vec<T>>
    where
        T: Wire + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        Ok(api
            .list(lp)
            .await?
            .items
            .into_iter()
            .map(Decoded::into_inner)
            .collect())
    }
}
