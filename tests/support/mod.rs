//! What the test files share (a file uses it with `mod support;`): `serve` and `tls_client` for
//! the tests of `volguard serve` alone (fixtures, server, abuse); for those that run a real
//! control plane (`tests/e2e.rs`, `tests/cluster.rs`, `tests/partition.rs`, `tests/chaos.rs`;
//! `benches/bench.rs` borrows the harness), `harness` starts etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, kwok, cert-manager and volguard, `objects` the objects
//! users write, `apiserver` what the apiserver measures, `shared` one cluster per file.
#![allow(dead_code)]

pub mod apiserver;
pub mod harness;
pub mod nodes;
pub mod objects;
pub mod records;
pub mod serve;
pub mod shared;
pub mod tls_client;
pub mod workload;
