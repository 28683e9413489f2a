//! One control plane per test process, shared by the scenario tests of a file: built by the
//! first scenario that runs, handed to one scenario at a time, stopped when the process exits
//! (statics are never dropped, so an `atexit` hook stops their processes).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, Once};
use std::time::Instant;

/// A scenario's body, borrowing the shared cluster.
pub type Body<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

static RUNTIME: std::sync::LazyLock<tokio::runtime::Runtime> = std::sync::LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
});

type Teardown = Box<dyn FnOnce() + Send>;
static TEARDOWN: Mutex<Vec<Teardown>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

extern "C" fn teardown_all() {
    let all = std::mem::take(&mut *TEARDOWN.lock().unwrap_or_else(|e| e.into_inner()));
    for f in all {
        f();
    }
}

/// Run scenario `name` on the cluster in `cell` (built by `start` on first use; `prepare` runs
/// before each scenario), printing `scenario NAME: ok (..s)`.
pub fn scenario<T: Send + 'static>(
    cell: &'static Mutex<Option<T>>,
    start: fn() -> Pin<Box<dyn Future<Output = T>>>,
    prepare: for<'a> fn(&'a mut T) -> Body<'a>,
    name: &str,
    f: impl for<'a> FnOnce(&'a mut T) -> Body<'a>,
) {
    let mut guard = cell.lock().unwrap_or_else(|e| e.into_inner());
    RUNTIME.block_on(async {
        if guard.is_none() {
            *guard = Some(start().await);
            TEARDOWN
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Box::new(move || {
                    drop(cell.lock().unwrap_or_else(|e| e.into_inner()).take());
                }));
            AT_EXIT.call_once(|| {
                // SAFETY: registers a plain `extern "C" fn()`; it runs once, at process exit.
                unsafe {
                    libc::atexit(teardown_all);
                }
            });
        }
        let shared = guard.as_mut().expect("cluster");
        prepare(shared).await;
        let t = Instant::now();
        f(shared).await;
        println!("scenario {name}: ok ({:.1}s)", t.elapsed().as_secs_f64());
    });
}

/// A scenario body that must finish within five minutes (its own waits are shorter), else every
/// process's log is dumped.
pub async fn dumping<F: Future<Output = ()>>(cp: &super::harness::ControlPlane, name: &str, f: F) {
    if tokio::time::timeout(std::time::Duration::from_secs(300), f)
        .await
        .is_err()
    {
        panic!("{name} timed out\n{}", cp.logs());
    }
}
