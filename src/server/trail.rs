//! What one decided admission request leaves behind: its count in the metrics (a DELETE's second
//! call counted once), its log line (refusals rate-limited), and its record — the Events and
//! AuditReport lines of refusals, warnings, exemptions and a person's break glass (rules.md §8).
//! Apart from the HTTP handler, which only answers.

use super::metrics::{KindLabels, Metrics};
use crate::admission::{self, Admission, Endpoint, dispatch::Verdict};
use std::sync::Arc;

/// The trail's sinks: the metrics, the audit trail (none offline), and the DELETEs seen lately.
pub(super) struct Trail {
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
    audit: Option<crate::state::Writer>,
    /// DELETEs seen in the last moments, to count the second call of one request once.
    deletes: SecondCalls,
}

impl Trail {
    pub(super) fn new(
        admission: Arc<Admission>,
        metrics: Arc<Metrics>,
        audit: Option<crate::state::Writer>,
    ) -> Self {
        Trail {
            admission,
            metrics,
            audit,
            deletes: SecondCalls::default(),
        }
    }

    /// Metrics, the log line and the Events of one decided request.
    pub(super) fn account(
        &self,
        endpoint: Endpoint,
        req: &admission::Request<'_>,
        verdict: &Verdict,
    ) {
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
                self.deletes.repeat(h.finish())
            });
        if !second_call {
            self.metrics.count_request(
                endpoint.as_str(),
                &req.kind.kind,
                &req.operation,
                decision.outcome(),
            );
        }
        if verdict.unknown_kind {
            self.metrics
                .unknown_kinds
                .get_or_create(&KindLabels {
                    kind: self.admission.unknown_kind_label(req),
                })
                .inc();
        }
        log_decision(req, verdict);
        if !req.dry_run.unwrap_or(false) && !second_call {
            record(self, req, verdict);
        }
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
fn record(s: &Trail, req: &admission::Request<'_>, verdict: &Verdict) {
    let decision = &verdict.decision;
    let Some(r) = verdict.rule else { return };
    if decision.allowed
        && !decision.warned
        && let Some(crate::rules::Effect::Record(kind)) = decision.effect
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
    audit: &crate::state::Writer,
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
    audit.audit(Refusal {
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
pub(super) fn event_note(
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

#[cfg(test)]
#[path = "trail_tests.rs"]
mod tests;
