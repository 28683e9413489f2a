//! Shared support of the tests that run a real control plane (`tests/e2e.rs`, `tests/cluster.rs`,
//! `tests/chaos.rs`; `benches/bench.rs` borrows the harness): start etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, kwok, cert-manager and volguard; the objects users
//! write; what volguard's metrics say. A test file uses it with `mod support;`.
#![allow(dead_code)]

pub mod apiserver;
pub mod harness;
pub mod objects;
pub mod shared;
pub mod workload;
