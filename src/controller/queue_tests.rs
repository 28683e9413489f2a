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

/// An idle worker asleep on an empty queue wakes when a waiting key falls due: no task carries
/// the key, the worker's own sleep does.
#[tokio::test(start_paused = true)]
async fn a_waiting_worker_wakes_at_the_deadline() {
    let q = Queue::new(Backoff::default());
    let worker = {
        let q = q.clone();
        tokio::spawn(async move { (q.next().await, tokio::time::Instant::now()) })
    };
    let start = tokio::time::Instant::now();
    tokio::task::yield_now().await;
    q.add_after("k", Duration::from_secs(5));
    let (key, at) = worker.await.expect("worker");
    assert_eq!(key, Some("k"));
    assert_eq!(
        at - start,
        Duration::from_secs(5),
        "taken when due, not before"
    );
}

/// A worker asleep toward a later deadline is woken by an earlier one and takes it first.
#[tokio::test(start_paused = true)]
async fn an_earlier_deadline_rearms_a_sleeping_worker() {
    let q = Queue::new(Backoff::default());
    q.add_after("late", Duration::from_secs(60));
    let worker = {
        let q = q.clone();
        tokio::spawn(async move { (q.next().await, tokio::time::Instant::now()) })
    };
    let start = tokio::time::Instant::now();
    tokio::task::yield_now().await;
    q.add_after("soon", Duration::from_secs(1));
    let (key, at) = worker.await.expect("worker");
    assert_eq!(key, Some("soon"));
    assert_eq!(at - start, Duration::from_secs(1));
    assert_eq!(
        q.next().await,
        Some("late"),
        "the later key is still waiting"
    );
    assert_eq!(tokio::time::Instant::now() - start, Duration::from_secs(60));
}

/// Shutting down wakes a worker asleep toward a deadline.
#[tokio::test(start_paused = true)]
async fn shut_down_wakes_a_worker_waiting_for_a_deadline() {
    let q = Queue::new(Backoff::default());
    q.add_after("k", Duration::from_secs(3600));
    let worker = {
        let q = q.clone();
        tokio::spawn(async move { q.next().await })
    };
    tokio::task::yield_now().await;
    q.shut_down();
    assert_eq!(worker.await.expect("worker"), None);
}

/// A batch taken by `take_matching` includes keys whose deadline has passed.
#[tokio::test(start_paused = true)]
async fn take_matching_sees_keys_whose_deadline_passed() {
    let q = Queue::new(Backoff::default());
    q.add_after("ns1/a".to_string(), Duration::from_secs(2));
    q.add("ns1/b".to_string());
    tokio::time::advance(Duration::from_secs(3)).await;
    let mut batch = q.take_matching(|k| k.starts_with("ns1/"), 10);
    batch.sort();
    assert_eq!(batch, vec!["ns1/a".to_string(), "ns1/b".to_string()]);
}

/// Waiting keys cost no task each: ten thousand of them leave the runtime's task count alone.
#[tokio::test(start_paused = true)]
async fn add_after_spawns_no_task() {
    let q: Arc<Queue<u32>> = Queue::new(Backoff::default());
    let before = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    for k in 0..10_000 {
        q.add_after(k, Duration::from_secs(60 + u64::from(k % 7)));
    }
    assert_eq!(
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        before
    );
    tokio::time::advance(Duration::from_secs(70)).await;
    assert_eq!(q.len(), 10_000, "every waiting key added once due");
}

/// A key due while it is being processed is processed again afterwards, once.
#[tokio::test(start_paused = true)]
async fn a_key_due_while_processing_runs_again_after_done() {
    let q = Queue::new(Backoff::default());
    q.add("k");
    assert_eq!(q.next().await, Some("k"));
    q.add_after("k", Duration::from_secs(1));
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(q.len(), 0, "not ready twice while processing");
    q.done(&"k");
    assert_eq!(q.len(), 1);
}
