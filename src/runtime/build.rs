//! What this binary is: version, commit and commit date (from `build.rs`), for `volguard version`
//! and the `volguard_build_info` series every job exports.

use super::MetricsRegistry;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const COMMIT: &str = env!("VOLGUARD_COMMIT");
pub const COMMIT_DATE: &str = env!("VOLGUARD_COMMIT_DATE");

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
    commit_date: &'static str,
}

/// `volguard_build_info{version,commit,commit_date} 1`, the conventional way to join a build's
/// identity onto other series (`* on(instance) group_left(version) volguard_build_info`).
pub fn register(r: &MetricsRegistry) {
    let info = Family::<BuildLabels, Gauge>::default();
    info.get_or_create(&BuildLabels {
        version: VERSION,
        commit: COMMIT,
        commit_date: COMMIT_DATE,
    })
    .set(1);
    r.register(
        "volguard_build_info",
        "volguard's version, commit and commit date (always 1)",
        info,
    );
}

/// `volguard version`.
pub fn describe() -> String {
    format!("volguard {VERSION} (commit {COMMIT}, {COMMIT_DATE})")
}
