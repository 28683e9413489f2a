use super::*;

#[test]
fn parses_every_form() {
    let all_warn = Enforcement::parse("warn").unwrap();
    for r in Rule::VALIDATING {
        assert_eq!(all_warn.mode(r), Mode::Warn);
        assert_eq!(Enforcement::parse("deny").unwrap().mode(r), Mode::Deny);
    }
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
