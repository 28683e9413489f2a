//! `volguard report unused`: read the claims, ask the unused query (`rules::unused`), render.

pub mod render;

use crate::model::quantity;
use crate::model::selector::Selector;
pub use crate::rules::unused::{Filter, Report, Row, SinceSource, Total, build, unused_since};
use crate::state;

/// Run the `report unused` command: read, query, print.
pub async fn run(args: crate::cli::ReportArgs) -> anyhow::Result<()> {
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
    let filter = Filter {
        namespace: args.namespace.clone(),
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
    let source = match &args.state {
        Some(path) => state::Source::File(path),
        None => {
            state::Source::Live(crate::runtime::kube::client(args.kubeconfig.as_deref()).await?)
        }
    };
    let view = state::open_once(source, needs).await?;
    let store = view.store();
    let report = build(
        &store.pvcs.all(),
        &store.pvs.all(),
        &store.pods.all(),
        &filter,
        now,
    );
    print!("{}", render::render(&report, args.output)?);
    Ok(())
}
