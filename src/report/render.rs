//! Report output: a table that fits a terminal, or stable JSON / YAML for scripts.

use super::Report;
use crate::model::quantity::{format_bytes, format_duration};

/// The output formats are a flag's values (`-o`): the command line owns them, and each job
/// (report, explain) reads its arguments from there, never the other way round.
pub use crate::runtime::flags::Format;

/// A report that cannot be written in the asked format (never seen: the report's types are plain).
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("cannot write the report as JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot write the report as YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

pub fn render(report: &Report, format: Format) -> Result<String, RenderError> {
    match format {
        Format::Json => Ok(serde_json::to_string_pretty(report)? + "\n"),
        Format::Yaml => Ok(serde_yaml::to_string(report)?),
        Format::Table => Ok(table(report, false)),
        Format::Wide => Ok(table(report, true)),
        Format::Name => Ok(report
            .items
            .iter()
            .map(|r| format!("persistentvolumeclaim/{}\n", r.name))
            .collect()),
    }
}

fn source(s: super::SinceSource) -> &'static str {
    match s {
        super::SinceSource::Condition => "Unused condition",
        super::SinceSource::Annotation => "volguard.io/unused-since",
        super::SinceSource::Created => "created (mark predates the claim)",
        super::SinceSource::Unknown => "-",
    }
}

fn table(report: &Report, wide: bool) -> String {
    let header = [
        "NAMESPACE",
        "NAME",
        "UNUSED SINCE",
        "IDLE",
        "SIZE",
        "STORAGECLASS",
        "VOLUME",
        "RECLAIM",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.map(str::to_string).to_vec()];
    if wide {
        rows[0].push("SINCE FROM".into());
    }
    for r in &report.items {
        let mut row = vec![
            r.namespace.clone(),
            r.name.clone(),
            r.unused_since
                .clone()
                .unwrap_or_else(|| "not yet observed".into()),
            r.idle_seconds
                .map(format_duration)
                .unwrap_or_else(|| "-".into()),
            r.requested.clone().unwrap_or_else(|| "-".into()),
            dash(&r.storage_class),
            dash(&r.volume),
            dash(&r.reclaim_policy),
        ];
        if wide {
            row.push(source(r.unused_since_source).to_string());
        }
        rows.push(row);
    }
    let mut widths = [0usize; 9];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(widths.iter().copied())
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("   ").trim_end());
        out.push('\n');
    }
    if report.items.is_empty() {
        out.push_str("no unused PersistentVolumeClaims\n");
    }
    out.push('\n');
    for t in &report.totals {
        out.push_str(&format!(
            "total {}: {} claim(s), {} requested\n",
            if t.storage_class.is_empty() {
                "(no class)"
            } else {
                &t.storage_class
            },
            t.count,
            format_bytes(t.requested_bytes)
        ));
    }
    out
}

fn dash(s: &str) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.to_string()
    }
}
