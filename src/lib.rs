//! volguard: keeps Kubernetes storage from being lost by accident.
//!
//! - `rules`: the pure decisions of docs/rules.md (no I/O), shared by webhook and controller.
//! - `model`: pruned Kubernetes objects the rules read (and volguard's own: NodeFence,
//!   AuditReport).
//! - `state`: every read and write of the cluster (state file or live watches, live and quorum
//!   reads, the writer): the one way in.
//! - `admission`: AdmissionReview v1 decode/encode, the facts each rule needs, dispatch to rules.
//! - `server`: TLS, HTTP, admission metrics.
//! - `runtime`: what every job shares: metrics registry, probes, shutdown, Kubernetes client.
//! - `controller`: the reconcile loop (queue, leader election, patches, events, the
//!   registration watch).
//! - `fencing`: partition healing (detect, fence through a backend, release on proof).
//! - `registration`: the webhook and CEL policy registrations generated from the rule table,
//!   and their drift.
//! - `explain`, `report`: the operator's commands (`explain pvc|pv|pod|node`, `report unused`).
//! - `cli`: the command line, assembled from each job's own `args` (nothing below it imports it);
//!   `devcerts`: the dev CA for `make run`; `error`: typed errors; `alloc`: the global allocator.

pub use volguard_core::{model, rules};

pub mod admission;
pub mod alloc;
pub mod cli;
pub mod controller;
pub mod devcerts;
pub mod error;
pub mod explain;
pub mod fencing;
pub mod lock_hold;
pub mod registration;
pub mod report;
pub mod runtime;
pub mod server;
pub mod state;
