//! Unit tests of `src/rules/upstream/pod_binding.rs`.

use super::*;
use crate::model::testing::annotated;

fn map(pairs: &[(&str, &str)]) -> Option<SmallMap> {
    annotated(pairs).annotations
}
fn binding(annotations: &[(&str, &str)], labels: &[(&str, &str)]) -> Binding {
    let mut b = Binding::default();
    b.metadata.annotations = map(annotations);
    b.metadata.labels = map(labels);
    b
}

#[test]
fn the_binding_overwrites_annotations_and_labels() {
    let mut pod = annotated(&[("volguard.io/a", "pod"), ("volguard.io/b", "pod")]);
    pod.labels = map(&[("app", "db"), ("zone", "a")]);
    let b = binding(
        &[
            ("volguard.io/b", "binding"),
            (INIT_CONTAINER_ANNOTATIONS[0], "x"),
        ],
        &[("zone", "b")],
    );
    let merged = merge_binding(&pod, &b);
    assert_eq!(
        merged.annotations,
        map(&[("volguard.io/a", "pod"), ("volguard.io/b", "binding")])
    );
    assert_eq!(merged.labels, map(&[("app", "db"), ("zone", "b")]));
}

#[test]
fn init_container_annotations_are_dropped_from_the_pod_too() {
    let pod = annotated(&[(INIT_CONTAINER_ANNOTATIONS[3], "x")]);
    let merged = merge_binding(&pod, &Binding::default());
    assert_eq!(merged.annotations, None);
    assert_eq!(merged.labels, None);
}

#[test]
fn refusals_in_order() {
    let mut pod = Pod::default();
    pod.metadata.uid = "u1".into();
    pod.metadata.resource_version = Some("7".into());
    let mut b = Binding::default();
    assert_eq!(bind_refused(&pod, &b), None);
    b.metadata.resource_version = Some("6".into());
    assert_eq!(bind_refused(&pod, &b), Some(BindRefused::Precondition));
    b.metadata.resource_version = Some("7".into());
    b.metadata.uid = "u1".into();
    pod.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into());
    assert_eq!(bind_refused(&pod, &b), Some(BindRefused::Terminating));
    pod.metadata.deletion_timestamp = None;
    pod.spec.node_name = Some("n1".into());
    assert_eq!(bind_refused(&pod, &b), Some(BindRefused::Assigned));
}
