//! Cache bytes per object as the allocator holds them: every live block counted at its size
//! class (`mi_usable_size`), not at the size asked for. `make bench`'s cache rows count the bytes
//! asked for, which hides what mimalloc's classes round up (a 392-byte `Arc<Pod>` takes a
//! 448-byte block); this is what the caches add to RSS before page-level overhead.
//! `cargo run --release --example cache_bytes [N]` (default 100,000 of each kind).

// Shared with `make bench`, which uses all of it.
#[allow(dead_code)]
mod synth;

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, Ordering};
use volguard::alloc::Allocator;

/// Bytes held by live blocks (their size class) and bytes asked for.
static HELD: AtomicIsize = AtomicIsize::new(0);
static ASKED: AtomicIsize = AtomicIsize::new(0);
static BLOCKS: AtomicIsize = AtomicIsize::new(0);

struct Held;

/// Count a fresh block (if the allocation succeeded).
fn counted(p: *mut u8, l: Layout) -> *mut u8 {
    if !p.is_null() {
        HELD.fetch_add(usable(p), Ordering::Relaxed);
        ASKED.fetch_add(l.size() as isize, Ordering::Relaxed);
        BLOCKS.fetch_add(1, Ordering::Relaxed);
    }
    p
}

fn usable(p: *mut u8) -> isize {
    // SAFETY: `p` is a live block of this allocator.
    unsafe { libmimalloc_sys::mi_usable_size(p as *const _) as isize }
}

// SAFETY: forwards to volguard's allocator under GlobalAlloc's contract; only counts around it.
unsafe impl GlobalAlloc for Held {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        counted(unsafe { Allocator.alloc(l) }, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        counted(unsafe { Allocator.alloc_zeroed(l) }, l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        HELD.fetch_sub(usable(p), Ordering::Relaxed);
        ASKED.fetch_sub(l.size() as isize, Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        unsafe { Allocator.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let old = usable(p);
        let q = unsafe { Allocator.realloc(p, l, new) };
        if !q.is_null() {
            HELD.fetch_add(usable(q) - old, Ordering::Relaxed);
            ASKED.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Held = Held;

fn counts() -> [isize; 3] {
    [&HELD, &ASKED, &BLOCKS].map(|c| c.load(Ordering::Relaxed))
}

/// An object as the cluster sends it: a real uid (36 characters) in place of synth's short one.
fn with_uid(mut v: serde_json::Value, i: usize, kind: u8) -> serde_json::Value {
    v["metadata"]["uid"] = format!("{kind:08x}-0000-4000-8000-{i:012x}").into();
    v
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let store = volguard::state::Store::default();
    println!("| kind | held B/object (size classes) | asked B/object | blocks/object |");
    println!("|---|---|---|---|");
    let row = |kind: &str, load: &mut dyn FnMut(usize)| {
        let before = counts();
        for i in 0..n {
            load(i);
        }
        let after = counts();
        let per = |k: usize| (after[k] - before[k]) as f64 / n as f64;
        println!("| {kind} | {:.0} | {:.0} | {:.2} |", per(0), per(1), per(2));
    };
    row("Pod (one claim)", &mut |i| {
        let v = synth::pod(
            &format!("db-{i}"),
            &synth::ns(i),
            &format!("node-{}", i % 5000),
            &[format!("data-{i}")],
        );
        let p: volguard::model::Pod =
            serde_json::from_value(with_uid(v, i, 1)).expect("synthetic pod");
        store.claims.add(&p);
        store.pods.apply(p);
    });
    row("PersistentVolumeClaim", &mut |i| {
        let c = serde_json::from_value(with_uid(synth::pvc(i), i, 2)).expect("synthetic claim");
        store.pvcs.apply(c);
    });
    row("PersistentVolume", &mut |i| {
        let v = serde_json::from_value(with_uid(synth::pv(i), i, 3)).expect("synthetic volume");
        store.pvs.apply(v);
    });
    row("Node", &mut |i| {
        let v = serde_json::from_value(with_uid(synth::node(i), i, 4)).expect("synthetic node");
        store.nodes.apply(v);
    });
    std::hint::black_box(&store);
}
