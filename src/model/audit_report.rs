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
mod tests {
    use super::*;

    fn r(time: &str, user: &str, name: &str) -> AuditResult {
        AuditResult {
            time: time.into(),
            first_time: time.into(),
            count: 1,
            rule: "force-delete".into(),
            row: "force-delete-running-pod".into(),
            reason: "Denied".into(),
            user: user.into(),
            kind: "Pod".into(),
            name: name.into(),
            action: "Delete".into(),
            message: "refused".into(),
        }
    }

    #[test]
    fn repeats_fold_into_one_line_counted_and_summarised() {
        let now: jiff::Timestamp = "2026-11-27T10:00:00Z".parse().expect("time");
        let day = jiff::SignedDuration::from_hours(24);
        let mut rep = AuditReport::default();
        rep.fold(
            vec![
                r("2026-11-27T09:00:00Z", "ci", "db-0"),
                r("2026-11-27T09:01:00Z", "ci", "db-0"),
                r("2026-11-27T09:02:00Z", "bob", "db-1"),
            ],
            now,
            day,
            10,
        );
        assert_eq!(rep.summary["force-delete"]["Denied"], 3);
        assert_eq!(rep.results.len(), 2);
        assert_eq!(rep.results[0].user, "bob", "newest first");
        let ci = &rep.results[1];
        assert_eq!(
            (ci.count, ci.time.as_str(), ci.first_time.as_str()),
            (2, "2026-11-27T09:01:00Z", "2026-11-27T09:00:00Z")
        );
    }

    #[test]
    fn lines_past_the_retention_or_the_bound_go_but_the_summary_stays() {
        let now: jiff::Timestamp = "2026-11-27T10:00:00Z".parse().expect("time");
        let day = jiff::SignedDuration::from_hours(24);
        let mut rep = AuditReport::default();
        rep.fold(vec![r("2026-11-20T09:00:00Z", "ci", "old")], now, day, 10);
        assert!(rep.results.is_empty());
        let many: Vec<AuditResult> = (0..20)
            .map(|i| r("2026-11-27T09:00:00Z", "ci", &format!("p-{i}")))
            .collect();
        rep.fold(many, now, day, 5);
        assert_eq!(rep.results.len(), 5);
        assert_eq!(rep.results[0].name, "p-19");
        assert_eq!(rep.summary["force-delete"]["Denied"], 21);
        let mut long = r("2026-11-27T09:00:00Z", "ci", "x");
        long.message = "é".repeat(600);
        rep.fold(vec![long], now, day, 5);
        assert!(rep.results[0].message.len() <= 512);
    }
}
