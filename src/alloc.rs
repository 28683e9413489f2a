//! The process allocator. Every admission request decodes dozens of small strings; with the
//! system allocator (glibc here, musl in the static image) malloc and free were a quarter of a
//! request's instructions, against a few percent with mimalloc.

pub use mimalloc::MiMalloc as Allocator;

/// Return the pages a bulk load freed (the text of a 200 MB state file) to the OS now. mimalloc
/// purges freed pages lazily, on later allocations in the same thread, which after a load may
/// never come: the RSS would stay at the load's peak.
pub fn release_free_memory() {
    // SAFETY: `mi_collect` only walks mimalloc's own heaps and is callable at any time; when
    // mimalloc is not the global allocator (tests, benchmarks) it has nothing to do.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
