//! The read-only cluster view the rules consume: in-memory stores of pruned objects, filled
//! either from a `--state` file (offline) or by watches on a live cluster.

pub mod claim_index;
pub mod cluster;
pub mod decoded;
pub mod live;
pub mod loader;
pub mod store;
pub mod writer;

pub use cluster::Cluster;
pub use store::{Object, ObjectMap, Store};
