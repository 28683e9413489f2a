//! The durable half of the audit trail: each namespace's `AuditReport`, lines folded into it
//! every `FLUSH`, bounded by age and count; lines that cannot be written wait, within a bound.

use super::{AuditMetrics, REPORT, Refusal};
use crate::state::write::{Apply, Door};
use crate::state::writer::Writer;
use kube::Api;
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
        let fold = ReportFold {
            namespace: &ns,
            lines: lines.clone(),
            retention: reports.retention,
            max: reports.max,
        };
        match writer.apply(fold).await {
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

/// Fold `lines` into namespace `namespace`'s AuditReport (created on first use). The read's
/// resourceVersion goes with the write: another replica's concurrent write wins (409) and the
/// caller keeps the lines for its next write.
pub(super) struct ReportFold<'a> {
    pub namespace: &'a str,
    pub lines: Vec<crate::model::audit_report::AuditResult>,
    pub retention: jiff::SignedDuration,
    pub max: usize,
}

impl Apply for ReportFold<'_> {
    type Answer = Result<(), kube::Error>;

    async fn apply_to(self, writer: &Writer, _: Door) -> Result<(), kube::Error> {
        use crate::model::audit_report::{AuditReport, KIND, NAME, PLURAL};
        use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(
                crate::model::fence::GROUP,
                crate::model::fence::VERSION,
                KIND,
            ),
            PLURAL,
        );
        let api: Api<DynamicObject> =
            Api::namespaced_with(writer.client()?.clone(), self.namespace, &ar);
        let stored = api.get_opt(NAME).await?;
        let mut report: AuditReport = stored
            .as_ref()
            .and_then(|o| serde_json::from_value(o.data.clone()).ok())
            .unwrap_or_default();
        report.fold(self.lines, jiff::Timestamp::now(), self.retention, self.max);
        let data = serde_json::to_value(&report).unwrap_or_default();
        match stored {
            Some(mut o) => {
                o.data = data;
                api.replace(NAME, &PostParams::default(), &o).await?;
            }
            None => {
                let mut o = DynamicObject::new(NAME, &ar).within(self.namespace);
                o.data = data;
                api.create(&PostParams::default(), &o).await?;
            }
        }
        Ok(())
    }
}
