//! The process allocator. Every admission request decodes dozens of small strings; with the
//! system allocator (glibc here, musl in the static image) malloc and free were a quarter of a
//! request's instructions, against a few percent with mimalloc.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;
use std::time::Duration;

/// mimalloc, asked through its plain entry points when Rust's alignment is one every mimalloc
/// block has anyway (8 bytes: blocks are word multiples on aligned pages). The `mimalloc` crate
/// asks `mi_malloc_aligned` for everything; in mimalloc v3 that falls back to over-allocation
/// (size + align − 1, the next size class up) for a size that is not a power of two whenever its
/// size class has no free block at hand. Measured with `make bench`'s 100k-PVC state: serve's RSS
/// after loading it 171 → 161 MB; `make profile`'s RWO bind 44,428 → 43,545 instructions per
/// review, its 2,000-PVC setup 818 M → 796 M.
pub struct Allocator;

/// What every mimalloc block is aligned to (`MI_INTPTR_SIZE`).
const WORD: usize = std::mem::size_of::<usize>();

// SAFETY: the plain entry points are used only when the layout asks for no more than word
// alignment, which every mimalloc block has; anything else goes to the `mimalloc` crate.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= WORD {
            // SAFETY: FFI call with a size from a valid Layout.
            unsafe { mi::mi_malloc(layout.size()) as *mut u8 }
        } else {
            // SAFETY: forwarded under GlobalAlloc's own contract.
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= WORD {
            // SAFETY: as in `alloc`.
            unsafe { mi::mi_zalloc(layout.size()) as *mut u8 }
        } else {
            // SAFETY: as in `alloc`.
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (GlobalAlloc's contract); mi_free frees any block.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= WORD {
            // SAFETY: `ptr` came from this allocator with `layout` (GlobalAlloc's contract).
            unsafe { mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8 }
        } else {
            // SAFETY: as above.
            unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

/// Return the pages a bulk load freed (the text of a 200 MB state file) to the OS now. mimalloc
/// purges freed pages lazily, on later allocations in the same thread, which after a load may
/// never come: the RSS would stay at the load's peak.
pub fn release_free_memory() {
    // SAFETY: `mi_collect` only walks mimalloc's own heaps and is callable at any time; when
    // mimalloc is not the global allocator (tests, benchmarks) it has nothing to do.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// How often a long-running process hands back what it freed (`purge_while_idle`): mimalloc's own
/// purge delay, so memory freed in a burst is back with the OS within two of them.
pub const PURGE_PERIOD: Duration = Duration::from_secs(1);

/// Hand back to the OS, once a `PURGE_PERIOD`, the memory mimalloc freed and still holds. mimalloc
/// schedules a freed range's purge (an arena's deadline, set by its first pending free) and
/// carries it out only on a later page free or allocation path; a server whose threads idle after
/// a burst (a cold start's LIST pages, a churn's watch events and reviews) keeps the burst's pages
/// resident until the next burst. Each tick carries out, program-wide, the purges whose arena
/// deadline has passed (not forced: what mimalloc itself would do at its next page free) and frees
/// the empty pages of the worker it runs on; other workers' retired pages stay theirs. Not
/// `MIMALLOC_PURGE_DELAY=0`, which purges at every free: its CPU cost was measured
/// (docs/performance.md); this is one collect a second (its cost: the same page, "The twelfth run").
pub async fn purge_while_idle() {
    let mut tick = tokio::time::interval(PURGE_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // SAFETY: as in `release_free_memory`; not forced: only purges already due.
        unsafe { libmimalloc_sys::mi_collect(false) }
    }
}
