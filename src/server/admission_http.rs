//! The admission HTTP surface: `POST /mutate`, `POST /validate`, and precise errors for the rest.
//! Testable without sockets: `router()` is a plain axum Router.

use super::metrics::{CodeLabels, KindLabels, Metrics};
use crate::admission::{self, Admission, Endpoint, dispatch::Verdict};
use crate::error::ReviewError;
use crate::rules::rule::Rule;
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
    /// A body not fully received in this time is answered 408 (slow-body attacks).
    pub body_timeout: std::time::Duration,
    /// Requests decided at once; more wait (with their bodies already read) for a slot.
    pub max_concurrent_requests: usize,
    /// Request body bytes held in memory at once, over all requests; a body waits for room.
    pub max_body_bytes_in_flight: usize,
    /// The audit trail (an Event per refused or warned request); none offline.
    pub audit: Option<crate::state::audit::AuditSink>,
}

/// What every request shares, behind one `Arc`: axum clones the state for each request, and
/// each clone of a shared reference count is an atomic write both cores contend for.
struct Shared {
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
    decide_timeout: std::time::Duration,
    body_timeout: std::time::Duration,
    concurrency: Arc<tokio::sync::Semaphore>,
    /// Body bytes in flight, in KiB permits.
    body_budget: Arc<tokio::sync::Semaphore>,
    audit: Option<crate::state::audit::AuditSink>,
    /// DELETEs seen in the last moments, to count the second call of one request once.
    deletes: SecondCalls,
}

/// The last DELETE calls, by (endpoint, object UID, resourceVersion, user): the apiserver calls
/// a DELETE's webhooks twice when the grace period ends at once (`Request::deleted_version`).
/// A repeat within `WINDOW` is that second call: decided again, but neither counted nor
/// recorded again. Bounded: the oldest entries go first. Only DELETEs pay the lock.
#[derive(Default)]
struct SecondCalls(std::sync::Mutex<std::collections::VecDeque<(u64, std::time::Instant)>>);

impl SecondCalls {
    const WINDOW: std::time::Duration = std::time::Duration::from_secs(5);
    const MAX: usize = 4096;

    /// Whether this call repeats one seen within the window (and remember it either way).
    fn repeat(&self, key: u64) -> bool {
        let now = std::time::Instant::now();
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        while seen
            .front()
            .is_some_and(|(_, at)| now.duration_since(*at) > Self::WINDOW || seen.len() > Self::MAX)
        {
            seen.pop_front();
        }
        if seen.iter().any(|(k, _)| *k == key) {
            return true;
        }
        seen.push_back((key, now));
        false
    }
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
    let shared = Arc::new(Shared {
        admission: state.admission,
        metrics: state.metrics,
        decide_timeout: state.decide_timeout,
        body_timeout: state.body_timeout,
        concurrency,
        body_budget: Arc::new(tokio::sync::Semaphore::new(budget_kib)),
        audit: state.audit,
        deletes: SecondCalls::default(),
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
    let verdict = decide(&s, endpoint, &req).await;
    account(&s, endpoint, &req, &verdict);
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

/// The rules' verdict, in a span carrying the request's uid, kind, object and decision.
async fn decide(s: &Shared, endpoint: Endpoint, req: &admission::Request<'_>) -> Verdict {
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
    // Each rule keeps to `decide_timeout` itself; this backstop only fires if something
    // outside a rule's facts stalls, and answers with the rules' failure policies too.
    let backstop = s.decide_timeout + std::time::Duration::from_millis(200);
    let verdict = match tokio::time::timeout(
        backstop,
        s.admission
            .decide(endpoint, req, s.decide_timeout)
            .instrument(span.clone()),
    )
    .await
    {
        Ok(v) => v,
        Err(_) => s.admission.late_verdict(endpoint, req, s.decide_timeout),
    };
    span.record("decision", verdict.decision.outcome());
    span.record("rule", verdict.rule.map_or("none", |r| r.name()));
    span.record("row", verdict.decision.row);
    s.metrics
        .observe_duration(endpoint.as_str(), started.elapsed().as_secs_f64());
    verdict
}

/// Metrics, the log line and the Events of one decided request.
fn account(s: &Shared, endpoint: Endpoint, req: &admission::Request<'_>, verdict: &Verdict) {
    let decision = &verdict.decision;
    // Requests, not calls: a DELETE's second call is decided again, not counted again. Only an
    // allowed first call has a second one (a refusal ends the request), so only allowed calls
    // are remembered: a client repeating a refused delete is counted every time. The object's
    // UID and the caller, not its resourceVersion: the graceful-deletion update between the two
    // calls can move it (seen in a live trial: one force delete counted and recorded twice).
    let second_call = decision.allowed
        && req.deleted_version().is_some_and(|(uid, _)| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (endpoint.as_str(), uid, &req.user_info.username).hash(&mut h);
            s.deletes.repeat(h.finish())
        });
    if !second_call {
        s.metrics.count_request(
            endpoint.as_str(),
            &req.kind.kind,
            &req.operation,
            decision.outcome(),
        );
    }
    if verdict.unknown_kind {
        s.metrics
            .unknown_kinds
            .get_or_create(&KindLabels {
                kind: s.admission.unknown_kind_label(req),
            })
            .inc();
    }
    log_decision(req, verdict);
    if !req.dry_run.unwrap_or(false) && !second_call {
        record(s, req, verdict);
    }
}

fn log_decision(req: &admission::Request<'_>, verdict: &Verdict) {
    let decision = &verdict.decision;
    let rule = verdict.rule.map_or("none", |r| r.name());
    if decision.allowed && !decision.warned {
        tracing::debug!(uid = %req.uid, kind = %req.kind.kind, operation = %req.operation,
            object = %req.target(), decision = decision.outcome(), rule, row = decision.row, "admitted");
    } else if REFUSAL_LOG.admit() {
        // `reason`, not `message`: the JSON formatter writes the event's own text as `message`,
        // and a line with one key twice is rejected by strict parsers.
        let reason = decision
            .message
            .as_deref()
            .or(decision.warnings.first().map(String::as_str))
            .unwrap_or("");
        // A warned request was allowed (warn mode, or an allowed request with a warning).
        let said = if decision.allowed {
            "allowed with a warning"
        } else {
            "refused"
        };
        tracing::info!(uid = %req.uid, kind = %req.kind.kind, operation = %req.operation,
            object = %req.target(), user = %req.user_info.username, decision = decision.outcome(),
            rule, row = decision.row, reason, "{said}");
    }
}

/// The Events of a request that changes something (not a dry run, not a DELETE's second call):
/// a person's override, lifted protection or confirmation (rules.md §8, §2i), whatever else is
/// logged; and what was refused or would have been.
fn record(s: &Shared, req: &admission::Request<'_>, verdict: &Verdict) {
    let decision = &verdict.decision;
    let Some(r) = verdict.rule else { return };
    if decision.allowed
        && !decision.warned
        && let Some(kind) = crate::rules::recorded(decision.row)
    {
        if kind == crate::rules::Recorded::BreakGlass {
            s.metrics
                .break_glass
                .get_or_create(&super::metrics::RuleLabels { rule: r.name() })
                .inc();
            tracing::warn!(uid = %req.uid, kind = %req.kind.kind, operation = %req.operation,
                object = %req.target(), user = %req.user_info.username, rule = r.name(),
                row = decision.row, "break glass used");
        }
        if let Some(audit) = &s.audit {
            record_event(audit, req, decision, r.name(), kind.reason(), kind.verb());
        }
    }
    if let Some(audit) = &s.audit
        && (!decision.allowed || decision.warned)
        && decision.code < 500
    {
        let (reason, verb) = match (decision.exempted, decision.warned) {
            (true, _) => (
                "Exempted",
                "would refuse, but the caller is exempted (--exempt)",
            ),
            (false, true) => ("WouldDeny", "would refuse"),
            (false, false) => ("Denied", "refused"),
        };
        record_event(audit, req, decision, r.name(), reason, verb);
    }
}

/// An Event on what was refused (or would have been, in warn mode). Dry runs change nothing and
/// record nothing (the registrations say `sideEffects: NoneOnDryRun`); answers of a failure
/// policy (code 500: volguard could not decide) are not refusals of the request's content.
fn record_event(
    audit: &crate::state::audit::AuditSink,
    req: &admission::Request<'_>,
    decision: &crate::rules::Decision,
    rule: &str,
    reason: &'static str,
    verb: &str,
) {
    use crate::state::audit::{Refusal, Regarding};
    let Some(mut regarding) = Regarding::of(
        &req.kind.kind,
        &req.operation,
        req.namespace.as_deref(),
        req.name.as_deref(),
    ) else {
        return;
    };
    // `kubectl describe` lists the Events whose reference carries the object's UID.
    if regarding.kind != "Namespace" {
        regarding.uid = req.object_uid();
    }
    let action = match (&*req.kind.kind, &*req.operation) {
        ("Binding", _) => "Bind".to_string(),
        ("Eviction", _) => "Evict".to_string(),
        (_, op) => {
            let mut a = op.to_ascii_lowercase();
            if let Some(c) = a.get_mut(0..1) {
                c.make_ascii_uppercase();
            }
            match req.sub_resource.as_deref() {
                Some(sub) if !sub.is_empty() => format!("{a}/{sub}"),
                _ => a,
            }
        }
    };
    let target = match req.target() {
        t if t.is_empty() => req.namespace.as_deref().unwrap_or_default().to_string(),
        t => t,
    };
    audit.record(Refusal {
        regarding,
        user: req.user_info.username.clone(),
        reason,
        action,
        row: decision.row,
        rule: rule.to_string(),
        note: event_note(
            verb,
            &format!("{} {} {target}", req.operation, req.kind.kind),
            &req.user_info.username,
            rule,
            decision,
        ),
    });
}

/// An Event's note: what volguard did, to what, for whom, by which rule and row, and why. The
/// why is the refusal's message, else volguard's own first warning (never kubectl's generic
/// force-delete text, which names neither the rule nor the risk accepted), else the row (an
/// Event must not end in an empty "):").
fn event_note(
    verb: &str,
    what: &str,
    user: &str,
    rule: &str,
    decision: &crate::rules::Decision,
) -> String {
    let message = decision
        .message
        .as_deref()
        .or(decision
            .warnings
            .iter()
            .map(String::as_str)
            .find(|w| *w != crate::rules::force_delete::KUBECTL_WARNING))
        .unwrap_or(decision.row);
    format!(
        "volguard {verb} {what} by {user} (rule {rule}, row {}): {message}",
        decision.row
    )
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

#[cfg(test)]
#[path = "admission_http_tests.rs"]
mod tests;
