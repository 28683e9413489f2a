//! Unit tests of `src/rules/mod.rs`.

/// Every recorded row is one a rule returns: a row renamed in its rule and not here would be
/// a use of break glass that leaves no record.
#[test]
fn every_recorded_row_is_a_rows_name() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rules");
    let mut text = String::new();
    for e in std::fs::read_dir(dir).expect("src/rules") {
        let p = e.expect("entry").path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        // upstream/ holds ports of Kubernetes' code, no rule's rows.
        if p.is_file() && name != "mod.rs" && !name.ends_with("_tests.rs") {
            text.push_str(&std::fs::read_to_string(&p).expect("read"));
        }
    }
    for (row, _) in super::RECORDED {
        assert!(
            text.contains(&format!("\"{row}\"")),
            "no rule returns {row}"
        );
    }
}
