//! volguard's core: the pure decisions of docs/rules.md and the objects they read. No I/O, no
//! Kubernetes client, no async runtime, no command line: that purity is this crate's dependency
//! list, checked by the compiler (the main crate re-exports both modules as `volguard::rules` and
//! `volguard::model`).
//!
//! - `rules`: one file per rule family, the rule table, the proof reader, upstream's ports.
//! - `model`: pruned Kubernetes objects the rules read (and volguard's own: NodeFence,
//!   AuditReport).

pub mod model;
pub mod rules;
