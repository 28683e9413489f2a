//! Report output: a table that fits a terminal, or stable JSON / YAML for scripts.

use super::Report;
use crate::model::quantity::{format_bytes, format_duration};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Yaml,
}

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
        Format::Table => Ok(table(report)),
    }
}

fn table(report: &Report) -> String {
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
    let mut rows: Vec<[String; 8]> = vec![header.map(str::to_string)];
    for r in &report.items {
        rows.push([
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
        ]);
    }
    let mut widths = [0usize; 8];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
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
