//! Unit tests of `src/rules/binding.rs`.

use super::*;

fn pvc(volume: Option<&str>) -> Pvc {
    let mut p = Pvc::default();
    p.metadata.name = "c".into();
    p.spec.volume_name = volume.map(Into::into);
    p
}

#[test]
fn only_new_or_changed_binding_counts() {
    assert_eq!(newly_bound_volume(None, &pvc(Some("pv1"))), Some("pv1"));
    assert_eq!(newly_bound_volume(None, &pvc(None)), None);
    assert_eq!(newly_bound_volume(None, &pvc(Some(""))), None);
    assert_eq!(
        newly_bound_volume(Some(&pvc(None)), &pvc(Some("pv1"))),
        Some("pv1")
    );
    assert_eq!(
        newly_bound_volume(Some(&pvc(Some(""))), &pvc(Some("pv1"))),
        Some("pv1")
    );
    assert_eq!(
        newly_bound_volume(Some(&pvc(Some("pv1"))), &pvc(Some("pv1"))),
        None
    );
}

#[test]
fn terminating_pv_denied() {
    let mut pv = Pv::default();
    assert!(pvc_binding(&pvc(Some("pv1")), "pv1", Fact::Found(&pv)).allowed);
    pv.metadata.deletion_timestamp = Some("t".into());
    let d = pvc_binding(&pvc(Some("pv1")), "pv1", Fact::Found(&pv));
    assert!(!d.allowed);
    assert!(
        d.message
            .is_some_and(|m| m.contains(r#"PersistentVolume "pv1", which is being deleted"#))
    );
    assert!(pvc_binding(&pvc(Some("pv1")), "pv1", Fact::Missing).allowed);
}
