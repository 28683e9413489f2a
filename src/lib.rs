//! volguard: keeps Kubernetes storage from being lost by accident.
//!
//! - `rules`: the pure decisions of docs/rules.md (no I/O), shared by webhook and controller.
//! - `model`: pruned Kubernetes objects the rules read.
//! - `state`: the cluster view (state file or live watches).
//! - `admission`: AdmissionReview v1 decode/encode and dispatch to rules.
//! - `server`: TLS, HTTP, admission metrics.
//! - `runtime`: what every job shares: metrics registry, probes, shutdown, Kubernetes client.
//! - `controller`: the reconcile loop (queue, leader election, patches, events).

pub mod admission;
pub mod alloc;
pub mod cli;
pub mod controller;
pub mod devcerts;
pub mod error;
pub mod explain;
pub mod fencing;
pub mod model;
pub mod registration;
pub mod report;
pub mod rules;
pub mod runtime;
pub mod server;
pub mod state;
