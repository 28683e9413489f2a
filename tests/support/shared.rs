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

/// One `#[test]` per scenario, its name written once: `statefulset_scale => |s| body;` declares
/// the test `statefulset_scale`, which runs scenario "statefulset-scale" (`body`, a future
/// borrowing the shared cluster `s`) through the file's runner (`scenario`, `standalone`, ...).
#[macro_export]
macro_rules! scenarios {
    ($runner:ident: $($(#[$meta:meta])* $test:ident => |$s:ident| $body:expr;)+) => {$(
        $(#[$meta])*
        #[test]
        #[ignore = "needs the control plane that `make e2e` builds (it runs the ignored tests)"]
        fn $test() {
            $runner(&stringify!($test).replace('_', "-"), |$s| Box::pin($body));
        }
    )+};
}

/// A scenario that has not finished after this long is stuck: every process's log is dumped
/// (each scenario's own waits are far shorter; `make bench`'s side by side is the longest).
const STUCK: std::time::Duration = std::time::Duration::from_secs(900);

/// How long a scenario may run before it counts as stuck: 900 s, or
/// `VOLGUARD_SCENARIO_STUCK_SECONDS` for the long runs made by hand (`make upstream-storage`).
fn stuck() -> std::time::Duration {
    std::env::var("VOLGUARD_SCENARIO_STUCK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(STUCK, std::time::Duration::from_secs)
}

/// Run scenario `name` on the cluster in `cell` (built by `start` on first use; `prepare` runs
/// before each scenario), printing `scenario NAME: ok (..s)`; a stuck one fails with `logs`.
pub fn scenario<T: Send + 'static>(
    cell: &'static Mutex<Option<T>>,
    start: fn() -> Pin<Box<dyn Future<Output = T>>>,
    prepare: for<'a> fn(&'a mut T) -> Body<'a>,
    logs: fn(&T) -> String,
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
        let stuck = stuck();
        let finished = tokio::time::timeout(stuck, f(shared)).await.is_ok();
        if !finished {
            panic!("scenario {name} stuck for {stuck:?}\n{}", logs(shared));
        }
        println!("scenario {name}: ok ({:.1}s)", t.elapsed().as_secs_f64());
    });
}
