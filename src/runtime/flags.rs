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

/// The value parser of a core setting (`rules::Choices`): its words, each with what it means, in
/// `--help`; the word given parsed back to its value. (The core crate has no command line: clap's
/// `ValueEnum` cannot be derived there.)
pub fn choice<T: crate::rules::Choices>() -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let values = T::CHOICES
        .iter()
        .map(|(_, word, help)| PossibleValue::new(*word).help(*help));
    PossibleValuesParser::new(values).try_map(|word: String| {
        T::CHOICES
            .iter()
            .find(|(_, w, _)| *w == word)
            .map(|(v, _, _)| *v)
            .ok_or_else(|| format!("{word:?} is not one of the listed values"))
    })
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
