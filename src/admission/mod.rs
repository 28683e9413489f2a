//! AdmissionReview v1 in and out, and the dispatch of each request to its rule.

pub mod break_glass;
mod context;
pub mod dispatch;
pub mod encode;
mod facts;
mod nodes;
mod objects;
mod proofs;
pub mod review;
mod rwo_lock;

pub use context::Admission;
pub use dispatch::Endpoint;
pub use encode::encode;
pub use review::{Request, decode};
pub use rwo_lock::{LockLabels, RwoLocks, lock_write_histogram};
