//! `volguard explain pvc|pv|node NAME` (also `kubectl volguard explain ...`): why is this volume
//! still here, who uses it, why is this node fenced or not released, and what to do next (rules.md
//! §6, §7). `build_*` are pure over the objects read;
//! `run` reads them from a live cluster or a `--state` file and prints table, JSON or YAML.

pub mod args;
mod claim;
mod gather;
pub mod node;
pub mod pod;
mod table;

pub use claim::*;
use gather::{gather, gather_node, gather_pod};
use table::render;
pub use table::table;

use crate::explain::args::ExplainArgs;
use crate::explain::args::ExplainKind;
use crate::model::fence::NodeFence;
use crate::model::{PV_FINALIZER, PVC_FINALIZER, Pod, Pv, Pvc};
use crate::report::{SinceSource, unused_since};
use crate::rules::Fact;
use crate::rules::in_use::{blocking_pods, pv_in_use};
use crate::state;
use serde::Serialize;

/// Read, explain, print.
pub async fn run(args: ExplainArgs) -> anyhow::Result<()> {
    let (view, ns, file) = match &args.state {
        Some(path) => {
            let view = state::open(state::Source::File(path), state::Needs::default())?;
            let ns = args.namespace.clone().unwrap_or_else(|| "default".into());
            (view, ns, Some(path.display().to_string()))
        }
        None => {
            let client = crate::runtime::kube::client_for(
                args.kubeconfig.as_deref(),
                args.context.as_deref(),
            )
            .await?;
            let ns = args
                .namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string());
            // A one-shot view with nothing cached: every read below is a live read (the
            // namespace's pods by a consistent LIST, as the controller reads them).
            let view = state::View::from_store(
                client,
                std::sync::Arc::new(state::Store::default()),
                state::Needs::default(),
            );
            (view, ns, None)
        }
    };
    let text = match args.kind {
        ExplainKind::Node => {
            let e = gather_node(&view, &args, file).await?;
            render(&e, args.output, node::table, format!("node/{}", e.name))?
        }
        ExplainKind::Pod => {
            let e = gather_pod(&view, &ns, &args, file).await?;
            render(&e, args.output, pod::table, format!("pod/{}", e.name))?
        }
        ExplainKind::Pvc | ExplainKind::Pv => {
            let e = gather(&view, &ns, &args, file).await?;
            let name = format!("{}/{}", e.kind.to_ascii_lowercase(), e.name);
            render(&e, args.output, table, name)?
        }
    };
    print!("{text}");
    Ok(())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
