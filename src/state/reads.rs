//! How many times one admission decision touched the cluster view (a cache lookup, a live read,
//! a write, an authorizer question). An answer "allowed, no patch, no warning" given without
//! touching it depended on the request alone: a `matchCondition` or a CEL policy could have given
//! it inside the apiserver, without the call (`volguard_admission_unread_answers_total`).
//!
//! A task-local rather than a counter threaded through every gatherer: the count is accounting,
//! as a span's fields are, and every read already passes through `Cluster`, which alone notes
//! it. A read made outside `counted` (the controller, `explain`) notes nothing.

use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static READS: Cell<u32>;
}

/// Run `f`, counting the reads it makes of the cluster view.
pub async fn counted<F: Future>(f: F) -> (F::Output, u32) {
    READS
        .scope(Cell::new(0), async move {
            let out = f.await;
            (out, READS.with(Cell::get))
        })
        .await
}

/// One read of the cluster view, counted when made inside `counted`.
pub(super) fn note() {
    let _ = READS.try_with(|n| n.set(n.get().saturating_add(1)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_the_reads_made_inside_and_only_those() {
        note();
        let ((), n) = counted(async {
            note();
            tokio::task::yield_now().await;
            note();
        })
        .await;
        assert_eq!(n, 2);
        let ((), n) = counted(async {}).await;
        assert_eq!(n, 0);
    }
}
