//! The rule and webhook tables of README.md, docs/rules.md and docs/reference.md, held to the
//! rule table and the registration: a rule or entry added, renamed or re-policied without its
//! line in the docs fails here.

use super::webhooks::{CONFIGURATIONS, FailureMode};
use crate::rules::rule::TABLE;

fn doc(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The rows of the first table under a header line starting with `header`, as cells.
fn table(text: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(header)).skip(2);
    let mut rows = Vec::new();
    for l in lines.by_ref() {
        if !l.starts_with('|') {
            break;
        }
        rows.push(
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect(),
        );
    }
    assert!(!rows.is_empty(), "no table under {header:?}");
    rows
}

/// The names a first cell carries: the words before its first parenthesis, backticks and the
/// `.volguard.io` suffix dropped.
fn names(cell: &str) -> Vec<String> {
    let head = cell.split(" (").next().unwrap_or_default();
    head.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .filter(|w| !w.is_empty())
        .map(|w| w.trim_end_matches(".volguard.io").to_string())
        .collect()
}

#[test]
fn the_readme_names_every_rule_that_refuses_and_no_other() {
    let rows = table(&doc("README.md"), "| rule | refuses | proceed |");
    let listed: Vec<String> = rows.iter().flat_map(|r| names(&r[0])).collect();
    for d in TABLE.iter().filter(|d| !d.mutating) {
        assert!(
            listed.iter().any(|n| n == d.name),
            "README.md's rule table lacks {:?}",
            d.name
        );
    }
    for n in &listed {
        assert!(
            TABLE.iter().any(|d| d.name == n && !d.mutating),
            "README.md's rule table names {n:?}, which is no validating rule"
        );
    }
}

#[test]
fn the_rules_layers_table_names_every_rule_that_refuses() {
    let rows = table(
        &doc("docs/rules.md"),
        "| rule | row | layer | with volguard down |",
    );
    let listed: Vec<String> = rows.iter().flat_map(|r| names(&r[0])).collect();
    for d in TABLE.iter().filter(|d| !d.mutating) {
        assert!(
            listed.iter().any(|n| n == d.name),
            "docs/rules.md's layers table lacks {:?}",
            d.name
        );
    }
    for n in &listed {
        assert!(
            TABLE.iter().any(|d| d.name == n),
            "docs/rules.md's layers table names {n:?}, which is no rule"
        );
    }
}

#[test]
fn the_reference_lists_every_webhook_entry_with_its_failure_policy() {
    let rows = table(&doc("docs/reference.md"), "| webhook | failurePolicy |");
    for (_, _, entries) in CONFIGURATIONS {
        for e in entries.iter() {
            let short = e.name.trim_end_matches(".volguard.io");
            let row = rows
                .iter()
                .find(|r| names(&r[0]).iter().any(|n| n == short))
                .unwrap_or_else(|| panic!("docs/reference.md's webhook table lacks {short:?}"));
            let policy = row[1].replace('*', "");
            let alone = e.failure_policy(&FailureMode::policies(false));
            let with = e.failure_policy(&FailureMode::policies(true));
            let want = match alone == with {
                true => alone.to_string(),
                false => format!("{alone} ({with} with the policies)"),
            };
            assert_eq!(policy, want, "docs/reference.md's failurePolicy of {short}");
        }
    }
}
