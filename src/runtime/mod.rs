//! What every long-running job shares, and nothing about storage: the metrics registry, the
//! plain-HTTP probe server (`/healthz`, `/readyz`, `/metrics`), shutdown on SIGTERM/SIGINT, and
//! the Kubernetes client and cluster view, and the one "seen since" clock. `serve`, `controller`,
//! `report` and `explain` build on it; each registers only its own metrics.

pub mod build;
pub mod flags;
pub mod identity;
pub mod kube;
pub mod probes;
pub mod process;
pub mod rate_limit;
pub mod registry;
pub mod seen;
pub mod shutdown;

pub use registry::MetricsRegistry;
pub use shutdown::shutdown_signal;
