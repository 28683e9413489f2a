use super::*;

#[test]
fn parses_every_form() {
    let all_warn = Enforcement::parse("warn").unwrap();
    for r in Rule::VALIDATING {
        let want = if r.def().warnable {
            Mode::Warn
        } else {
            Mode::Deny
        };
        assert_eq!(all_warn.mode(r), want, "{r}");
        assert_eq!(Enforcement::parse("deny").unwrap().mode(r), Mode::Deny);
    }
    // A proof and deletion protection never warn: `warn` leaves them denying.
    assert_eq!(all_warn.mode(Rule::Proof), Mode::Deny);
    assert_eq!(all_warn.mode(Rule::DeleteProtection), Mode::Deny);
    let some = Enforcement::parse("force-delete=warn, rwo-single-node=warn").unwrap();
    assert_eq!(some.mode(Rule::ForceDelete), Mode::Warn);
    assert_eq!(some.mode(Rule::RwoSingleNode), Mode::Warn);
    assert_eq!(some.mode(Rule::FinalizerRemoval), Mode::Deny);
    // Mutating rules have no mode: always deny (they never deny anyway).
    assert_eq!(all_warn.mode(Rule::PvcFinalizer), Mode::Deny);
}

#[test]
fn rejects_bad_input_precisely() {
    assert_eq!(
        Enforcement::parse("force-delete=audit"),
        Err(EnforcementError::Mode("audit".into()))
    );
    assert_eq!(
        Enforcement::parse("nope=warn"),
        Err(EnforcementError::Rule("nope".into()))
    );
    assert_eq!(
        Enforcement::parse("loud"),
        Err(EnforcementError::Entry("loud".into()))
    );
    assert_eq!(
        Enforcement::parse("delete-protection=warn"),
        Err(EnforcementError::NotWarnable("delete-protection".into()))
    );
    assert!(Enforcement::parse("proof=deny").is_ok());
    let e = EnforcementError::NotWarnable("proof".into()).to_string();
    assert!(
        e.contains("force-delete") && !e.contains("delete-protection,"),
        "{e}"
    );
    // Issue 44 point 8: the error names every validating rule of the table, not a stale list.
    let e = EnforcementError::Rule("x".into()).to_string();
    for r in Rule::VALIDATING {
        assert!(e.contains(r.name()), "{} missing from: {e}", r.name());
    }
}

#[test]
fn warn_turns_a_denial_into_a_counted_warning() {
    let e = Enforcement::parse("force-delete=warn").unwrap();
    let d = e.apply(
        Rule::ForceDelete,
        Decision::deny("force-delete-running-pod", "refused because"),
    );
    assert!(d.allowed && d.warned);
    assert_eq!(d.outcome(), "warned");
    assert_eq!(d.row, "force-delete-running-pod");
    assert!(
        d.warnings[0].contains("force-delete in warn mode")
            && d.warnings[0].contains("refused because")
    );
    // Other rules still deny; errors (500) in warn mode are warned too; 400 never.
    let deny = e.apply(Rule::FinalizerRemoval, Decision::deny("x", "m"));
    assert!(!deny.allowed);
    let err = e.apply(Rule::ForceDelete, Decision::unavailable("x", "m"));
    assert!(err.allowed && err.warned);
    let bad = e.apply(Rule::ForceDelete, Decision::bad_request("m"));
    assert!(!bad.allowed && bad.code == 400);
    // An allowed decision passes untouched.
    let ok = e.apply(Rule::ForceDelete, Decision::allow("graceful-delete"));
    assert!(ok.allowed && !ok.warned);
}

#[test]
fn the_warnable_rules_are_one_list_in_the_binary_the_chart_schema_and_the_docs() {
    let want: Vec<&str> = Rule::WARNABLE.iter().map(|r| r.name()).collect();
    let schema: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../charts/volguard/values.schema.json"
    ))
    .expect("schema");
    let e = &schema["properties"]["enforcement"]["oneOf"];
    let names: Vec<&str> = e[1]["propertyNames"]["enum"]
        .as_array()
        .expect("enum")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(names, want, "chart schema's enforcement keys");
    let exemptable: Vec<&str> = schema["properties"]["exemptions"]["propertyNames"]["enum"]
        .as_array()
        .expect("exemptions enum")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(exemptable, want, "chart schema's exemptions keys");
    let pattern = e[0]["pattern"].as_str().expect("pattern");
    assert!(
        pattern.contains(&format!("({})", want.join("|"))),
        "chart schema's enforcement pattern: {pattern}"
    );
    let docs = include_str!("../../../../docs/rules.md");
    let line = docs
        .lines()
        .skip_while(|l| !l.starts_with("Rules that can warn:"))
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let listed: Vec<&str> = line.split('`').skip(1).step_by(2).collect();
    assert_eq!(listed, want, "docs/rules.md §2g: {line}");
}
