//! rules.md §2b: no new binding to a terminating PV (seed 003: "For pre-bound PVC/PV, if the PV has the
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
#[path = "binding_tests.rs"]
mod tests;
