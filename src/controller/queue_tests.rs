//! Unit tests of `src/controller/queue.rs`.

use super::*;

#[tokio::test]
async fn dedupes_and_reprocesses_dirty_keys() {
    let q = Queue::new(Backoff::default());
    q.add("a");
    q.add("a");
    q.add("b");
    assert_eq!(q.len(), 2);
    let k = q.next().await;
    assert_eq!(k, Some("a"));
    q.add("a"); // while processing: dirty, not queued twice
    assert_eq!(q.len(), 1);
    q.done(&"a");
    assert_eq!(q.len(), 2, "dirty key re-queued after done");
}

#[test]
fn backoff_grows_and_caps() {
    let b = Backoff {
        base: Duration::from_millis(100),
        max: Duration::from_secs(1),
    };
    assert_eq!(b.delay(1), Duration::from_millis(100));
    assert_eq!(b.delay(2), Duration::from_millis(200));
    assert_eq!(b.delay(4), Duration::from_millis(800));
    assert_eq!(b.delay(5), Duration::from_secs(1));
    assert_eq!(b.delay(50), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn rate_limited_add_waits_and_forget_resets() {
    let q = Queue::new(Backoff {
        base: Duration::from_secs(1),
        max: Duration::from_secs(60),
    });
    q.add_rate_limited("k");
    q.add_rate_limited("k");
    assert_eq!(q.failures(&"k"), 2);
    assert!(q.is_empty());
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(q.len(), 1);
    q.forget(&"k");
    assert_eq!(q.failures(&"k"), 0);
}

#[tokio::test]
async fn take_matching_batches() {
    let q = Queue::new(Backoff::default());
    for k in ["ns1/a", "ns2/b", "ns1/c"] {
        q.add(k.to_string());
    }
    let batch = q.take_matching(|k| k.starts_with("ns1/"), 10);
    assert_eq!(batch, vec!["ns1/a".to_string(), "ns1/c".to_string()]);
    assert_eq!(q.len(), 1);
}

#[tokio::test]
async fn empty_queue_waits_without_spinning() {
    let q: Arc<Queue<u32>> = Queue::new(Backoff::default());
    let r = tokio::time::timeout(Duration::from_millis(50), q.next()).await;
    assert!(r.is_err(), "next() must wait on an empty queue");
    q.shut_down();
    assert_eq!(q.next().await, None);
}

#[tokio::test]
async fn a_drained_queue_gives_back_a_relists_capacity() {
    let q: Arc<Queue<u32>> = Queue::new(Backoff::default());
    for k in 0..100_000 {
        q.add(k);
    }
    assert!(q.lock().ready.capacity() >= 100_000);
    while !q.is_empty() {
        let k = q.next().await.expect("a key");
        q.done(&k);
    }
    let inner = q.lock();
    assert!(
        inner.ready.capacity() <= 2 * KEEP_CAPACITY,
        "{}",
        inner.ready.capacity()
    );
    assert!(
        inner.queued.capacity() <= 2 * KEEP_CAPACITY,
        "{}",
        inner.queued.capacity()
    );
}

/// A key waits once, for the earliest deadline asked: a later one adds no timer, an earlier one
/// takes over (the earlier timer's key is not added twice).
#[tokio::test(start_paused = true)]
async fn add_after_waits_once_for_the_earliest_deadline() {
    let q = Queue::new(Backoff::default());
    q.add_after("k", Duration::from_secs(10));
    q.add_after("k", Duration::from_secs(20));
    q.add_after("k", Duration::from_secs(5));
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(q.len(), 0, "nothing before the earliest deadline");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(q.len(), 1, "added at 5 s");
    assert_eq!(q.next().await, Some("k"));
    q.done(&"k");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(q.len(), 0, "the 10 s and 20 s asks added nothing more");
}
