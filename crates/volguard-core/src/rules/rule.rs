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
/// under `rules/`, its arm in `admission::facts`' `judge` and, for a new kind of request, `On`.
/// Adding a rule is its file, one variant, one row, its arm in `judge` (the compiler asks for it)
/// and its webhook entry in `registration::webhooks` (tests hold the four together).
///
/// Columns: `name` is what operators type (`--enforcement NAME=warn`) and read (metric label
/// `endpoint`, logs) and ends its webhook entries' path (`/mutate/NAME` for a mutating rule,
/// `/validate/NAME` for the others); `failure_policy` as registered; `webhooks` the entries
/// (`webhooks[].name`) that post to that path; `on` each kind of request it judges (routing reads
/// this; a request meets its rules in table order). `rules/` stays pure: the facts are gathered
/// by `admission`, whose `judge` has one arm per rule and routes by nothing but this column.
/// In `Rule` order (a test checks it).
pub const TABLE: [RuleDef; Rule::ALL.len()] = [
    row!(PvcFinalizer "pvc-finalizer" mutate {
        failure_policy: FailurePolicy::Ignore,
        warnable: false,
        timeout: Timeout::Standard,
        webhooks: &["pvc-finalizer.volguard.io"],
        on: &[On::PvcCreate],
    }),
    row!(PvFinalizer "pv-finalizer" mutate {
        failure_policy: FailurePolicy::Ignore,
        warnable: false,
        timeout: Timeout::Standard,
        webhooks: &["pv-finalizer.volguard.io"],
        on: &[On::PvCreate],
    }),
    row!(PodOnTerminatingClaim "pod-on-terminating-claim" validate {
        failure_policy: FailurePolicy::Ignore,
        warnable: true,
        timeout: Timeout::Standard,
        webhooks: &["pod-create.volguard.io"],
        on: &[On::PodCreate],
    }),
    row!(FinalizerRemoval "finalizer-removal" validate {
        failure_policy: FailurePolicy::Fail,
        warnable: true,
        timeout: Timeout::Standard,
        webhooks: &["finalizer-guard.volguard.io"],
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
        webhooks: &["pvc-binding.volguard.io"],
        on: &[On::PvcCreate, On::PvcUpdate],
    }),
    row!(ClaimMetadata "claim-metadata" validate {
        failure_policy: FailurePolicy::Fail,
        warnable: true,
        timeout: Timeout::Standard,
        webhooks: &["claim-metadata.volguard.io"],
        on: &[On::PvcUpdate, On::PvcStatusUpdate, On::PvcCreate],
    }),
    row!(ForceDelete "force-delete" validate {
        failure_policy: FailurePolicy::Fail,
        warnable: true,
        timeout: Timeout::Standard,
        webhooks: &["force-delete.volguard.io", "eviction.volguard.io"],
        on: &[On::PodDelete, On::PodEviction],
    }),
    row!(RwoSingleNode "rwo-single-node" validate {
        failure_policy: FailurePolicy::Ignore,
        warnable: true,
        timeout: Timeout::Placement,
        webhooks: &["rwo-single-node.volguard.io"],
        on: &[On::PodCreate, On::PodBinding],
    }),
    row!(RwoPlacementHint "rwo-placement-hint" mutate {
        failure_policy: FailurePolicy::Ignore,
        warnable: false,
        timeout: Timeout::Standard,
        webhooks: &["rwo-placement-hint.volguard.io"],
        on: &[On::PodCreate],
    }),
    row!(PodStatus "pod-status" validate {
        failure_policy: FailurePolicy::Ignore,
        warnable: true,
        timeout: Timeout::Standard,
        webhooks: &["pod-status.volguard.io"],
        on: &[On::PodStatusUpdate],
    }),
    row!(ConfirmationStamp "confirmation-stamp" mutate {
        failure_policy: FailurePolicy::Ignore,
        warnable: false,
        timeout: Timeout::Standard,
        webhooks: &["confirmation-stamp.volguard.io"],
        on: PROOF_PATHS,
    }),
    row!(NodeDelete "node-delete" validate {
        failure_policy: FailurePolicy::Ignore,
        warnable: true,
        timeout: Timeout::Standard,
        webhooks: &["node-delete.volguard.io"],
        on: &[On::NodeDelete],
    }),
    row!(DeleteProtection "delete-protection" validate {
        failure_policy: FailurePolicy::Fail,
        warnable: false,
        timeout: Timeout::Standard,
        webhooks: &[
            "delete-protection.volguard.io",
            "volume-reclaim.volguard.io",
            "claim-delete.volguard.io",
            "namespace-delete.volguard.io",
        ],
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
        webhooks: &["out-of-service-taint.volguard.io"],
        on: &[On::NodeUpdate, On::NodeCreate, On::NodeStatusUpdate],
    }),
    row!(Proof "proof" validate {
        failure_policy: FailurePolicy::Fail,
        warnable: false,
        timeout: Timeout::Standard,
        webhooks: &["proof.volguard.io", "fence-record.volguard.io"],
        on: PROOF_PATHS,
    }),
];

/// Every write that can store a proof (a confirmation, its stamp, a NodeFence record): CREATE,
/// UPDATE and each subresource that stores metadata (rules.md §8 "every path").
/// A Binding (`pods/binding`, the legacy `bindings`) is one: the apiserver copies its
/// `metadata.annotations` onto the pod (`setPodNodeAndMetadata`), so it is judged as the CREATE
/// of what it carries.
const PROOF_PATHS: &[On] = &[
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
    pub webhooks: &'static [&'static str],
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

/// `On` and `On::ALL` from one list.
macro_rules! requests {
    ($($(#[$doc:meta])* $on:ident,)+) => {
        /// What a request is, as far as routing cares: kind, subresource and operation.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum On {
            $($(#[$doc])* $on,)+
        }

        impl On {
            pub const ALL: [On; [$(On::$on),+].len()] = [$(On::$on),+];
        }
    };
}
requests! {
    PodCreate,
    PodDelete,
    /// `CREATE pods/eviction` (an Eviction).
    PodEviction,
    /// `CREATE pods/binding`, or the legacy `bindings` resource.
    PodBinding,
    PvcCreate,
    PvcUpdate,
    /// `UPDATE persistentvolumeclaims/status`: the status strategy resets only `spec`, so metadata
    /// (finalizers) sent here is stored (rules.md §2c "every write path counts").
    PvcStatusUpdate,
    PvCreate,
    PvUpdate,
    PvStatusUpdate,
    /// `UPDATE pods/status`.
    PodStatusUpdate,
    /// `UPDATE nodes`.
    NodeUpdate,
    /// `DELETE nodes`.
    NodeDelete,
    /// `UPDATE pods` (not a subresource).
    PodUpdate,
    /// `UPDATE nodefences.volguard.io`.
    NodeFenceUpdate,
    PvcDelete,
    PvDelete,
    NamespaceDelete,
    NamespaceUpdate,
    NodeCreate,
    /// `UPDATE nodes/status` (the kubelet's; metadata sent here is stored too).
    NodeStatusUpdate,
    NamespaceCreate,
    NamespaceStatusUpdate,
    /// `UPDATE namespaces/finalize`.
    NamespaceFinalize,
    NodeFenceCreate,
    /// `UPDATE nodefences.volguard.io/status`.
    NodeFenceStatusUpdate,
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
