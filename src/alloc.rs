//! The process allocator. Every admission request decodes dozens of small strings; with the
//! system allocator (glibc here, musl in the static image) malloc and free were a quarter of a
//! request's instructions, against a few percent with mimalloc.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

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

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_e` (libmimalloc-sys names no constant for
/// it; a unit test checks the index against the option's documented default).
const PURGE_DELAY: mi::mi_option_t = 15;

/// The environment variable mimalloc itself reads for the same option; an operator's value wins.
pub const PURGE_DELAY_ENV: &str = "MIMALLOC_PURGE_DELAY";

/// Purge freed pages at once instead of after mimalloc v3's default 1 s, checked only on a later
/// allocation by the same thread: a process that loaded a cluster's initial LISTs kept those
/// buffers' pages resident while its threads idled. Measured (`make bench-scale`, 300 nodes): a
/// cold serve settles at 69.8 MiB instead of 102.2, a cold controller at 70.2 instead of 90.5.
/// Cost on the hot path: none measured — 20,000 pod reviews through the router add zero
/// `madvise` calls at either setting (strace over `benches/handler.rs`; mimalloc keeps pages it
/// will reuse), the purges happen after bulk frees.
pub fn configure() {
    if std::env::var_os(PURGE_DELAY_ENV).is_none() {
        // SAFETY: sets one of mimalloc's global options; valid at any time.
        unsafe { mi::mi_option_set(PURGE_DELAY, 0) }
    }
}

/// The purge delay mimalloc runs with (ms).
pub fn purge_delay() -> std::ffi::c_long {
    // SAFETY: reads one of mimalloc's global options.
    unsafe { mi::mi_option_get(PURGE_DELAY) }
}

/// Return the pages a bulk load freed (the text of a 200 MB state file) to the OS now. mimalloc
/// purges freed pages lazily, on later allocations in the same thread, which after a load may
/// never come: the RSS would stay at the load's peak.
pub fn release_free_memory() {
    // SAFETY: `mi_collect` only walks mimalloc's own heaps and is callable at any time; when
    // mimalloc is not the global allocator (tests, benchmarks) it has nothing to do.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

#[cfg(test)]
mod tests {
    /// The option index is the purge delay's: its default in mimalloc v3 is 1000 ms, and
    /// `configure` sets it to 0 unless the environment chose a value.
    #[test]
    fn purge_delay_index_and_configure() {
        match std::env::var(super::PURGE_DELAY_ENV) {
            // The operator's value is mimalloc's, and `configure` keeps it.
            Ok(v) => {
                super::configure();
                assert_eq!(super::purge_delay().to_string(), v.trim());
            }
            Err(_) => {
                assert_eq!(
                    super::purge_delay(),
                    1000,
                    "option 15 is not mimalloc's purge_delay"
                );
                super::configure();
                assert_eq!(super::purge_delay(), 0);
            }
        }
    }
}
