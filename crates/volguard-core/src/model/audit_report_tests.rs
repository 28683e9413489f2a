//! Unit tests of `src/model/audit_report.rs`.

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
