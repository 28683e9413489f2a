//! AdmissionReview v1 in and out, and the dispatch of each request to its rule.

pub mod dispatch;
pub mod review;

pub use dispatch::{Admission, Endpoint};
pub use review::{Request, decode, encode};
