//! Route each admission request to its rule(s) (the facts each rule needs: `facts.rs`).
//!
//! Each webhook entry has its own path naming one rule (`/validate/force-delete`); `/mutate` and
//! `/validate` run every rule that applies, for offline use and fixtures. Each rule decides within
//! the request's time budget; a rule that runs out of time answers as its failure policy says
//! (rules.md "Deciding late"), and a denial of a rule in `warn` mode becomes a warning (rules.md §2g).

use super::context::Admission;
use super::review::Request;
use crate::rules::Decision;
use crate::rules::rule::{FailurePolicy, Rule, Target};
use std::time::Duration;
use tokio::time::Instant;

/// Which rules a request is judged by: the ones of one path, or every rule of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/mutate`: every mutating rule.
    Mutate,
    /// `/validate`: every validating rule.
    Validate,
    /// `/mutate/<rule>` or `/validate/<rule>`: that rule alone.
    Rule(Rule),
}

impl Endpoint {
    /// The metric and log name: `mutate`, `validate`, or the rule's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Mutate => "mutate",
            Endpoint::Validate => "validate",
            Endpoint::Rule(r) => r.name(),
        }
    }

    fn admits(self, rule: Rule) -> bool {
        match self {
            Endpoint::Mutate => rule.mutating(),
            Endpoint::Validate => !rule.mutating(),
            Endpoint::Rule(r) => r == rule,
        }
    }
}

/// What kind of request this is (no I/O, no object decoding): by the doors each `On` declares.
pub(super) fn target(req: &Request<'_>) -> Target {
    Target::of(
        &req.kind.group,
        &req.kind.kind,
        req.subresource(),
        &req.operation,
    )
}

/// The answer to one request: the decision, the rule that made it (none when no rule applied),
/// and whether the kind was one volguard has no rule for.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub decision: Decision,
    pub rule: Option<Rule>,
    pub unknown_kind: bool,
}

/// At most this many distinct unknown kinds are remembered (and logged); the kind strings come
/// from callers, so the set must not grow without bound (rules.md §2e).
pub const MAX_UNKNOWN_KINDS: usize = 32;

/// Decide within `budget`: every applicable rule in order; the first denial wins, warnings
/// and the patches of the mutating rules are collected (one patch, in table order).
pub async fn decide(
    cx: &Admission,
    endpoint: Endpoint,
    req: &Request<'_>,
    budget: Duration,
) -> Verdict {
    let deadline = Instant::now() + budget;
    let target = target(req);
    let rules: Vec<Rule> = target
        .rules()
        .iter()
        .copied()
        .filter(|r| endpoint.admits(*r))
        .collect();
    let Target::On(on) = target else {
        let unknown = target == Target::Unknown;
        let d = match unknown {
            true => unknown_kind(cx, req),
            false => Decision::allow("no-rule"),
        };
        return Verdict {
            decision: d,
            rule: None,
            unknown_kind: unknown,
        };
    };
    if rules.is_empty() {
        let unknown = target == Target::Unknown;
        let d = match (unknown, endpoint) {
            (true, _) => unknown_kind(cx, req),
            // A rule's own path called for a request it does not judge: the webhook entry's
            // rules are wider than the rule (a configuration mistake, harmless).
            (false, Endpoint::Rule(_)) => Decision::allow("not-this-rule"),
            (false, _) => Decision::allow("no-rule"),
        };
        return Verdict {
            decision: d,
            rule: None,
            unknown_kind: unknown,
        };
    }
    let mut warnings = Vec::new();
    let mut allowed: Vec<(Rule, Decision)> = Vec::new();
    for rule in rules {
        // The deadline goes to the rule too: most never look (this timeout answers for
        // them), but one whose right late answer depends on how far it got keeps to it itself
        // (the RWO lock: once it has seen a lock on another node or begun a write, late means
        // refused, never allowed; rules.md §2f).
        let judged = match tokio::time::timeout_at(
            deadline,
            super::facts::judge(cx, rule, on, req, deadline),
        )
        .await
        {
            Ok(Ok(d) | Err(d)) => d,
            Err(_) => late(rule, budget),
        };
        let judged = cx.exemptions.apply(rule, &req.user_info, judged);
        let mut d = cx.enforcement.apply(rule, judged);
        if !d.allowed {
            d.warnings.splice(0..0, warnings);
            return Verdict {
                decision: d,
                rule: Some(rule),
                unknown_kind: false,
            };
        }
        warnings.append(&mut d.warnings);
        allowed.push((rule, d));
    }
    // All allowed: report the decision worth reporting: a warned denial, else the one that
    // patched, else the first rule's (the request's primary rule); warnings of all rules.
    let pick = allowed
        .iter()
        .position(|(_, d)| d.warned)
        .or_else(|| allowed.iter().position(|(_, d)| d.patch.is_some()))
        .unwrap_or(0);
    // rules.md §1: every mutating rule that applies contributes, in one patch (a finalizer and
    // a confirmation's stamp on one CREATE, a placement hint and a stamp on one pod). Each
    // rule's operations touch its own fields, so they apply in table order one after another.
    let mut patches = allowed.iter().filter_map(|(_, d)| d.patch.as_ref());
    let combined = match (patches.next(), patches.next()) {
        (Some(first), Some(second)) => {
            let mut ops = first.ops().into_owned();
            ops.0.extend(second.ops().0.iter().cloned());
            for more in patches {
                ops.0.extend(more.ops().0.iter().cloned());
            }
            Some(crate::rules::decision::Patch::Ops(ops))
        }
        _ => None,
    };
    let (rule, mut d) = allowed.swap_remove(pick);
    d.warnings = warnings;
    if combined.is_some() {
        d.patch = combined;
    }
    Verdict {
        decision: d,
        rule: Some(rule),
        unknown_kind: false,
    }
}

/// The answer when the whole decision ran out of time (the server's backstop): Fail if any
/// rule that judges this request is registered Fail, else allowed with a warning.
pub fn late_verdict(
    cx: &Admission,
    endpoint: Endpoint,
    req: &Request<'_>,
    budget: Duration,
) -> Verdict {
    let rules: Vec<Rule> = target(req)
        .rules()
        .iter()
        .copied()
        .filter(|r| endpoint.admits(*r))
        .collect();
    let rule = rules
        .iter()
        .copied()
        .find(|r| r.failure_policy() == FailurePolicy::Fail)
        .or(rules.first().copied());
    let decision = match rule {
        Some(r) => cx.enforcement.apply(r, late(r, budget)),
        None => Decision::allow("no-rule"),
    };
    Verdict {
        decision,
        rule,
        unknown_kind: false,
    }
}

/// The metric label for an unknown kind: the kind itself while it is one of the first
/// `MAX_UNKNOWN_KINDS` seen, else `other` (callers choose the strings; labels stay bounded).
pub fn unknown_kind_label(cx: &Admission, req: &Request<'_>) -> String {
    let key = format!("{}/{}", req.kind.group, req.kind.kind);
    let known = cx
        .unknown_kinds
        .lock()
        .map(|s| s.contains(&key))
        .unwrap_or(false);
    if known {
        req.kind.kind.to_string()
    } else {
        "other".to_string()
    }
}

/// rules.md §2e: allowed; a configuration mistake worth one log line per kind (bounded).
fn unknown_kind(cx: &Admission, req: &Request<'_>) -> Decision {
    let first = cx
        .unknown_kinds
        .lock()
        .map(|mut s| {
            if s.len() >= MAX_UNKNOWN_KINDS {
                return false;
            }
            let key = format!("{}/{}", req.kind.group, req.kind.kind);
            s.insert(key)
        })
        .unwrap_or(false);
    if first {
        tracing::warn!(group = %req.kind.group, kind = %req.kind.kind,
            "webhook called for a kind volguard has no rule for; check the webhook configuration");
    }
    Decision::allow("unknown-kind")
}

/// What a rule answers when its facts did not arrive in time (rules.md "Deciding late or without
/// facts"): the same as the apiserver would if volguard were down.
fn late(rule: Rule, budget: Duration) -> Decision {
    rule.undecided("late", &format!("within {budget:?}"))
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
