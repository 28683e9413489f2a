//! Upstream's own decisions that destroy data or free a volume, each ported once as a pure
//! function named after the Go function it ports (Kubernetes v1.37.2, the version the e2e runs).
//!
//! The guards judge what these controllers would do with an object, so they read these ports
//! rather than a paraphrase. `tests/differential.rs` evaluates generated objects with every port
//! and with upstream's Go code (`e2e/differential`, linked from k8s.io/kubernetes) and fails on
//! any disagreement; `UPSTREAM` is its list of predicates.
//!
//! | actor | file |
//! |---|---|
//! | attach/detach controller | `attach_detach.rs` |
//! | PodGC | `podgc.rs` |
//! | PV controller | `pv_controller.rs` |
//! | apiserver's pod binding | `pod_binding.rs` |

pub mod attach_detach;
pub mod pod_binding;
pub mod podgc;
pub mod pv_controller;

pub use attach_detach::is_pod_terminated;
pub use pod_binding::{BindRefused, bind_refused, merge_binding};
pub use podgc::{PodGcReason, podgc_deletes, podgc_is_pod_terminated, podgc_is_pod_terminating};
pub use pv_controller::{Reclaim, is_volume_released, reclaim};

/// The Kubernetes version whose code these ports follow.
pub const KUBERNETES_VERSION: &str = "v1.37.2";

/// Each predicate (its Rust function's name, also the differential test's predicate name) and
/// the upstream function it ports.
pub const UPSTREAM: [(&str, &str); 7] = [
    (
        "is_pod_terminated",
        "pkg/volume/util/util.go: func IsPodTerminated",
    ),
    (
        "podgc_is_pod_terminated",
        "pkg/controller/podgc/gc_controller.go: func isPodTerminated",
    ),
    (
        "podgc_is_pod_terminating",
        "pkg/controller/podgc/gc_controller.go: func isPodTerminating",
    ),
    (
        "podgc_deletes",
        "pkg/controller/podgc/gc_controller.go: func (*PodGCController) gcTerminating, gcOrphaned, gcUnscheduledTerminating",
    ),
    (
        "is_volume_released",
        "pkg/controller/volume/persistentvolume/pv_controller.go: func (*PersistentVolumeController) isVolumeReleased",
    ),
    (
        "reclaim",
        "pkg/controller/volume/persistentvolume/pv_controller.go: func (*PersistentVolumeController) reclaimVolume",
    ),
    (
        "merge_binding",
        "pkg/registry/core/pod/storage/storage.go: func (*BindingREST) setPodNodeAndMetadata",
    ),
];

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
