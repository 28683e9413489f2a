//! SPEC 2b: no new binding to a terminating PV (seed 003: "For pre-bound PVC/PV, if the PV has the
//! deletionTimestamp set, we will not perform the bind operation").

use super::{Decision, Fact};
use crate::model::{Pv, Pvc};

/// The PV name this request binds: `spec.volumeName` new on CREATE, or changed on UPDATE.
pub fn newly_bound_volume<'a>(old: Option<&Pvc>, new: &'a Pvc) -> Option<&'a str> {
    let name = new.volume_name()?;
    match old.and_then(Pvc::volume_name) {
        Some(prev) if prev == name => None,
        _ => Some(name),
    }
}

pub fn pvc_binding(pvc: &Pvc, pv_name: &str, pv: Fact<&Pv>) -> Decision {
    match pv {
        Fact::Found(pv) if pv.metadata.is_terminating() => Decision::deny(
            "bind-terminating-pv",
            format!(
                "PersistentVolumeClaim {:?} binds PersistentVolume {pv_name:?}, which is being deleted; \
                 choose another volume or wait until it is gone",
                pvc.metadata.name
            ),
        ),
        Fact::Found(_) | Fact::Missing => Decision::allow("pvc-binding"),
        Fact::Unknown(err) => Decision::allow("pvc-binding").with_warning(format!(
            "volguard could not check PersistentVolume {pv_name:?} ({err})"
        )),
    }
}

#[cfg(test)]
mod tests {
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
}
