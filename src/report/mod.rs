//! `volguard report unused`: read the claims, ask the unused query (`rules::unused`), render.

pub mod args;
pub mod render;

use crate::model::selector::Selector;
use crate::model::{Pod, Pv, Pvc, quantity};
pub use crate::rules::unused::{Filter, Report, Row, SinceSource, Total, build, unused_since};
use crate::state;

/// Whether a read failed because the caller may not list PersistentVolumes.
fn forbidden(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(c.downcast_ref::<kube::Error>(), Some(kube::Error::Api(s))
            if s.code == 403 && s.message.contains("persistentvolumes"))
    })
}

/// Run the `report unused` command: read, query, print.
pub async fn run(args: crate::report::args::ReportArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let selector = args.selector.as_deref().map(Selector::parse).transpose()?;
    let older_than_seconds = match &args.older_than {
        Some(s) => Some(quantity::parse_duration(s).with_context(|| {
            format!("--older-than {s:?}: expected a duration such as 30d, 1d12h, 720h or 2w")
        })?),
        None => None,
    };
    let now = match &args.now {
        Some(t) => t
            .parse()
            .with_context(|| format!("--now {t:?} is not an RFC 3339 time"))?,
        None => jiff::Timestamp::now(),
    };
    let client = match &args.state {
        Some(_) => None,
        None => Some(
            crate::runtime::kube::client_for(args.kubeconfig.as_deref(), args.context.as_deref())
                .await?,
        ),
    };
    // As kubectl: -n, else -A, else the context's namespace. A state file has no context: all.
    let namespace = match (&args.namespace, args.all_namespaces, &client) {
        (Some(ns), _, _) => Some(ns.clone()),
        (None, true, _) | (None, false, None) => None,
        (None, false, Some(c)) => Some(c.default_namespace().to_string()),
    };
    let filter = Filter {
        namespace,
        selector,
        older_than_seconds,
    };
    let needs = state::Needs {
        pvcs: true,
        pvs: true,
        pods: true,
        labels: true,
        namespace: filter.namespace.clone(),
        ..Default::default()
    };
    let view = match (&args.state, client) {
        (Some(path), _) => state::open_once(state::Source::File(path), needs).await?,
        (None, None) => anyhow::bail!("neither a cluster nor --state to read"),
        (None, Some(client)) => {
            match state::open_once(state::Source::Live(client.clone()), needs.clone()).await {
                // A namespace's user may not list PersistentVolumes (cluster-scoped): report from
                // the claims alone, and say what is missing.
                Err(e) if forbidden(&e) => {
                    let without = state::Needs {
                        pvs: false,
                        ..needs
                    };
                    let view = state::open_once(state::Source::Live(client), without).await?;
                    eprintln!(
                        "note: persistentvolumes were not read (forbidden): the VOLUME and RECLAIM columns are from the claims alone"
                    );
                    view
                }
                r => r?,
            }
        }
    };
    let report = build(
        &view.sweep::<Pvc>(None),
        &view.sweep::<Pv>(None),
        &view.sweep::<Pod>(None),
        &filter,
        now,
    );
    print!("{}", render::render(&report, args.output)?);
    Ok(())
}
