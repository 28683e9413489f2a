//! The rules by name, as one table: one webhook entry, one HTTP path, one failure policy, one
//! enforcement mode and the requests each judges (with the function that gathers their facts).
//! Names are the ones operators type (`--enforcement force-delete=warn`) and read in metrics and
//! logs.

use std::fmt;

/// What the apiserver does when it cannot reach volguard for this rule's webhook, and so what
/// volguard itself answers when it cannot get a rule's facts in time ("Deciding late").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Allow with a warning: never stop workloads because a fact was late.
    Ignore,
    /// Deny with code 500: the rule guards against data loss.
    Fail,
}

/// The rules, in the order of rules.md (and of `TABLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// rules.md §1: `kubernetes.io/pvc-protection` on PVC CREATE (mutating).
    PvcFinalizer,
    /// rules.md §1: `kubernetes.io/pv-protection` on PV CREATE (mutating).
    PvFinalizer,
    /// rules.md §2a.
    PodOnTerminatingClaim,
    /// rules.md §2c. Fail: stripping a protection finalizer from a volume in use deletes it.
    FinalizerRemoval,
    /// rules.md §2b.
    BindingToTerminatingVolume,
    /// rules.md §2f and §3: the RWO lock annotation is volguard's to write, and a mounted
    /// ephemeral claim keeps its pod owner. Fail: a forged or removed lock puts two nodes
    /// on one volume, a re-pointed owner lets `kubectl delete pvc` release a mounted claim;
    /// matchConditions let only those writes (by others than volguard) reach it.
    ClaimMetadata,
    /// rules.md §2d: pod DELETE and `pods/eviction` CREATE. Fail: while volguard is down a
    /// force delete of a running pod must not slip through; its matchConditions keep
    /// graceful deletes, PodGC and the kubelet away.
    ForceDelete,
    /// rules.md §2f: `pods/binding` CREATE and pod CREATE with `spec.nodeName`.
    RwoSingleNode,
    /// rules.md §2f placement hint: pod CREATE gets a preferred affinity to its claim's
    /// node (mutating).
    RwoPlacementHint,
    /// rules.md §2h: `UPDATE pods/status` that ends a running pod. Ignore: PodGC must never
    /// wait on volguard; matchConditions narrow it to a running pod made terminal by
    /// someone other than its kubelet.
    PodStatus,
    /// rules.md §8: whoever sets a `volguard.io/confirm-*` annotation (or confirms a
    /// NodeFence) is stamped in `volguard.io/confirmed-by` with the apiserver's username
    /// (mutating). Ignore: without it the guards still read the stored confirmation.
    ConfirmationStamp,
    /// rules.md §7 "Node deletion is a release": a Node whose pods use claims is deleted
    /// only on proof, and the deletion is recorded. Ignore: a deletion that slips through
    /// while volguard is down leaves no record, so "node gone" proves nothing and its pods
    /// wait for a person (upstream's behaviour, never a release).
    NodeDelete,
    /// rules.md §2i: deletion protection for storage (PVC, PV, Namespace). Fail: only
    /// requests that delete a protected object or lift a protection reach it (conditions),
    /// and a protected volume deleted while volguard is down is data lost; a Namespace's
    /// DELETE without the annotation is registered Ignore (its protected claims still
    /// refuse their own deletion).
    DeleteProtection,
    /// rules.md §7 guards: adding the out-of-service taint to a Node, or confirming it down
    /// (never while it heartbeats). Ignore: a person must be able to heal a partition while
    /// volguard is down.
    OutOfServiceTaint,
    /// rules.md §8 "a proof is judged when it is written": a confirmation or override is set
    /// only by a person allowed to break glass, stamped with their name, on every path that
    /// stores metadata; a NodeFence's release record and status are volguard's alone. Fail:
    /// nobody sets a proof while volguard is down (the policy holds the same inside the
    /// apiserver); matchConditions let only writes that touch a proof reach it.
    Proof,
}

impl Rule {
    pub const ALL: [Rule; 15] = [
        Rule::PvcFinalizer,
        Rule::PvFinalizer,
        Rule::PodOnTerminatingClaim,
        Rule::FinalizerRemoval,
        Rule::BindingToTerminatingVolume,
        Rule::ClaimMetadata,
        Rule::ForceDelete,
        Rule::RwoSingleNode,
        Rule::RwoPlacementHint,
        Rule::PodStatus,
        Rule::ConfirmationStamp,
        Rule::NodeDelete,
        Rule::DeleteProtection,
        Rule::OutOfServiceTaint,
        Rule::Proof,
    ];
}

/// One row of `TABLE`: the path and `mutating` follow from the name and the kind (`mutate` or
/// `validate`), so neither is written twice.
macro_rules! row {
    ($rule:ident $name:literal $kind:ident { $($field:ident: $value:expr),* $(,)? }) => {
        RuleDef {
            rule: Rule::$rule,
            name: $name,
            path: row!(@path $kind $name),
            mutating: row!(@mutating $kind),
            $($field: $value),*
        }
    };
    (@path mutate $name:literal) => { concat!("/mutate/", $name) };
    (@path validate $name:literal) => { concat!("/validate/", $name) };
    (@mutating mutate) => { true };
    (@mutating validate) => { false };
}

/// The rule table: one row per rule, and nothing about a rule lives anywhere else but its file
/// under `rules/`, its arm in `admission::facts`' `judge` and its webhook entries (their names,
/// CEL conditions and failure handling) in `registration::webhooks`, which post to its path and
/// send the requests of its `on` column (their `rules[]` derived from each request's `Doors`).
/// Adding a rule is its file, one variant, one row, its arm in `judge` (the compiler asks for it)
/// and its entry (a test asks for it); a new kind of request is one line of `requests!`.
///
/// Columns: `name` is what operators type (`--enforcement NAME=warn`) and read (metric label
/// `endpoint`, logs) and ends its webhook entries' path (`/mutate/NAME` for a mutating rule,
/// `/validate/NAME` for the others); `failure_policy` as registered; `on` each kind of request it
/// judges (routing reads this, the registration sends it; a request meets its rules in table
/// order). `rules/` stays pure: the facts are gathered by `admission`, whose `judge` has one arm
/// per rule and routes by nothing but this column.
/// In `Rule` order (a test checks it).
pub const TABLE: [RuleDef; Rule::ALL.len()] = [
    row!(PvcFinalizer "pvc-finalizer" mutate {
        failure_policy: FailurePolicy::Ignore,
        warnable: false,
        timeout: Timeout::Standard,
        on: &[On::PvcCreate],
    }),
    row!(PvFinalizer "pv-finalizer" mutate {
        failure_policy: FailurePolicy::Ignore,
        warnable: false,
        timeout: Timeout::Standard,
        on: &[On::PvCreate],
    }),
    row!(PodOnTerminatingClaim "pod-on-terminating-claim" validate {
        failure_policy: FailurePolicy::Ignore,
        warnable: true,
        timeout: Timeout::Standard,
        on: &[On::PodCreate],
    }),
    row!(FinalizerRemoval "finalizer-removal" validate {
        failure_policy: FailurePolicy::Fail,
        warnable: true,
        timeout: Timeout::Standard,
        on: &[
            On::PvcUpdate,
            On::PvcStatusUpdate,
            On::PvUpdate,
            On::PvStatusUpdate,
        ],
    }),
    row!(BindingToTerminatingVolume "binding-to-terminating-volume" validate {
        failure_policy: FailurePolicy::Ignore,
        warnable: true,
        timeout: Timeout::Standard,
        on: &[On::PvcCreate, On::PvcUpdate],
    }),
    row!(ClaimMetadata "claim-metadata" validate {
        failure_policy: FailurePolicy::Fail,
        warnable: true,
        timeout: Timeout::Standard,
        on: &[On::PvcUpdate, On::PvcStatusUpdate, On::PvcCreate],
    }),
    row!(ForceDelete "force-delete" validate {
        failure_policy: FailurePolicy::Fail,
        warnable: true,
        timeout: Timeout::Standard,
        on: &[On::PodDelete, On::PodEviction],
    }),
    row!(RwoSingleNode "rwo-single-node" validate {
        failure_policy: FailurePolicy::Ignore,
        warnable: true,
        timeout: Timeout::Placement,
        on: &[On::PodCreate, On::PodBinding],
    }),
    row!(RwoPlacementHint "rwo-placement-hint" mutate {
        failure_policy: FailurePolicy::Ignore,
        warnable: false,
        timeout: Timeout::Standard,
        on: &[On::PodCreate],
    }),
    row!(PodStatus "pod-status" validate {
        failure_policy: FailurePolicy::Ignore,
        warnable: true,
        timeout: Timeout::Standard,
        on: &[On::PodStatusUpdate],
    }),
    row!(ConfirmationStamp "confirmation-stamp" mutate {
        failure_policy: FailurePolicy::Ignore,
        warnable: false,
        timeout: Timeout::Standard,
        on: PROOF_PATHS,
    }),
    row!(NodeDelete "node-delete" validate {
        failure_policy: FailurePolicy::Ignore,
        warnable: true,
        timeout: Timeout::Standard,
        on: &[On::NodeDelete],
    }),
    row!(DeleteProtection "delete-protection" validate {
        failure_policy: FailurePolicy::Fail,
        warnable: false,
        timeout: Timeout::Standard,
        on: &[
            On::PvcDelete,
            On::PvDelete,
            On::NamespaceDelete,
            On::PvcUpdate,
            On::PvUpdate,
            On::NamespaceUpdate,
            On::PvcStatusUpdate,
            On::PvStatusUpdate,
            On::NamespaceStatusUpdate,
            On::NamespaceFinalize,
        ],
    }),
    row!(OutOfServiceTaint "out-of-service-taint" validate {
        failure_policy: FailurePolicy::Ignore,
        warnable: true,
        timeout: Timeout::Standard,
        on: &[On::NodeUpdate, On::NodeCreate, On::NodeStatusUpdate],
    }),
    row!(Proof "proof" validate {
        failure_policy: FailurePolicy::Fail,
        warnable: false,
        timeout: Timeout::Standard,
        on: PROOF_PATHS,
    }),
];

/// Every write that can store a proof (a confirmation, its stamp, a NodeFence record): CREATE,
/// UPDATE and each subresource that stores metadata (rules.md §8 "every path").
const PROOF_PATHS: &[On] = &PROOF_PATHS_ARRAY;
const PROOF_PATHS_ARRAY: [On; METADATA_PATHS.len() + FENCE_PATHS.len()] = {
    let mut out = [On::PodCreate; METADATA_PATHS.len() + FENCE_PATHS.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = match i < METADATA_PATHS.len() {
            true => METADATA_PATHS[i],
            false => FENCE_PATHS[i - METADATA_PATHS.len()],
        };
        i += 1;
    }
    out
};

/// Every write that stores the metadata of a core object volguard reads a proof on: the objects,
/// their status subresources (their strategies reset only `spec`), a namespace's finalize, a
/// pod's subresources that update it, and its Binding (`pods/binding`, the legacy `bindings`):
/// the apiserver copies a Binding's `metadata.annotations` onto the pod (`setPodNodeAndMetadata`),
/// so it is judged as the CREATE of what it carries. The door-matrix scenario reads the
/// apiserver's discovery and fails on any path that persists a confirmation unjudged.
pub const METADATA_PATHS: &[On] = &[
    On::PodCreate,
    On::PodBinding,
    On::PodUpdate,
    On::PodStatusUpdate,
    On::NodeCreate,
    On::NodeUpdate,
    On::NodeStatusUpdate,
    On::PvcCreate,
    On::PvcUpdate,
    On::PvcStatusUpdate,
    On::PvCreate,
    On::PvUpdate,
    On::PvStatusUpdate,
    On::NamespaceCreate,
    On::NamespaceUpdate,
    On::NamespaceStatusUpdate,
    On::NamespaceFinalize,
];

/// Every write of a NodeFence (a release record, its status, a person's confirmation).
pub const FENCE_PATHS: &[On] = &[
    On::NodeFenceCreate,
    On::NodeFenceUpdate,
    On::NodeFenceStatusUpdate,
];

/// One rule's row as data: what the webhook registration, the router, the metrics and the
/// enforcement flags know about it (the columns are described at `TABLE`).
#[derive(Debug, Clone, Copy)]
pub struct RuleDef {
    pub rule: Rule,
    pub name: &'static str,
    pub path: &'static str,
    pub failure_policy: FailurePolicy,
    pub mutating: bool,
    /// May run in `warn` (`--enforcement`): a would-be refusal allowed with a warning, its entries
    /// registered `Ignore`. Not the rules whose warn would be no rule at all: a proof anyone may
    /// forge, a deletion protection anyone may pass.
    pub warnable: bool,
    /// How long the apiserver waits for this rule's answer (its entries' `timeoutSeconds`), and
    /// so the budget serve decides within.
    pub timeout: Timeout,
    pub on: &'static [On],
}

/// How long the apiserver waits for a rule's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// `timeoutSeconds: 3`: the rule reads caches, and a live read or two when they cannot tell.
    Standard,
    /// `timeoutSeconds: 10`: the rule writes the RWO lock, one etcd write the apiserver may
    /// answer late when it is saturated. A write not answered in time leaves its placement
    /// refused and its claim held on that node for the lock's grace (rules.md §2f), so a late
    /// answer is worth more than a fast refusal; the scheduler binds off its scheduling loop.
    Placement,
}

impl Timeout {
    /// The entries' `timeoutSeconds` as installed by default.
    pub const fn seconds(self) -> u8 {
        match self {
            Timeout::Standard => 3,
            Timeout::Placement => 10,
        }
    }
}

/// Where a kind of request comes in: the doors the apiserver serves it on, as the webhook
/// registration's `rules[]` (and a policy's `resourceRules[]`) name them, and the `request.kind`
/// its AdmissionReview carries. Declared once per `On` (`requests!`): routing reads the kind, the
/// registration and the policies the doors, the metrics both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doors {
    /// `rules[].apiGroups` and `rules[].apiVersions`.
    pub group: &'static str,
    pub versions: &'static str,
    /// `rules[].resources`: each path (`resource` or `resource/subresource`) that stores this
    /// request's write.
    pub resources: &'static [&'static str],
    pub operation: &'static str,
    pub scope: Scope,
    /// The AdmissionReview's `request.kind`: the group and kind of the object sent.
    pub kind: (&'static str, &'static str),
}

/// `rules[].scope` of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

impl Scope {
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Namespaced => "Namespaced",
            Scope::Cluster => "Cluster",
        }
    }
}

/// A request on objects of the core group.
const fn core(
    operation: &'static str,
    kind: &'static str,
    resources: &'static [&'static str],
    scope: Scope,
) -> Doors {
    Doors {
        group: "",
        versions: "v1",
        resources,
        operation,
        scope,
        kind: ("", kind),
    }
}

/// A request on volguard's NodeFences (every version served).
const fn fence(operation: &'static str, resources: &'static [&'static str]) -> Doors {
    Doors {
        group: crate::model::fence::GROUP,
        versions: "*",
        resources,
        operation,
        scope: Scope::Cluster,
        kind: (crate::model::fence::GROUP, "NodeFence"),
    }
}

use Scope::{Cluster, Namespaced};

impl Doors {
    /// Whether an AdmissionReview of this kind, subresource and operation came in by one of
    /// these doors.
    pub fn admit(&self, group: &str, kind: &str, subresource: Option<&str>, op: &str) -> bool {
        self.operation == op
            && self.kind.1 == kind
            && self.kind.0 == group
            && self
                .resources
                .iter()
                .any(|r| r.split_once('/').map(|(_, s)| s) == subresource)
    }
}

/// `On`, `On::ALL` and each one's doors from one list.
macro_rules! requests {
    ($($(#[$doc:meta])* $on:ident = $doors:expr,)+) => {
        /// What a request is, as far as routing cares: kind, subresource and operation.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum On {
            $($(#[$doc])* $on,)+
        }

        impl On {
            pub const ALL: [On; [$(On::$on),+].len()] = [$(On::$on),+];
        }

        static DOORS: [Doors; On::ALL.len()] = [$($doors),+];
    };
}
requests! {
    PodCreate = core("CREATE", "Pod", &["pods"], Namespaced),
    PodDelete = core("DELETE", "Pod", &["pods"], Namespaced),
    /// `CREATE pods/eviction`: an Eviction (policy's kind), which deletes the pod without calling
    /// pod DELETE webhooks.
    PodEviction = Doors {
        kind: ("policy", "Eviction"),
        ..core("CREATE", "Eviction", &["pods/eviction"], Namespaced)
    },
    /// `CREATE pods/binding`, or the legacy `bindings` resource (POST .../namespaces/NS/bindings,
    /// still served: custom schedulers, client libraries' create_namespaced_binding).
    PodBinding = core("CREATE", "Binding", &["pods/binding", "bindings"], Namespaced),
    PvcCreate = core("CREATE", "PersistentVolumeClaim", &["persistentvolumeclaims"], Namespaced),
    PvcUpdate = core("UPDATE", "PersistentVolumeClaim", &["persistentvolumeclaims"], Namespaced),
    /// `UPDATE persistentvolumeclaims/status`: the status strategy resets only `spec`, so metadata
    /// (finalizers) sent here is stored (rules.md §2c "every write path counts").
    PvcStatusUpdate = core(
        "UPDATE",
        "PersistentVolumeClaim",
        &["persistentvolumeclaims/status"],
        Namespaced
    ),
    PvCreate = core("CREATE", "PersistentVolume", &["persistentvolumes"], Cluster),
    PvUpdate = core("UPDATE", "PersistentVolume", &["persistentvolumes"], Cluster),
    PvStatusUpdate = core("UPDATE", "PersistentVolume", &["persistentvolumes/status"], Cluster),
    /// `UPDATE pods/status`.
    PodStatusUpdate = core("UPDATE", "Pod", &["pods/status"], Namespaced),
    /// `UPDATE nodes`.
    NodeUpdate = core("UPDATE", "Node", &["nodes"], Cluster),
    /// `DELETE nodes`.
    NodeDelete = core("DELETE", "Node", &["nodes"], Cluster),
    /// `UPDATE pods`, and the subresources that store a pod's metadata as an update of the pod
    /// does.
    PodUpdate = core(
        "UPDATE",
        "Pod",
        &["pods", "pods/ephemeralcontainers", "pods/resize"],
        Namespaced
    ),
    /// `UPDATE nodefences.volguard.io`.
    NodeFenceUpdate = fence("UPDATE", &["nodefences"]),
    PvcDelete = core("DELETE", "PersistentVolumeClaim", &["persistentvolumeclaims"], Namespaced),
    PvDelete = core("DELETE", "PersistentVolume", &["persistentvolumes"], Cluster),
    NamespaceDelete = core("DELETE", "Namespace", &["namespaces"], Cluster),
    NamespaceUpdate = core("UPDATE", "Namespace", &["namespaces"], Cluster),
    NodeCreate = core("CREATE", "Node", &["nodes"], Cluster),
    /// `UPDATE nodes/status` (the kubelet's; metadata sent here is stored too).
    NodeStatusUpdate = core("UPDATE", "Node", &["nodes/status"], Cluster),
    NamespaceCreate = core("CREATE", "Namespace", &["namespaces"], Cluster),
    NamespaceStatusUpdate = core("UPDATE", "Namespace", &["namespaces/status"], Cluster),
    /// `UPDATE namespaces/finalize`.
    NamespaceFinalize = core("UPDATE", "Namespace", &["namespaces/finalize"], Cluster),
    NodeFenceCreate = fence("CREATE", &["nodefences"]),
    /// `UPDATE nodefences.volguard.io/status`.
    NodeFenceStatusUpdate = fence("UPDATE", &["nodefences/status"]),
}

/// What an AdmissionReview is, as far as routing cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A request some rule of the table judges.
    On(On),
    /// A kind volguard reads, in an operation or subresource no rule concerns.
    Other,
    /// A kind volguard has no rule for: a webhook configuration mistake (rules.md §2e).
    Unknown,
}

impl Target {
    /// By the review's `request.kind`, `subResource` and `operation` (no object decoded).
    pub fn of(group: &str, kind: &str, subresource: Option<&str>, op: &str) -> Target {
        match On::ALL
            .into_iter()
            .find(|on| on.doors().admit(group, kind, subresource, op))
        {
            Some(on) => Target::On(on),
            None if DOORS.iter().any(|d| d.kind == (group, kind)) => Target::Other,
            None => Target::Unknown,
        }
    }

    /// The rules that judge this request, in the rule table's order.
    pub fn rules(self) -> &'static [Rule] {
        match self {
            Target::On(on) => on.rules(),
            Target::Other | Target::Unknown => &[],
        }
    }
}

/// How many validating rules the table has.
const fn validating_count() -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < TABLE.len() {
        if !TABLE[i].mutating {
            n += 1;
        }
        i += 1;
    }
    n
}

/// How many rules may run in `warn`.
const fn warnable_count() -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < TABLE.len() {
        if TABLE[i].warnable {
            n += 1;
        }
        i += 1;
    }
    n
}

const ON_COUNT: usize = On::ALL.len();

/// Each kind of request's rules in table order, worked out at compile time from `TABLE`: routing
/// a request is one indexed load, as it was before the table existed (`make profile`).
const ROUTES: [([Rule; TABLE.len()], usize); ON_COUNT] = {
    let mut out = [([Rule::PvcFinalizer; TABLE.len()], 0); ON_COUNT];
    let mut i = 0;
    while i < TABLE.len() {
        let mut j = 0;
        while j < TABLE[i].on.len() {
            let on = TABLE[i].on[j] as usize;
            let n = out[on].1;
            out[on].0[n] = TABLE[i].rule;
            out[on].1 = n + 1;
            j += 1;
        }
        i += 1;
    }
    out
};

impl On {
    /// Where this request comes in.
    pub fn doors(self) -> &'static Doors {
        &DOORS[self as usize]
    }

    /// The rules that judge this request, in table order.
    pub fn rules(self) -> &'static [Rule] {
        let (rules, n) = &ROUTES[self as usize];
        &rules[..*n]
    }
}

impl Rule {
    /// The rules that may run in `warn` (table order): what `--enforcement`, the chart's schema and
    /// docs/rules.md list (tests keep the last two equal to this).
    pub const WARNABLE: [Rule; warnable_count()] = {
        let mut out = [Rule::PvcFinalizer; warnable_count()];
        let (mut i, mut n) = (0, 0);
        while i < TABLE.len() {
            if TABLE[i].warnable {
                out[n] = TABLE[i].rule;
                n += 1;
            }
            i += 1;
        }
        out
    };

    /// The validating rules, the ones `--enforcement` names (table order).
    pub const VALIDATING: [Rule; validating_count()] = {
        let mut out = [Rule::PvcFinalizer; validating_count()];
        let (mut i, mut n) = (0, 0);
        while i < TABLE.len() {
            if !TABLE[i].mutating {
                out[n] = TABLE[i].rule;
                n += 1;
            }
            i += 1;
        }
        out
    };

    /// This rule's row.
    pub const fn def(self) -> &'static RuleDef {
        &TABLE[self as usize]
    }

    pub const fn name(self) -> &'static str {
        self.def().name
    }

    pub const fn mutating(self) -> bool {
        self.def().mutating
    }

    /// The HTTP path of this rule's webhook entry.
    pub const fn path(self) -> &'static str {
        self.def().path
    }

    pub const fn failure_policy(self) -> FailurePolicy {
        self.def().failure_policy
    }

    pub fn from_name(name: &str) -> Option<Rule> {
        TABLE.iter().find(|d| d.name == name).map(|d| d.rule)
    }

    /// The answer when this rule cannot decide (`why`: what it could not do): its failure policy
    /// says, as the apiserver would were volguard unreachable (rules.md "Deciding late").
    pub fn undecided(self, row: &'static str, why: &str) -> super::Decision {
        match self.failure_policy() {
            FailurePolicy::Ignore => super::Decision::allow(row).with_warning(format!(
                "volguard could not check {} {why}; allowed as if volguard were unavailable",
                self.name()
            )),
            FailurePolicy::Fail => super::Decision::unavailable(
                row,
                format!(
                    "volguard could not decide {} {why}: refused, since it guards against data \
                     loss; retry",
                    self.name()
                ),
            ),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
#[path = "rule_tests.rs"]
mod tests;
