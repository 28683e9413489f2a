//! What several commands' flags share: durations as people write them, a renamed flag's alias,
//! and the output format of the operator tools.

/// A duration as people write it: `15s`, `1m30s`, `500ms`, `2h` (jiff's friendly format).
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("{s:?} is not a duration like 15s, 1m30s or 500ms: {e}"))?;
    std::time::Duration::try_from(d).map_err(|_| format!("{s:?} is negative"))
}

/// A duration flag, or its former unit-suffixed alias when that was given.
pub fn either(
    new: std::time::Duration,
    old: Option<u64>,
    unit: fn(u64) -> std::time::Duration,
) -> std::time::Duration {
    old.map_or(new, unit)
}

/// `-o`: how `report` and `explain` print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    /// The table with where each "unused since" comes from.
    Wide,
    Json,
    Yaml,
    /// `persistentvolumeclaim/NAME` per line (for scripts: `| xargs kubectl delete -n NS`).
    Name,
}
