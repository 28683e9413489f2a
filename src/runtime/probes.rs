//! Plain-HTTP probes and metrics: `/healthz`, `/readyz`, `/metrics`. Never admission.
//! Readiness is whatever the job says it is (caches synced, listener bound).

use super::MetricsRegistry;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::sync::Arc;

/// Reports why the process is not ready yet (`None` when ready).
pub type ReadyCheck = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// Something an operator should see that does not make the process unready (a drifted
/// registration): a line after `/readyz`'s verdict.
pub type Detail = Arc<dyn Fn() -> Option<String> + Send + Sync>;

#[derive(Clone)]
struct ProbeState {
    metrics: Arc<MetricsRegistry>,
    ready: ReadyCheck,
    detail: Option<Detail>,
}

pub fn router(metrics: Arc<MetricsRegistry>, ready: ReadyCheck) -> Router {
    router_with_detail(metrics, ready, None)
}

pub fn router_with_detail(
    metrics: Arc<MetricsRegistry>,
    ready: ReadyCheck,
    detail: Option<Detail>,
) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(ProbeState {
            metrics,
            ready,
            detail,
        })
}

async fn readyz(State(s): State<ProbeState>) -> impl IntoResponse {
    let (code, mut body) = match (s.ready)() {
        None => (StatusCode::OK, "ready\n".to_string()),
        Some(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    };
    if let Some(line) = s.detail.as_ref().and_then(|d| d()) {
        body.push_str(&line);
        body.push('\n');
    }
    (code, body)
}

/// OpenMetrics to a scraper that asks for it (Prometheus does), the Prometheus text format to
/// everyone else (curl, older scrapers, `promtool check metrics`).
async fn metrics_text(
    State(s): State<ProbeState>,
    headers: axum::http::HeaderMap,
) -> impl IntoResponse {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    if openmetrics {
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            s.metrics.render(),
        )
    } else {
        (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            s.metrics.render_prometheus(),
        )
    }
}
