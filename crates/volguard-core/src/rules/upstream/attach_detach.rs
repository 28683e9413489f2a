//! The attach/detach controller's "this pod no longer uses its volumes": once true for every pod
//! of a volume on a node, the controller detaches it.

use crate::model::{ContainerList, ContainerStates, Pod};

/// Ports `pkg/volume/util/util.go: func IsPodTerminated` (v1.37.2), called by the attach/detach
/// controller with the pod's own status: phase `Failed` or `Succeeded`, or deleted and no
/// container of any list (init, regular, ephemeral) running. `states` is the same pod decoded
/// as `ContainerStates`.
pub fn is_pod_terminated(pod: &Pod, states: &ContainerStates) -> bool {
    matches!(pod.status.phase.as_deref(), Some("Failed" | "Succeeded"))
        || (pod.metadata.deletion_timestamp.is_some()
            && not_running(states, ContainerList::Init)
            && not_running(states, ContainerList::Regular)
            && not_running(states, ContainerList::Ephemeral))
}

/// Ports `pkg/volume/util/util.go: func notRunning`: every status `terminated` or `waiting`; an
/// absent or empty list counts as not running.
fn not_running(states: &ContainerStates, list: ContainerList) -> bool {
    !states.any_running_in(list)
}

#[cfg(test)]
#[path = "attach_detach_tests.rs"]
mod tests;
