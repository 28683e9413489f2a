//! The admission HTTP surface: `POST /mutate`, `POST /validate`, and precise errors for the rest.
//! Testable without sockets: `router()` is a plain axum Router.

use super::metrics::{CodeLabels, KindLabels, Metrics};
use crate::admission::{self, Admission, Endpoint};
use crate::error::ReviewError;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// The apiserver sends at most 3 MiB objects (etcd's limit) inside a review; 7 MiB leaves room
/// for object + oldObject while bounding memory per request.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

#[derive(Clone)]
pub struct AppState {
    pub admission: Arc<Admission>,
    pub metrics: Arc<Metrics>,
    /// A decision that takes longer is answered as an error (the apiserver's own timeout is ≤ 3 s
    /// in our manifests; answering first keeps the failure explicit and logged).
    pub decide_timeout: std::time::Duration,
    /// A body not fully received in this time is answered 408 (slow-body attacks hold a slot).
    pub body_timeout: std::time::Duration,
    /// Requests read and decided at once; more wait, bodies unread, for a slot.
    pub max_concurrent_requests: usize,
}

/// What every request shares, behind one `Arc`: axum clones the state for each request, and
/// each clone of a shared reference count is an atomic write both cores contend for.
struct Shared {
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
    decide_timeout: std::time::Duration,
    body_timeout: std::time::Duration,
    concurrency: Arc<tokio::sync::Semaphore>,
}

pub fn router(state: AppState) -> Router {
    let limit = state.max_concurrent_requests;
    let concurrency = Arc::new(tokio::sync::Semaphore::new(limit));
    // In-flight requests are the slots taken, read when /metrics is scraped rather than counted
    // on every request.
    let slots = Arc::downgrade(&concurrency);
    state.metrics.in_flight_from(move || {
        slots
            .upgrade()
            .map_or(0, |s| limit.saturating_sub(s.available_permits()))
    });
    let shared = Arc::new(Shared {
        admission: state.admission,
        metrics: state.metrics,
        decide_timeout: state.decide_timeout,
        body_timeout: state.body_timeout,
        concurrency,
    });
    Router::new()
        .route(
            "/mutate",
            post(|s, r| handle(s, r, Endpoint::Mutate)).fallback(method_not_allowed),
        )
        .route(
            "/validate",
            post(|s, r| handle(s, r, Endpoint::Validate)).fallback(method_not_allowed),
        )
        .fallback(not_found)
        .with_state(shared)
}

fn json_error(metrics: &Metrics, code: StatusCode, message: impl Into<String>) -> Response {
    metrics
        .rejected_bodies
        .get_or_create(&CodeLabels {
            code: code.as_u16(),
        })
        .inc();
    let body = serde_json::json!({ "code": code.as_u16(), "error": message.into() });
    (code, axum::Json(body)).into_response()
}

async fn not_found(State(s): State<Arc<Shared>>) -> Response {
    json_error(
        &s.metrics,
        StatusCode::NOT_FOUND,
        "no such endpoint: use POST /mutate or POST /validate",
    )
}

async fn method_not_allowed(State(s): State<Arc<Shared>>) -> Response {
    let mut r = json_error(
        &s.metrics,
        StatusCode::METHOD_NOT_ALLOWED,
        "admission endpoints accept POST only",
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    r
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

async fn read_body(body: Body) -> Result<Bytes, (StatusCode, String)> {
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| {
            let too_big = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
                || e.to_string().contains("length limit");
            if too_big {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("request body exceeds {MAX_BODY_BYTES} bytes"),
                )
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    format!("cannot read request body: {e}"),
                )
            }
        })
}

// The whole request rather than `HeaderMap` + `Body` extractors: axum's `HeaderMap` extractor
// clones every header, a cost the floor does not pay.
async fn handle(State(s): State<Arc<Shared>>, request: Request, endpoint: Endpoint) -> Response {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    if !is_json(headers) {
        return json_error(
            &s.metrics,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        );
    }
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        && len > MAX_BODY_BYTES
    {
        return json_error(
            &s.metrics,
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body exceeds {MAX_BODY_BYTES} bytes"),
        );
    }
    // A closed semaphore never happens (nothing closes it); were it to, deciding unbounded is
    // better than refusing every request.
    let _slot = s.concurrency.acquire().await.ok();
    let bytes = match tokio::time::timeout(s.body_timeout, read_body(body)).await {
        Ok(Ok(b)) => b,
        Ok(Err((code, msg))) => return json_error(&s.metrics, code, msg),
        Err(_) => {
            return json_error(
                &s.metrics,
                StatusCode::REQUEST_TIMEOUT,
                format!("request body not received within {:?}", s.body_timeout),
            );
        }
    };
    let req = match admission::decode(&bytes) {
        Ok(r) => r,
        Err(e) => return json_error(&s.metrics, StatusCode::BAD_REQUEST, review_error(&e)),
    };
    let started = Instant::now();
    let span = tracing::debug_span!(
        "admission",
        uid = %req.uid,
        endpoint = endpoint.as_str(),
        kind = %req.kind.kind,
        operation = %req.operation,
        object = %req.target(),
        user = %req.user_info.username,
        decision = tracing::field::Empty,
        rule = tracing::field::Empty,
    );
    let span_handle = span.clone();
    let decision = match tokio::time::timeout(
        s.decide_timeout,
        s.admission.decide(endpoint, &req).instrument(span),
    )
    .await
    {
        Ok(d) => d,
        Err(_) => crate::rules::Decision::unavailable(
            "timeout",
            format!("volguard could not decide within {:?}", s.decide_timeout),
        ),
    };
    span_handle.record("decision", decision.outcome());
    span_handle.record("rule", decision.rule);
    s.metrics.duration.observe(started.elapsed().as_secs_f64());
    s.metrics.count_request(
        endpoint.as_str(),
        &req.kind.kind,
        &req.operation,
        decision.outcome(),
    );
    if decision.rule == "unknown-kind" {
        s.metrics
            .unknown_kinds
            .get_or_create(&KindLabels {
                kind: req.kind.kind.to_string(),
            })
            .inc();
    }
    if decision.allowed {
        tracing::debug!(uid = %req.uid, kind = %req.kind.kind, operation = %req.operation,
            object = %req.target(), decision = decision.outcome(), rule = decision.rule, "admitted");
    } else if REFUSAL_LOG.admit() {
        tracing::info!(uid = %req.uid, kind = %req.kind.kind, operation = %req.operation,
            object = %req.target(), user = %req.user_info.username, decision = decision.outcome(),
            rule = decision.rule, message = decision.message.as_deref().unwrap_or(""), "refused");
    }
    let body = admission::encode(&req.uid, &decision);
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// Refusals are logged, but at most `PER_SECOND` lines a second: a storm of denied requests (a
/// controller retrying a force delete) must not turn into a logging cost on the request path.
/// Every decision is still counted in `volguard_admission_requests_total`.
struct LogBudget {
    window: std::sync::atomic::AtomicU64,
    used: std::sync::atomic::AtomicU64,
}

static REFUSAL_LOG: LogBudget = LogBudget {
    window: std::sync::atomic::AtomicU64::new(0),
    used: std::sync::atomic::AtomicU64::new(0),
};

impl LogBudget {
    const PER_SECOND: u64 = 50;

    fn admit(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        // Plain loads first: under a storm of refusals the budget is spent and nothing is
        // written, so the two cores do not fight over this cache line on every request.
        if self.window.load(Relaxed) == now && self.used.load(Relaxed) >= Self::PER_SECOND {
            return false;
        }
        if self.window.swap(now, Relaxed) != now {
            let skipped = self.used.swap(0, Relaxed).saturating_sub(Self::PER_SECOND);
            if skipped > 0 {
                tracing::info!(
                    skipped,
                    "refusals not logged in the previous second (rate limit)"
                );
            }
        }
        self.used.fetch_add(1, Relaxed) < Self::PER_SECOND
    }
}

fn review_error(e: &ReviewError) -> String {
    e.to_string()
}
