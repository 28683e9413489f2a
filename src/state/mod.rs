//! The cluster as volguard sees it. `View` is the one reader (every read, its freshness a
//! parameter), over in-memory stores of pruned objects filled either from a `--state` file or by
//! watches on a live cluster; `Writer` (`View::writer`) is the one writer. Only this module (and
//! the runtime's client setup) names a Kubernetes client.

pub mod audit;
pub mod authorizer;
mod change;
pub mod claim_index;
pub mod decoded;
mod fence_writer;
mod fences;
pub mod gone_pods;
mod leases;
pub mod live;
pub mod live_reads;
pub mod loader;
mod mark;
pub mod network_fences;
mod operator_reads;
pub mod query;
pub mod reads;
mod registrations;
pub mod store;
mod view;
mod watch;
mod write;
pub mod writer;

pub use fence_writer::{FenceStatus, GoneConfirmation, NewFence};
pub use leases::LeasePut;
pub use live::{NODE_PAGE, Needs, ViewChange};
pub use query::Query;
pub use view::{FencesOf, Fresh, PodsIn, Readable, View};
pub use write::{Apply, Door, Note, Write};
pub use writer::{LockSwap, ReleaseRecord, Writer};

/// Where a view comes from.
pub enum Source<'a> {
    File(&'a std::path::Path),
    Live(kube::Client),
}

/// Open the view: load the file, or start the watches `needs` names (the caller waits for
/// `synced()` before it trusts absences).
pub fn open(source: Source<'_>, needs: Needs) -> anyhow::Result<View> {
    match source {
        Source::File(path) => {
            let store = if needs.labels {
                Store::keeping_labels()
            } else {
                Store::default()
            };
            let started = std::time::Instant::now();
            let summary = loader::load_file(path, &store)?;
            crate::alloc::release_free_memory();
            tracing::info!(
                file = %path.display(), pvcs = summary.pvcs, pvs = summary.pvs, nodes = summary.nodes,
                pods = summary.pods, skipped = ?summary.skipped, seconds = started.elapsed().as_secs_f64(),
                "state loaded"
            );
            Ok(View::file(std::sync::Arc::new(store)))
        }
        Source::Live(client) => Ok(live::Live::start(client, needs)),
    }
}

/// Open the view for a command that reads once and exits: a file as `open` loads it; a live
/// cluster as one snapshot (each collection LISTed once, no watch), so a failed read is an error
/// at once instead of a watch that retries.
pub async fn open_once(source: Source<'_>, needs: Needs) -> anyhow::Result<View> {
    match source {
        Source::File(_) => open(source, needs),
        Source::Live(client) => Ok(live::Live::snapshot(client, needs).await?),
    }
}
pub use store::{Held, Object, ObjectMap, PodSeen, Store};
