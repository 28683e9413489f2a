//! Unit tests of `src/rules/unused.rs`.

use super::*;
use crate::model::{ClaimSource, Condition, Volume};

fn pvc(name: &str) -> Pvc {
    let mut p = crate::model::testing::pvc("ns", name);
    p.status.phase = Some("Bound".into());
    p
}

#[test]
fn since_is_the_later_of_true_condition_and_annotation() {
    let mut p = pvc("a");
    assert_eq!(unused_since(&p), (None, SinceSource::Unknown));
    p.metadata.annotations =
        Some([(UNUSED_SINCE.to_string(), "2026-01-01T00:00:00Z".to_string())].into());
    assert_eq!(unused_since(&p).1, SinceSource::Annotation);
    p.status.conditions = [Condition {
        type_: "Unused".into(),
        status: "False".into(),
        reason: Some("PodUsingPVC".into()),
        last_transition_time: Some("2026-02-01T00:00:00Z".into()),
    }]
    .into();
    assert_eq!(
        unused_since(&p).1,
        SinceSource::Annotation,
        "False condition is ignored"
    );
    p.status.conditions[0].status = "True".into();
    assert_eq!(
        unused_since(&p),
        (Some("2026-02-01T00:00:00Z".into()), SinceSource::Condition)
    );
    // The later of the two wins: an annotation moved forward past the condition.
    p.metadata.annotations =
        Some([(UNUSED_SINCE.to_string(), "2026-03-01T00:00:00Z".to_string())].into());
    assert_eq!(
        unused_since(&p),
        (Some("2026-03-01T00:00:00Z".into()), SinceSource::Annotation)
    );
    // A mark that is not a time is not used.
    p.metadata.annotations = Some([(UNUSED_SINCE.to_string(), "soon".to_string())].into());
    assert_eq!(unused_since(&p).1, SinceSource::Condition);
}

#[test]
fn since_is_clamped_to_the_claims_creation() {
    // Restored from a backup an hour ago with a mark from 2023: idle for an hour, not for years.
    let mut p = pvc("restored");
    p.metadata.creation_timestamp = "2026-11-23T09:00:00Z".parse().ok();
    p.metadata.annotations =
        Some([(UNUSED_SINCE.to_string(), "2023-12-31T00:00:00Z".to_string())].into());
    assert_eq!(
        unused_since(&p),
        (Some("2026-11-23T09:00:00Z".into()), SinceSource::Created)
    );
    let now: jiff::Timestamp = "2026-11-23T10:00:00Z".parse().unwrap();
    let r = build(
        &[p.clone()],
        &[] as &[Pv],
        &[] as &[Pod],
        &Filter::default(),
        now,
    );
    assert_eq!(r.items[0].idle_seconds, Some(3600));
    // The upstream condition is clamped the same way; a later mark is kept as it is.
    p.metadata.annotations =
        Some([(UNUSED_SINCE.to_string(), "2026-11-23T09:10:00Z".to_string())].into());
    assert_eq!(
        unused_since(&p),
        (Some("2026-11-23T09:10:00Z".into()), SinceSource::Annotation)
    );
}

#[test]
fn reportable_cases() {
    let p = pvc("a");
    assert!(is_reportable_unused(&p, []));
    let mut unbound = pvc("b");
    unbound.status.phase = Some("Pending".into());
    assert!(!is_reportable_unused(&unbound, []));
    let mut term = pvc("c");
    term.metadata.deletion_timestamp = Some("t".into());
    assert!(!is_reportable_unused(&term, []));
    let mut ignored = pvc("d");
    ignored.metadata.annotations = Some([(IGNORE_UNUSED.to_string(), "true".to_string())].into());
    assert!(!is_reportable_unused(&ignored, []));
    let mut user = Pod::default();
    user.metadata.namespace = "ns".into();
    user.spec.volumes.push(Volume {
        name: "v".into(),
        persistent_volume_claim: Some(ClaimSource {
            claim_name: "a".into(),
            read_only: false,
        }),
        ..Default::default()
    });
    user.status.phase = Some("Pending".into());
    assert!(!is_reportable_unused(&p, [&user]), "pending pod uses it");
    user.status.phase = Some("Succeeded".into());
    assert!(
        is_reportable_unused(&p, [&user]),
        "terminal-only pods do not"
    );
}

#[test]
fn the_report_counts_only_the_pods_naming_each_claim_in_its_namespace() {
    let using = |ns: &str, name: &str, claim: &str| {
        let mut p = crate::model::testing::pod(ns, name);
        p.spec.volumes.push(Volume {
            name: "v".into(),
            persistent_volume_claim: Some(ClaimSource {
                claim_name: claim.into(),
                read_only: false,
            }),
            ..Default::default()
        });
        p.status.phase = Some("Running".into());
        p
    };
    let claims = [pvc("a"), pvc("b"), pvc("c")];
    let pods = [
        using("ns", "p1", "a"),
        // Same claim name, another namespace: not a user of ns/b.
        using("other", "p2", "b"),
        using("ns", "p3", "c"),
    ];
    let now: jiff::Timestamp = "2026-11-23T10:00:00Z".parse().unwrap();
    let r = build(&claims, &[] as &[Pv], &pods, &Filter::default(), now);
    let names: Vec<&str> = r.items.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["b"]);
}
