//! Whether one admission decision touched the cluster view (a cache lookup, a live read, a
//! write, an authorizer question). An answer "allowed, no patch, no warning" given without
//! touching it depended on the request alone: a `matchCondition` or a CEL policy could have given
//! it inside the apiserver, without the call (`volguard_admission_unread_answers_total`).
//!
//! Every read passes through `View` and every write through `Writer::apply`, which bump a
//! per-thread count; a `Mark` taken before the decision and read after it says whether the count
//! moved. Tasks with no mark (the audit trail's writes) bump it too: they can only make a decision
//! that yielded look as if it read, and one that yielded had read already. A decision that awaits nothing runs
//! from start to end on one thread with no other task in between: the count is exactly its own.
//! One that awaits something awaits a read or write of its own (the decision's only awaits), so it
//! counts as having read, which is the truth; one that resumed on another thread counts so too.
//! Wrapping each decision in a future that counts poll by poll cost ~550 instructions per request
//! and a tokio task-local ~1,200 (`make profile`, the decision's future moved once more); this
//! costs two thread-local reads.

use std::cell::Cell;

thread_local! {
    static READS: Cell<u64> = const { Cell::new(0) };
}

/// The count as it was at one moment, on one thread.
pub struct Mark {
    thread: usize,
    reads: u64,
}

/// Where this thread's count stands.
pub fn mark() -> Mark {
    READS.with(|n| Mark {
        thread: std::ptr::from_ref(n) as usize,
        reads: n.get(),
    })
}

impl Mark {
    /// Whether no read was made since the mark: on the same thread, with the count unmoved.
    pub fn nothing_read_since(&self) -> bool {
        READS.with(|n| std::ptr::from_ref(n) as usize == self.thread && n.get() == self.reads)
    }
}

/// One read of the cluster view.
pub(super) fn note() {
    READS.with(|n| n.set(n.get().wrapping_add(1)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_sees_the_reads_made_after_it_on_its_thread() {
        note();
        let m = mark();
        assert!(m.nothing_read_since());
        note();
        assert!(!m.nothing_read_since());
    }

    #[test]
    fn a_mark_read_on_another_thread_counts_as_read() {
        let m = mark();
        let other = std::thread::spawn(move || m.nothing_read_since())
            .join()
            .expect("thread");
        assert!(!other, "another thread's count says nothing of this one's");
    }
}
