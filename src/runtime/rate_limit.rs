//! A client-side token bucket shared by the controller's writers.

/// Client-side token bucket: `qps` sustained, `burst` at once, so a startup over many objects
/// does not stampede the apiserver. Hand-written because kube's `Client` has no client-side limit
/// (client-go's has `--kube-api-qps/burst`), and a rate-limit crate (governor) would bring its own
/// clock and a dependency tree for twenty lines. The lock is held across the wait on purpose:
/// tokio's mutex is fair, so writers are served in arrival order.
pub struct RateLimiter {
    state: tokio::sync::Mutex<(f64, tokio::time::Instant)>,
    qps: f64,
    burst: f64,
}

impl RateLimiter {
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimiter {
            state: tokio::sync::Mutex::new((burst, tokio::time::Instant::now())),
            qps: qps.max(0.001),
            burst,
        }
    }

    pub async fn acquire(&self) {
        let mut s = self.state.lock().await;
        let now = tokio::time::Instant::now();
        s.0 = (s.0 + now.duration_since(s.1).as_secs_f64() * self.qps).min(self.burst);
        s.1 = now;
        if s.0 < 1.0 {
            let wait = (1.0 - s.0) / self.qps;
            tokio::time::sleep(std::time::Duration::from_secs_f64(wait)).await;
            s.0 = 1.0;
            s.1 = tokio::time::Instant::now();
        }
        s.0 -= 1.0;
    }
}
