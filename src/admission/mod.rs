//! AdmissionReview v1 in and out, and the dispatch of each request to its rule.

pub mod break_glass;
mod context;
pub mod dispatch;
pub mod encode;
mod facts;
mod nodes;
mod objects;
mod placement;
mod proofs;
pub mod review;

pub use context::{Admission, LockLabels, lock_write_histogram};
pub use dispatch::Endpoint;
pub use encode::encode;
pub use review::{Request, decode};
