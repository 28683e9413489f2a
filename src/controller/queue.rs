//! A work queue in the manner of client-go's: a key is queued at most once, a key being processed
//! and re-added is processed again afterwards (never twice at once), failures back off
//! exponentially per key, and an empty queue sleeps instead of spinning. A key asked for later
//! (`add_after`) waits in a timer table the idle workers sleep on: no task per waiting key.
//!
//! Why not kube-runtime's `Controller`: it reconciles one object per call, while releasing a
//! terminating PVC must be proven by a consistent pod LIST, and one such LIST per namespace per
//! batch (not per PVC) is what keeps the API cost at kube-controller-manager's level (see the
//! docs/performance.md: 1.06 requests per released PVC). `Controller` has no batching.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(200),
            max: Duration::from_secs(120),
        }
    }
}

impl Backoff {
    /// Delay before retry number `failures` (1-based): base·2^(failures-1), capped.
    pub fn delay(&self, failures: u32) -> Duration {
        let exp = failures.saturating_sub(1).min(20);
        self.base.saturating_mul(1u32 << exp).min(self.max)
    }
}

struct Inner<K> {
    ready: VecDeque<K>,
    queued: HashSet<K>,
    processing: HashSet<K>,
    dirty: HashSet<K>,
    failures: HashMap<K, u32>,
    /// Keys waiting to be added (`add_after`): each one's deadline and its timer's number...
    waiting: HashMap<K, (tokio::time::Instant, u64)>,
    /// ...and the same keys by deadline (the number orders equal deadlines): what an idle worker
    /// sleeps until.
    timers: BTreeMap<(tokio::time::Instant, u64), K>,
    next_timer: u64,
    shut_down: bool,
}

/// Capacity a drained queue keeps: enough for the steady state's changes without regrowing.
const KEEP_CAPACITY: usize = 1024;

impl<K: Clone + Eq + Hash> Inner<K> {
    /// `add` under the lock: dirty while processing, else ready unless already queued. Whether
    /// it was made ready.
    fn enqueue(&mut self, key: K) -> bool {
        if self.processing.contains(&key) {
            self.dirty.insert(key);
            return false;
        }
        if self.queued.insert(key.clone()) {
            self.ready.push_back(key);
            return true;
        }
        false
    }

    /// Every waiting key whose deadline has passed, added. How many were made ready.
    fn promote(&mut self, now: tokio::time::Instant) -> usize {
        let mut made = 0;
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.waiting.remove(&key);
            made += usize::from(self.enqueue(key));
        }
        made
    }

    fn next_due(&self) -> Option<tokio::time::Instant> {
        self.timers.first_key_value().map(|(at, _)| at.0)
    }

    /// A relist enqueues every claim and volume at once (138,000 keys at 69,000 pods), and the
    /// deque and set keep that capacity after draining: ~24 MiB (256 Ki slots of a 48-byte key
    /// each, twice) held for nothing. Give it back once the queue is empty.
    fn shrink_if_drained(&mut self) {
        if self.ready.is_empty() && self.ready.capacity() > KEEP_CAPACITY {
            self.ready.shrink_to(KEEP_CAPACITY);
            self.queued.shrink_to(KEEP_CAPACITY);
        }
    }
}

pub struct Queue<K> {
    inner: Mutex<Inner<K>>,
    notify: Notify,
    backoff: Backoff,
}

impl<K: Clone + Eq + Hash + Send + 'static> Queue<K> {
    pub fn new(backoff: Backoff) -> Arc<Self> {
        Arc::new(Queue {
            inner: Mutex::new(Inner {
                ready: VecDeque::new(),
                queued: HashSet::new(),
                processing: HashSet::new(),
                dirty: HashSet::new(),
                failures: HashMap::new(),
                waiting: HashMap::new(),
                timers: BTreeMap::new(),
                next_timer: 0,
                shut_down: false,
            }),
            notify: Notify::new(),
            backoff,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn add(&self, key: K) {
        let mut q = self.lock();
        if q.shut_down {
            return;
        }
        if q.enqueue(key) {
            drop(q);
            self.notify.notify_one();
        }
    }

    /// Re-add after this key's backoff; the failure count grows until `forget`.
    pub fn add_rate_limited(&self, key: K) {
        let failures = {
            let mut q = self.lock();
            let f = q.failures.entry(key.clone()).or_insert(0);
            *f += 1;
            *f
        };
        let delay = self.backoff.delay(failures);
        self.add_after(key, delay);
    }

    /// Add `key` once `delay` has passed (client-go's `AddAfter`, kube-runtime's
    /// `Action::requeue`): the one place a key waits; a key already waiting for a deadline no
    /// later than this one is not given a second timer, and an earlier deadline replaces a later.
    pub fn add_after(&self, key: K, delay: Duration) {
        let due = tokio::time::Instant::now() + delay;
        let mut q = self.lock();
        if q.shut_down {
            return;
        }
        match q.waiting.get(&key).copied() {
            Some((at, _)) if at <= due => return,
            Some(later) => {
                q.timers.remove(&later);
            }
            None => {}
        }
        q.next_timer += 1;
        let timer = (due, q.next_timer);
        let earliest = q.next_due().is_none_or(|at| due < at);
        q.waiting.insert(key.clone(), timer);
        q.timers.insert(timer, key);
        drop(q);
        if earliest {
            // A worker asleep toward a later deadline (or none) wakes to sleep toward this one.
            self.notify.notify_one();
        }
    }

    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Success: reset the key's backoff.
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// Wait for the next key (None after shutdown). Call `done` when finished with it. An idle
    /// worker sleeps until it is told of a key or the earliest waiting key is due.
    pub async fn next(&self) -> Option<K> {
        loop {
            // Made before looking, so a key added meanwhile is not missed.
            let notified = self.notify.notified();
            let due = {
                let mut q = self.lock();
                if q.shut_down {
                    return None;
                }
                q.promote(tokio::time::Instant::now());
                if let Some(k) = q.ready.pop_front() {
                    q.queued.remove(&k);
                    q.processing.insert(k.clone());
                    let more = !q.ready.is_empty();
                    q.shrink_if_drained();
                    drop(q);
                    if more {
                        // Keys made ready by this worker's promotion: another idle worker takes
                        // the next (a promotion notifies nobody itself).
                        self.notify.notify_one();
                    }
                    return Some(k);
                }
                q.next_due()
            };
            match due {
                Some(at) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Take queued keys matching `pred` (for batching one LIST over several keys).
    pub fn take_matching(&self, mut pred: impl FnMut(&K) -> bool, max: usize) -> Vec<K> {
        let mut q = self.lock();
        q.promote(tokio::time::Instant::now());
        let mut taken = Vec::new();
        let mut keep = VecDeque::with_capacity(q.ready.len());
        while let Some(k) = q.ready.pop_front() {
            if taken.len() < max && pred(&k) {
                taken.push(k);
            } else {
                keep.push_back(k);
            }
        }
        q.ready = keep;
        for k in &taken {
            q.queued.remove(k);
            q.processing.insert(k.clone());
        }
        q.shrink_if_drained();
        taken
    }

    pub fn done(&self, key: &K) {
        let mut q = self.lock();
        q.processing.remove(key);
        if q.dirty.remove(key) && q.queued.insert(key.clone()) {
            q.ready.push_back(key.clone());
            drop(q);
            self.notify.notify_one();
        }
    }

    /// Keys ready now (waiting keys whose deadline has passed included).
    pub fn len(&self) -> usize {
        let mut q = self.lock();
        if q.promote(tokio::time::Instant::now()) > 0 {
            drop(q);
            self.notify.notify_one();
            return self.lock().ready.len();
        }
        q.ready.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn shut_down(&self) {
        self.lock().shut_down = true;
        self.notify.notify_waiters();
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
