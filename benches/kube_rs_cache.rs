//! The objects volguard caches, cached the way kube-rs's documentation caches them: a
//! `reflector` per collection (pods, claims, volumes, nodes) over a `watcher`, full k8s-openapi
//! objects in `Store`s. `make bench-scale` reads its RSS beside volguard's (bytes per object).
//!
//! Usage: kube_rs_cache --kubeconfig FILE (prints `synced N` once every store is ready).

#[path = "reflect.rs"]
mod reflect;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use reflect::reflect;

/// The same allocator as `volguard`: the comparison is of the caches, not the allocators.
#[global_allocator]
static ALLOC: volguard::alloc::Allocator = volguard::alloc::Allocator;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let kubeconfig = args
        .iter()
        .position(|a| a == "--kubeconfig")
        .and_then(|i| args.get(i + 1))
        .ok_or_else(|| anyhow::anyhow!("missing --kubeconfig"))?;
    let client = volguard::runtime::kube::client(Some(std::path::Path::new(kubeconfig))).await?;
    // Whole objects: the peer as its documentation's reflector runs it.
    let pods = reflect(Api::<Pod>::all(client.clone()), |_| {});
    let pvcs = reflect(Api::<PersistentVolumeClaim>::all(client.clone()), |_| {});
    let pvs = reflect(Api::<PersistentVolume>::all(client.clone()), |_| {});
    let nodes = reflect(Api::<Node>::all(client.clone()), |_| {});
    pods.wait_until_ready().await?;
    pvcs.wait_until_ready().await?;
    pvs.wait_until_ready().await?;
    nodes.wait_until_ready().await?;
    let n = pods.state().len() + pvcs.state().len() + pvs.state().len() + nodes.state().len();
    println!("synced {n}");
    std::future::pending::<()>().await;
    Ok(())
}
