//! Unit tests of `src/model/selector.rs`.

use super::*;

fn labels(pairs: &[(&str, &str)]) -> SmallMap {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn selectors() {
    let l = labels(&[("app", "db"), ("tier", "gold")]);
    for (s, want) in [
        ("app=db", true),
        ("app==db", true),
        ("app!=db", false),
        ("app", true),
        ("!app", false),
        ("!team", true),
        ("tier in (gold,silver)", true),
        ("tier notin (gold)", false),
        ("app=db,tier in (silver)", false),
        ("app=db,tier in (silver, gold)", true),
    ] {
        assert_eq!(Selector::parse(s).expect(s).matches(Some(&l)), want, "{s}");
    }
    assert!(Selector::parse("").expect("empty").matches(None));
    assert_eq!(
        Selector::parse("a b=c"),
        Err(SelectorError::Requirement {
            selector: "a b=c".into(),
            requirement: "a b=c".into()
        })
    );
    assert_eq!(
        Selector::parse("x in a,b").map_err(|e| e.to_string()),
        Err("invalid set \"a\": expected (a,b)".to_string())
    );
}
