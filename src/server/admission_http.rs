//! The admission HTTP surface: `POST /mutate`, `POST /validate`, and precise errors for the rest.
//! It speaks HTTP (bodies, limits, answers); what a decision leaves behind — its count, its log
//! line, its Events — is `trail`'s. Testable without sockets: `router()` is a plain axum Router.

use super::metrics::{CodeLabels, Metrics};
use super::trail::Trail;
use crate::admission::{self, Admission, Endpoint, dispatch::Verdict};
use crate::error::ReviewError;
use crate::rules::rule::{Rule, Timeout};
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
    /// Each rule decides within this budget; one that cannot answers as its failure policy
    /// says (the apiserver's own timeout is 3 s in our manifests).
    pub decide_timeout: std::time::Duration,
    /// The budget of the rules registered with the placement's longer timeout (the RWO lock's
    /// write: `Timeout::Placement`).
    pub placement_decide_timeout: std::time::Duration,
    /// A body not fully received in this time is answered 408 (slow-body attacks).
    pub body_timeout: std::time::Duration,
    /// Requests decided at once; more wait (with their bodies already read) for a slot.
    pub max_concurrent_requests: usize,
    /// Request body bytes held in memory at once, over all requests; a body waits for room.
    pub max_body_bytes_in_flight: usize,
    /// The audit trail (an Event per refused or warned request); none offline.
    pub audit: Option<crate::state::Writer>,
}

/// What every request shares, behind one `Arc`: axum clones the state for each request, and
/// each clone of a shared reference count is an atomic write both cores contend for.
struct Shared {
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
    decide_timeout: std::time::Duration,
    placement_decide_timeout: std::time::Duration,
    body_timeout: std::time::Duration,
    concurrency: Arc<tokio::sync::Semaphore>,
    /// Body bytes in flight, in KiB permits.
    body_budget: Arc<tokio::sync::Semaphore>,
    /// What each decided request leaves behind: counted, logged, recorded.
    trail: Trail,
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
    // At least one maximal body must fit, or such a body could never be read.
    let budget_kib = state.max_body_bytes_in_flight.max(MAX_BODY_BYTES) / 1024;
    let trail = Trail::new(state.admission.clone(), state.metrics.clone(), state.audit);
    let shared = Arc::new(Shared {
        admission: state.admission,
        metrics: state.metrics,
        decide_timeout: state.decide_timeout,
        placement_decide_timeout: state.placement_decide_timeout,
        body_timeout: state.body_timeout,
        concurrency,
        body_budget: Arc::new(tokio::sync::Semaphore::new(budget_kib)),
        trail,
    });
    let mut r = Router::new()
        .route(
            "/mutate",
            post(|s, r| handle(s, r, Endpoint::Mutate)).fallback(method_not_allowed),
        )
        .route(
            "/validate",
            post(|s, r| handle(s, r, Endpoint::Validate)).fallback(method_not_allowed),
        );
    // One path per webhook entry, naming its rule (manifests/base/webhooks.yaml).
    for rule in Rule::ALL {
        r = r.route(
            rule.path(),
            post(move |s, r| handle(s, r, Endpoint::Rule(rule))).fallback(method_not_allowed),
        );
    }
    r.fallback(not_found).with_state(shared)
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
        "no such endpoint: use POST /mutate, POST /validate, or a rule's path such as \
         /validate/force-delete (see manifests/base/webhooks.yaml)",
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

/// Why a body was not read.
enum BodyError {
    TooLarge,
    Read(String),
}

/// Bodies up to this size need no room in the shared budget: the reviews the apiserver sends
/// are a few KiB to tens of KiB, and they must never queue behind large bodies that trickle in
/// (bounded anyway: `--max-connections` × this).
const FREE_BODY_BYTES: usize = 64 * 1024;

/// Read the body frame by frame, taking room in the shared byte budget before the buffer grows
/// past `FREE_BODY_BYTES`: many large bodies at once wait for room instead of exhausting
/// memory. The budget counts the buffer's capacity, not its length: a doubling `Vec` holds up to
/// twice what it was given, and counting only the length let 40 slow 6 MiB bodies under a
/// 16 MiB budget reach +97 MiB RSS (tests/abuse.rs). The permits are held until the request is
/// answered.
async fn read_body(
    mut body: Body,
    expected_len: Option<usize>,
    budget: &Arc<tokio::sync::Semaphore>,
    permits: &mut Option<tokio::sync::OwnedSemaphorePermit>,
) -> Result<Bytes, BodyError> {
    use axum::body::HttpBody;
    use http_body_util::BodyExt;
    // Not sized from Content-Length up front: the allocator commits a large buffer at once, so
    // 40 announced 6 MiB bodies cost 240 MiB before a byte arrived (measured in tests/abuse.rs).
    // Small bodies (the common case) are sized exactly.
    let mut buf = Vec::with_capacity(expected_len.filter(|l| *l <= FREE_BODY_BYTES).unwrap_or(0));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        // The usual review: a small body in one frame. Kept as the frame itself, not copied:
        // the copy into a fresh buffer cost a PVC review 41 of its 564 L1d misses and ~700
        // instructions (`make profile`); the floor's `Bytes` extractor does not pay it either.
        if buf.is_empty() && data.len() <= FREE_BODY_BYTES && body.is_end_stream() {
            return Ok(data);
        }
        let needed = buf.len() + data.len();
        if needed > MAX_BODY_BYTES {
            return Err(BodyError::TooLarge);
        }
        if needed > buf.capacity() {
            // An announced body takes its whole size at once (one wait per body, so bodies
            // never hold part of the budget while waiting for more of it); a chunked one grows
            // as a Vec would. Either way only once the budget has room for the new buffer.
            let cap = match expected_len {
                Some(len) if len >= needed => len,
                _ => needed
                    .max(buf.capacity().saturating_mul(2))
                    .min(MAX_BODY_BYTES),
            };
            if cap > FREE_BODY_BYTES {
                let held_kib = permits.as_ref().map_or(0, |p| p.num_permits());
                let need_kib = cap.div_ceil(1024);
                if need_kib > held_kib {
                    let more = u32::try_from(need_kib - held_kib).unwrap_or(u32::MAX);
                    // The semaphore is never closed; were it to be, reading on unbudgeted is safe.
                    if let Ok(p) = budget.clone().acquire_many_owned(more).await {
                        match permits {
                            Some(held) => held.merge(p),
                            None => *permits = Some(p),
                        }
                    }
                }
            }
            buf.reserve_exact(cap - buf.len());
        }
        buf.extend_from_slice(&data);
    }
    Ok(Bytes::from(buf))
}

/// Read and discard what the client still sends (up to a bound) so that it reads our 413
/// instead of a connection reset while it is still writing.
async fn drain(mut body: Body, within: std::time::Duration) {
    use http_body_util::BodyExt;
    const DRAIN_LIMIT: usize = 4 * MAX_BODY_BYTES;
    let _ = tokio::time::timeout(within, async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, |d| d.len());
            if seen > DRAIN_LIMIT {
                break;
            }
        }
    })
    .await;
}

fn too_large(metrics: &Metrics) -> Response {
    let mut r = json_error(
        metrics,
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body exceeds {MAX_BODY_BYTES} bytes"),
    );
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

// The whole request rather than `HeaderMap` + `Body` extractors: axum's `HeaderMap` extractor
// clones every header, a cost the floor does not pay.
async fn handle(State(s): State<Arc<Shared>>, request: Request, endpoint: Endpoint) -> Response {
    // The apiserver's timeout runs from when it sent the request: the budget does too, so time
    // spent receiving the body or waiting for a slot is not decided past it (an Ignore entry
    // whose answer arrives late is allowed by the apiserver, whatever volguard answered).
    let arrived = Instant::now();
    let (parts, body) = request.into_parts();
    let (bytes, body_permits) = match receive(&s, &parts.headers, body).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let req = match admission::decode(&bytes) {
        Ok(r) => r,
        Err(e) => return e.into_response_counted(&s.metrics),
    };
    // The decide slot is taken only now: a slow body holds bytes of the budget, not a slot.
    // A closed semaphore never happens (nothing closes it); were it to, deciding unbounded is
    // better than refusing every request.
    let _slot = s.concurrency.acquire().await.ok();
    let verdict = decide(&s, endpoint, &req, arrived).await;
    s.trail.account(endpoint, &req, &verdict);
    let body = admission::encode(&req.uid, &verdict.decision, verdict.rule);
    drop(body_permits);
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

/// The body, within the size limit, the byte budget and the body timeout; or the answer that
/// says why not. The budget's permits are held until the request is answered.
async fn receive(
    s: &Shared,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Bytes, Option<tokio::sync::OwnedSemaphorePermit>), Response> {
    if !is_json(headers) {
        return Err(json_error(
            &s.metrics,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        ));
    }
    let content_length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if content_length.is_some_and(|len| len > MAX_BODY_BYTES) {
        drain(body, s.body_timeout).await;
        return Err(too_large(&s.metrics));
    }
    let mut permits = None;
    let read = tokio::time::timeout(
        s.body_timeout,
        read_body(body, content_length, &s.body_budget, &mut permits),
    )
    .await;
    match read {
        Ok(Ok(b)) => Ok((b, permits)),
        Ok(Err(BodyError::TooLarge)) => Err(too_large(&s.metrics)),
        Ok(Err(BodyError::Read(e))) => Err(json_error(
            &s.metrics,
            StatusCode::BAD_REQUEST,
            format!("cannot read request body: {e}"),
        )),
        Err(_) => Err(json_error(
            &s.metrics,
            StatusCode::REQUEST_TIMEOUT,
            format!("request body not received within {:?}", s.body_timeout),
        )),
    }
}

/// An answer that tells the apiserver nothing it does not do without the call: allowed, with no
/// patch, no warning, and nothing left behind (no audit record, no Event).
fn unread_answer(d: &crate::rules::Decision) -> bool {
    d.allowed && !d.warned && d.patch.is_none() && d.warnings.is_empty() && d.effect.is_none()
}

/// The rules' verdict, in a span carrying the request's uid, kind, object and decision.
async fn decide(
    s: &Shared,
    endpoint: Endpoint,
    req: &admission::Request<'_>,
    arrived: Instant,
) -> Verdict {
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
        row = tracing::field::Empty,
    );
    let started = Instant::now();
    // A rule's own path decides within that rule's budget (its entry's timeout less a margin);
    // `/mutate` and `/validate` (offline, fixtures) within the standard one.
    let budget = match endpoint {
        Endpoint::Rule(r) if r.def().timeout == Timeout::Placement => s.placement_decide_timeout,
        _ => s.decide_timeout,
    }
    .saturating_sub(started.saturating_duration_since(arrived));
    // Each rule keeps to its budget itself; this backstop only fires if something outside a
    // rule's facts stalls, and answers with the rules' failure policies too.
    let backstop = budget + std::time::Duration::from_millis(200);
    let reads = crate::state::reads::mark();
    let verdict = match tokio::time::timeout(
        backstop,
        s.admission
            .decide(endpoint, req, budget)
            .instrument(span.clone()),
    )
    .await
    {
        Ok(v) => {
            if unread_answer(&v.decision) && reads.nothing_read_since() {
                s.metrics
                    .count_unread(endpoint.as_str(), &req.kind.kind, &req.operation);
            }
            v
        }
        Err(_) => s.admission.late_verdict(endpoint, req, budget),
    };
    span.record("decision", verdict.decision.outcome());
    span.record("rule", verdict.rule.map_or("none", |r| r.name()));
    span.record("row", verdict.decision.row);
    s.metrics
        .observe_duration(endpoint.as_str(), started.elapsed().as_secs_f64());
    verdict
}

impl ReviewError {
    /// The 400 answer for a body that is not a usable AdmissionReview, counted.
    fn into_response_counted(self, metrics: &Metrics) -> Response {
        json_error(metrics, StatusCode::BAD_REQUEST, self.to_string())
    }
}

impl IntoResponse for ReviewError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "code": 400, "error": self.to_string() });
        (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
    }
}
