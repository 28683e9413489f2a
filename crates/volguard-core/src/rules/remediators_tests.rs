//! Unit tests of `src/rules/remediators.rs`.

use super::*;
use crate::model::testing::user;

fn parse(s: &str) -> Result<Remediator, String> {
    s.parse()
}

#[test]
fn parses_identity_and_actions() {
    let r = parse("system:serviceaccount:capi-system:capi-manager=delete-node").expect("ok");
    assert_eq!(r.identity, "system:serviceaccount:capi-system:capi-manager");
    assert_eq!(r.actions, vec![Action::DeleteNode]);
    let r = parse("group:medik8s=taint+force-delete").expect("ok");
    assert_eq!(r.actions, vec![Action::Taint, Action::ForceDelete]);
    for bad in ["capi", "=taint", "x=reboot", "x=", "group:=taint"] {
        let e = parse(bad).expect_err(bad);
        assert!(e.contains("IDENTITY=ACTION"), "{e}");
    }
}

#[test]
fn a_remediator_may_only_what_it_is_named_for() {
    let list = Remediators(vec![
        parse("system:serviceaccount:capi-system:capi-manager=delete-node").expect("ok"),
        parse("group:far-operators=taint").expect("ok"),
    ]);
    let capi = user("system:serviceaccount:capi-system:capi-manager", &[]);
    assert!(list.may(&capi, Action::DeleteNode).is_some());
    assert!(list.may(&capi, Action::Taint).is_none());
    assert!(list.may(&capi, Action::ForceDelete).is_none());
    let far = user("system:serviceaccount:medik8s:far", &["far-operators"]);
    assert!(list.may(&far, Action::Taint).is_some());
    assert!(list.may(&far, Action::DeleteNode).is_none());
    let other = user("system:serviceaccount:capi-system:other", &[]);
    assert!(Action::ALL.iter().all(|a| list.may(&other, *a).is_none()));
    assert!(
        Remediators::default()
            .may(&capi, Action::DeleteNode)
            .is_none()
    );
}
