//! Partition healing (rules.md §7): detect a node that stopped heartbeating, decide whether to
//! act, fence it through a backend, prove the fence, release its volumes with the out-of-service
//! taint, and undo it all when the node returns. Runs in the controller's leader only.
//!
//! Every step is written to the incident's NodeFence *before* it is acted on, with the object's
//! resourceVersion: a controller that restarts resumes the incident where it stood, and two
//! controllers can never both advance one. The decisions are `rules::fencing`'s.

pub mod agent;
pub mod args;
pub mod backend;
pub mod confirm;
pub mod incident;
pub mod metrics;
pub mod observe;
pub mod records;

mod config;
mod detect;
mod driver;

pub use config::FencingConfig;

use crate::model::fence::{BackendKind, NodeFence, NodeFenceSpec, NodeFenceStatus, Phase};
use crate::model::{Node, OUT_OF_SERVICE_TAINT};
use crate::rules::proof::{BreakGlass, Key, Read, Reader};

const CONFIRM_NODE_DOWN: Key = Key::ConfirmNodeDown;
use crate::rules::fencing::{self as rules, Do, Now, Open, Record, Transition};
use crate::state::View;
use backend::Answer;
use incident::{Records, now};
use k8s_openapi::api::core::v1::ObjectReference;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a backend gets when it is asked after its timeout already ran out (a takeover).
const LAST_ASK: Duration = Duration::from_secs(5);

/// Why a fencing step could not be taken (it is retried on the next tick).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error(transparent)]
    Read(#[from] crate::rules::decision::ReadError),
}

pub struct Fencer {
    cfg: FencingConfig,
    records: Records,
    metrics: Arc<metrics::FencingMetrics>,
    clock: observe::LeaseClock,
    drivers: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// The last reason each node was held for (logged and announced once per change).
    held: Mutex<HashMap<String, String>>,
    /// (incident, backend index) this process has asked at least once.
    asked: Mutex<std::collections::HashSet<(String, usize)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn parse_ts(s: Option<&str>) -> Option<jiff::Timestamp> {
    s.and_then(|s| s.parse().ok())
}

fn seconds_since(s: Option<&str>) -> Option<f64> {
    seconds_since_ts(parse_ts(s))
}

fn seconds_since_ts(t: Option<jiff::Timestamp>) -> Option<f64> {
    t.map(|t| {
        jiff::Timestamp::now()
            .duration_since(t)
            .as_secs_f64()
            .max(0.0)
    })
}

fn node_ref(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.into()),
        ..Default::default()
    }
}

impl Fencer {
    /// `view` must watch nodes, Leases and StorageClasses (`Needs::controller(true)`).
    pub fn new(
        view: View,
        writer: crate::state::Writer,
        cfg: FencingConfig,
        metrics: Arc<metrics::FencingMetrics>,
    ) -> Arc<Fencer> {
        Arc::new(Fencer {
            cfg,
            records: Records::new(view, writer),
            metrics,
            clock: observe::LeaseClock::default(),
            drivers: Mutex::default(),
            held: Mutex::default(),
            asked: Mutex::default(),
        })
    }

    fn view(&self) -> &View {
        &self.records.view
    }

    /// Look every `interval`: resume open incidents, open new ones (until the task is dropped).
    pub async fn run(self: Arc<Self>) {
        loop {
            if let Err(e) = self.clone().tick().await {
                tracing::warn!(error = %e, "fencing: could not read the cluster; retrying");
            }
            tokio::time::sleep(self.cfg.interval).await;
        }
    }

    /// Stop every incident's driver (leadership lost or shutdown): the incidents stay recorded
    /// and the next leader resumes them.
    pub fn stop(&self) {
        for (_, d) in lock(&self.drivers).drain() {
            d.abort();
        }
    }
}

fn tainted(n: &Node) -> bool {
    n.is_out_of_service()
}

/// A person's confirmation on the Node, as the proof reader finds it (the taint beside it was
/// judged by the webhook; this only records who). Break glass off is the webhook's to refuse.
fn confirmation(n: &Node) -> Read {
    Reader::new(BreakGlass::Anyone).read(&n.metadata, Key::ConfirmNodeDown)
}

fn confirmed(n: &Node) -> bool {
    confirmation(n) != Read::Absent
}
