//! `AuditReport` (volguard.io/v1alpha1, one per namespace, named `volguard`): what volguard
//! refused, warned of, exempted and let through on a person's override, kept after the Events
//! are gone (they expire with the apiserver's `--event-ttl`, 1 h by default), like Kyverno's
//! PolicyReports. Summarised and bounded: `summary` counts every record by rule and reason since
//! the report began; `results` keeps one line per (rule, row, reason, user, object), with its
//! count and last time, at most `max` of them, none older than the retention.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const KIND: &str = "AuditReport";
pub const PLURAL: &str = "auditreports";
/// The one report of a namespace.
pub const NAME: &str = "volguard";
const MESSAGE_MAX: usize = 512;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    /// rule → reason (Denied, WouldDeny, Exempted, BreakGlass, ...) → count.
    #[serde(default)]
    pub summary: BTreeMap<String, BTreeMap<String, u64>>,
    /// Newest first.
    #[serde(default)]
    pub results: Vec<AuditResult>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditResult {
    /// RFC 3339: the last time it happened.
    pub time: String,
    pub first_time: String,
    pub count: u64,
    pub rule: String,
    pub row: String,
    pub reason: String,
    pub user: String,
    pub kind: String,
    pub name: String,
    pub action: String,
    pub message: String,
}

impl AuditResult {
    fn key(&self) -> (&str, &str, &str, &str, &str, &str) {
        (
            &self.rule,
            &self.row,
            &self.reason,
            &self.user,
            &self.kind,
            &self.name,
        )
    }
}

impl AuditReport {
    /// Fold `new` records (each `count` 1, oldest first) into the report, then drop what is older
    /// than `retention` before `now` and keep the `max` newest lines.
    pub fn fold(
        &mut self,
        new: Vec<AuditResult>,
        now: jiff::Timestamp,
        retention: jiff::SignedDuration,
        max: usize,
    ) {
        for mut r in new {
            *self
                .summary
                .entry(r.rule.clone())
                .or_default()
                .entry(r.reason.clone())
                .or_default() += r.count;
            if r.message.len() > MESSAGE_MAX {
                let mut end = MESSAGE_MAX;
                while !r.message.is_char_boundary(end) {
                    end -= 1;
                }
                r.message.truncate(end);
            }
            match self.results.iter().position(|x| x.key() == r.key()) {
                Some(i) => {
                    let mut old = self.results.remove(i);
                    old.count += r.count;
                    old.time = r.time;
                    old.message = r.message;
                    old.action = r.action;
                    self.results.insert(0, old);
                }
                None => self.results.insert(0, r),
            }
        }
        self.results.retain(|r| {
            r.time
                .parse::<jiff::Timestamp>()
                .is_ok_and(|t| now.duration_since(t) <= retention)
        });
        self.results.truncate(max);
    }
}

#[cfg(test)]
#[path = "audit_report_tests.rs"]
mod tests;
