//! The durable half of the audit trail: each namespace's `AuditReport`, lines folded into it
//! every `FLUSH`, bounded by age and count; lines that cannot be written wait, within a bound.

use super::{AuditMetrics, REPORT, Refusal};
use std::collections::HashMap;

/// The durable half of the trail (`AuditReport`, one per namespace): how long a line stays and
/// how many a namespace keeps (`--audit-retention`, `--audit-report-entries`; 0: no reports).
#[derive(Debug, Clone, Copy)]
pub struct Reports {
    pub retention: jiff::SignedDuration,
    pub max: usize,
}

/// Lines waiting for their report's next write, over every namespace: beyond it they are
/// dropped (and counted) rather than held in memory while the apiserver refuses them.
pub(super) const REPORT_PENDING: usize = 4096;

/// The report line of one record.
pub(super) fn line(r: &Refusal, wall: jiff::Timestamp) -> crate::model::audit_report::AuditResult {
    let time = wall.round(jiff::Unit::Second).unwrap_or(wall).to_string();
    crate::model::audit_report::AuditResult {
        first_time: time.clone(),
        time,
        count: 1,
        rule: r.rule.clone(),
        row: r.row.to_string(),
        reason: r.reason.to_string(),
        user: r.user.clone(),
        kind: r.regarding.kind.to_string(),
        name: r.regarding.name.clone(),
        action: r.action.clone(),
        message: r.note.clone(),
    }
}

pub(super) type Pending = HashMap<String, Vec<crate::model::audit_report::AuditResult>>;

/// Each namespace's pending lines into its AuditReport; lines that could not be written wait
/// for the next fold (within the bound).
pub(super) async fn fold_reports(
    writer: &crate::state::Writer,
    pending: &mut Pending,
    reports: &Reports,
    metrics: &AuditMetrics,
) {
    use crate::model::audit_report::NAME;
    for (ns, lines) in std::mem::take(pending) {
        match crate::state::writer::fold_audit_report(
            writer,
            &ns,
            lines.clone(),
            reports.retention,
            reports.max,
        )
        .await
        {
            Ok(()) => metrics.count(REPORT, "written"),
            Err(e) => {
                // A conflict (another replica wrote it) or a refusal: the lines wait for the
                // next write, within the bound. Warned every time: a conflict is rare (one
                // writer per namespace most of the time), a refusal (RBAC, a missing CRD) is
                // what an operator must see.
                tracing::warn!(namespace = %ns, auditreport = %NAME, lines = lines.len(),
                    error = %crate::error::chain(&e), "could not write the AuditReport");
                metrics.count(REPORT, "failed");
                pending.entry(ns).or_default().extend(lines);
            }
        }
    }
}
