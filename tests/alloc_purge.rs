//! `volguard::alloc::purge_while_idle`: what a burst freed goes back to the OS while every thread
//! idles. mimalloc alone keeps it (no later page free or allocation carries out its scheduled
//! purge); with the task running, the process's RSS falls back within a few periods. One test in
//! its own binary: RSS is the whole process's. Assumes mimalloc's default purge delay (not run with
//! `MIMALLOC_PURGE_DELAY=0` in the environment).

#[global_allocator]
static ALLOC: volguard::alloc::Allocator = volguard::alloc::Allocator;

use std::io::Read;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
/// What the burst allocates: a LIST page's decode at size, many small strings.
const BURST: u64 = 256 * MIB;

/// VmRSS without allocating (an allocation could itself trigger mimalloc's purge).
fn rss() -> u64 {
    let mut buf = [0u8; 4096];
    let n = std::fs::File::open("/proc/self/status")
        .and_then(|mut f| f.read(&mut buf))
        .expect("read /proc/self/status");
    let text = std::str::from_utf8(&buf[..n]).expect("status is text");
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS");
    kib * 1024
}

#[test]
fn a_burst_freed_while_threads_idle_goes_back_to_the_os_only_with_the_purge_task() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let base = rss();
    rt.block_on(async {
        tokio::spawn(async {
            let strings: Vec<String> = (0..BURST / 128).map(|i| format!("{i:0>100}")).collect();
            std::hint::black_box(&strings);
        })
        .await
        .expect("burst");
    });
    let peak = rss();
    assert!(
        peak > base + BURST / 2,
        "the burst was resident: {} MiB over {} MiB",
        (peak - base) / MIB,
        base / MIB
    );
    // Every thread idle: mimalloc alone hands nothing back.
    std::thread::sleep(volguard::alloc::PURGE_PERIOD * 3);
    let idle = rss();
    assert!(
        idle > base + BURST / 2,
        "without the task mimalloc kept the burst ({} MiB over base): if it no longer does, the task is not needed",
        idle.saturating_sub(base) / MIB
    );
    rt.spawn(volguard::alloc::purge_while_idle());
    let started = Instant::now();
    loop {
        let now = rss();
        if now < base + BURST / 8 {
            break;
        }
        assert!(
            started.elapsed() < volguard::alloc::PURGE_PERIOD * 10,
            "the task did not hand the burst back: {} MiB over base after {:?}",
            now.saturating_sub(base) / MIB,
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
