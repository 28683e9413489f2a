//! The webhook registration, as one table: every `webhooks[]` entry of volguard's
//! MutatingWebhookConfiguration and ValidatingWebhookConfiguration with the requests it sends
//! (rules and CEL matchConditions, with the reasons beside them). Path, failure policy and side
//! effects come from the rule the entry posts to (`rules::rule::TABLE`), so they cannot drift.
//!
//! Two renderings of the same table: the kustomize base (`manifests/base/webhooks.yaml`) and
//! the chart's template (`charts/volguard/templates/webhooks.yaml`), both written by
//! `make manifests` and checked against this table by a unit test; the CEL policies
//! (`policies`) take their conditions from here too. Adding a rule adds its entry here and no
//! YAML by hand. The live check of the registration (`registration::drift`) compares against
//! `expected`.

pub use super::conditions::Condition;
use super::conditions::*;
pub use super::resource_rules::{ResourceRule, resource_rules};
pub use super::webhooks_yaml::{Flavour, render};
use crate::rules::enforcement::Mode;
use crate::rules::rule::{FENCE_PATHS, FailurePolicy, METADATA_PATHS, On, Rule, TABLE};
use serde_json::{Value, json};

/// One `webhooks[]` entry.
pub struct Entry {
    /// `webhooks[].name`; the rule table lists it under its rule.
    pub name: &'static str,
    pub rule: Rule,
    /// Why the entry exists and why its failure policy, written above it.
    pub comment: &'static str,
    /// The requests it sends: `rules[]` is derived from their doors (`resource_rules`).
    pub sends: Sends,
    /// Namespaced objects outside kube-system and volguard's namespace (`namespaceSelector`).
    pub namespaced: bool,
    /// Registered only while the RWO guard is on (the chart's `rwoGuard: off` drops it).
    pub rwo_guard: bool,
    /// Where the policies are installed, the apiserver refuses what this entry refuses while
    /// volguard is down (rules.md §9): the entry may then be `Ignore`.
    pub ignore_with_policies: bool,
    /// Registered `Ignore` whatever its rule's failure policy: the requests it sends are ones
    /// that must not wait on volguard (a rule's other entry covers what must).
    pub always_ignore: bool,
    pub conditions: &'static [&'static Condition],
}

/// Which of its rule's requests an entry sends.
#[derive(Debug, Clone, Copy)]
pub enum Sends {
    /// Every request its rule's row names (`RuleDef::on`).
    Row,
    /// These, when the rule's requests are split between entries with their own conditions or
    /// failure policies.
    Part(&'static [On]),
}

pub use super::failure_mode::{FAILURE_MODE_ANNOTATION, FailureMode};

pub use super::allow_list::{ALLOW_ANNOTATION, AllowList};

impl Entry {
    /// The requests this entry sends.
    pub fn requests(&self) -> &'static [On] {
        match self.sends {
            Sends::Row => self.rule.def().on,
            Sends::Part(on) => on,
        }
    }

    /// `rules[]`, derived from the requests' doors.
    pub fn resource_rules(&self) -> Vec<ResourceRule> {
        resource_rules(self.requests())
    }

    pub fn path(&self) -> &'static str {
        TABLE[self.rule as usize].path
    }

    /// As registered: the table's, unless `mode` makes it `Ignore`.
    pub fn failure_policy(&self, mode: &FailureMode) -> &'static str {
        let ignored = self.always_ignore
            || mode.force_ignore
            || mode.enforcement.mode(self.rule) == Mode::Warn
            || (mode.policies && self.ignore_with_policies);
        match self.rule.failure_policy() {
            FailurePolicy::Fail if !ignored => "Fail",
            _ => "Ignore",
        }
    }

    /// Whether the entry's rule allows the allow-list whatever the object (`AllowList`): every
    /// entry of the force-delete rule (a pod's DELETE and its Eviction alike).
    pub fn skips_allow_list(&self) -> bool {
        self.rule == Rule::ForceDelete
    }

    /// `matchConditions` as the apiserver stores them: the table's, then the allow-list's.
    pub fn match_conditions(&self, namespace: &str, allow: &AllowList) -> Vec<Value> {
        let allow = self.skips_allow_list().then(|| allow.condition()).flatten();
        self.conditions
            .iter()
            .map(|c| json!({"name": c.name, "expression": c.expression(namespace)}))
            .chain(allow)
            .collect()
    }

    pub fn side_effects(&self) -> &'static str {
        // A validating rule records a refusal as an Event (and the RWO guard writes its lock),
        // except for dry runs.
        if self.rule.mutating() {
            "None"
        } else {
            "NoneOnDryRun"
        }
    }
}

/// The mutating configuration's entries, in order.
pub const MUTATING: &[Entry] = &[
    PVC_FINALIZER,
    PV_FINALIZER,
    RWO_PLACEMENT_HINT,
    CONFIRMATION_STAMP,
];

/// The validating configuration's entries, in order.
pub const VALIDATING: &[Entry] = &[
    POD_CREATE,
    RWO_SINGLE_NODE,
    PVC_BINDING,
    FINALIZER_GUARD,
    CLAIM_METADATA,
    FORCE_DELETE,
    EVICTION,
    POD_STATUS,
    NODE_DELETE,
    DELETE_PROTECTION,
    VOLUME_RECLAIM,
    CLAIM_DELETE,
    NAMESPACE_DELETE,
    OUT_OF_SERVICE_TAINT,
    PROOF,
    FENCE_RECORD,
];

pub const PVC_FINALIZER: Entry = Entry {
    name: "pvc-finalizer.volguard.io",
    rule: Rule::PvcFinalizer,
    comment: "",
    sends: Sends::Row,
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&PVC_LACKS_FINALIZER],
};

pub const PV_FINALIZER: Entry = Entry {
    name: "pv-finalizer.volguard.io",
    rule: Rule::PvFinalizer,
    comment: "",
    sends: Sends::Row,
    namespaced: false,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&PV_LACKS_FINALIZER],
};

pub const RWO_PLACEMENT_HINT: Entry = Entry {
    name: "rwo-placement-hint.volguard.io",
    rule: Rule::RwoPlacementHint,
    comment: "",
    sends: Sends::Row,
    namespaced: true,
    rwo_guard: true,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&UNPLACED_WITH_CLAIMS],
};

pub const CONFIRMATION_STAMP: Entry = Entry {
    name: "confirmation-stamp.volguard.io",
    rule: Rule::ConfirmationStamp,
    comment: "Every path that stores metadata: the objects, their status subresources (their strategies reset\n\
              only spec), a namespace's finalize and a pod's bindings (the apiserver copies a Binding's\n\
              annotations onto the pod), and NodeFences.",
    sends: Sends::Row,
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&CHANGES_A_CONFIRMATION],
};

pub const POD_CREATE: Entry = Entry {
    name: "pod-create.volguard.io",
    rule: Rule::PodOnTerminatingClaim,
    comment: "",
    sends: Sends::Row,
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&HAS_CLAIMS],
};

pub const RWO_SINGLE_NODE: Entry = Entry {
    name: "rwo-single-node.volguard.io",
    rule: Rule::RwoSingleNode,
    comment: "rules.md §2f: one node per ReadWriteOnce claim. It writes the RWO lock onto the claim,\n\
              except for dryRun requests. Ignore: the scheduler retries a refused binding, and a\n\
              volguard that is down must not stop workloads. Pods created with spec.nodeName already set\n\
              (no scheduler), the scheduler's bind, and the legacy `bindings` resource (custom schedulers,\n\
              client libraries' create_namespaced_binding).",
    sends: Sends::Row,
    namespaced: true,
    rwo_guard: true,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&PLACES_A_POD_WITH_CLAIMS],
};

pub const PVC_BINDING: Entry = Entry {
    name: "pvc-binding.volguard.io",
    rule: Rule::BindingToTerminatingVolume,
    comment: "",
    sends: Sends::Row,
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&BINDS_A_VOLUME],
};

pub const FINALIZER_GUARD: Entry = Entry {
    name: "finalizer-guard.volguard.io",
    rule: Rule::FinalizerRemoval,
    comment: "rules.md §2c. Fail: the one check that prevents data loss; the upstream and volguard\n\
              controllers are excluded by matchConditions, so they are never blocked. The `/status`\n\
              subresources too: their strategies reset only `spec`, so `kubectl patch pvc X\n\
              --subresource=status` strips a finalizer as well as a plain patch does.",
    sends: Sends::Row,
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&NOT_A_PROTECTION_CONTROLLER, &DROPS_A_PROTECTION_FINALIZER],
};

pub const CLAIM_METADATA: Entry = Entry {
    name: "claim-metadata.volguard.io",
    rule: Rule::ClaimMetadata,
    comment: "rules.md §2f and §3. Fail: a forged or removed lock puts two nodes on one volume, a\n\
              re-pointed owner lets `kubectl delete pvc` release a mounted claim. `/status` too: metadata\n\
              sent through a claim's status subresource is stored; and CREATE: a claim created carrying a\n\
              lock is a forged lock (the door matrix found it).",
    sends: Sends::Row,
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&NOT_VOLGUARD_OR_THE_GC, &CHANGES_THE_LOCK_OR_A_POD_OWNER],
};

pub const FORCE_DELETE: Entry = Entry {
    name: "force-delete.volguard.io",
    rule: Rule::ForceDelete,
    comment: "rules.md §2d. Fail, narrowly: while volguard is down a force delete of a running pod must not\n\
              slip through; the conditions let only those requests reach volguard, so graceful deletes,\n\
              namespace deletion, PodGC (it marks a pod Failed first) and the kubelet never wait on it.\n\
              Where the policies are installed the apiserver itself refuses such a delete while volguard\n\
              is down (rules.md §9), so the entry is Ignore: nothing waits on volguard to delete a pod.",
    sends: Sends::Part(&[On::PodDelete]),
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: true,
    always_ignore: false,
    conditions: &[
        &GRACE_PERIOD_ZERO,
        &SCHEDULED_AND_NOT_TERMINAL,
        &NOT_OPTED_IN,
        &NOT_ITS_OWN_KUBELET,
    ],
};

pub const EVICTION: Entry = Entry {
    name: "eviction.volguard.io",
    rule: Rule::ForceDelete,
    comment: "The apiserver deletes an evicted pod without calling pod DELETE webhooks, so an Eviction with\n\
              gracePeriodSeconds 0 (`kubectl drain --grace-period=0`) is judged here by the same rule. CEL sees\n\
              only the Eviction, not the pod: volguard reads the pod and applies rows 1-9 (no policy can).",
    sends: Sends::Part(&[On::PodEviction]),
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&FORCE_EVICTION],
};

pub const POD_STATUS: Entry = Entry {
    name: "pod-status.volguard.io",
    rule: Rule::PodStatus,
    comment: "rules.md §2h: a terminal phase, or container states that end every running container, written\n\
              onto a running pod by anyone but its kubelet. Ignore:\n\
              PodGC must never wait on volguard. The conditions leave only that one transition (the kubelet's\n\
              frequent status updates never reach volguard).",
    sends: Sends::Row,
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&ENDS_A_SCHEDULED_POD, &NOT_ITS_OWN_KUBELET_AGAIN],
};

pub const NODE_DELETE: Entry = Entry {
    name: "node-delete.volguard.io",
    rule: Rule::NodeDelete,
    comment: "rules.md §7 \"Node deletion is a release\": a Node whose pods use claims is deleted only on proof,\n\
              and recorded. Ignore: a deletion that slips through while volguard is down leaves no record, so\n\
              \"node gone\" proves nothing and its pods wait for a person.",
    sends: Sends::Row,
    namespaced: false,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[],
};

pub const DELETE_PROTECTION: Entry = Entry {
    name: "delete-protection.volguard.io",
    rule: Rule::DeleteProtection,
    comment: "rules.md §2i: a claim, volume or namespace carrying volguard.io/delete-protection=true is\n\
              not deleted, and only a person lifts the protection (recorded), through any subresource that\n\
              stores metadata too. Fail: the conditions let only those requests reach volguard, and a\n\
              protected volume deleted while volguard is down is data lost.",
    sends: Sends::Row,
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&DELETES_OR_LIFTS_A_PROTECTION],
};

pub const VOLUME_RECLAIM: Entry = Entry {
    name: "volume-reclaim.volguard.io",
    rule: Rule::DeleteProtection,
    comment: "rules.md §2i judged by outcome: a volume update after which the PV controller would delete or wipe\n\
              its data (a reclaim policy flipped to Delete/Recycle on a Released volume, a rewritten claimRef)\n\
              while the volume, its claim or their namespace is marked, or a pod uses it. Fail: such an update\n\
              is the DELETE it amounts to; the conditions let only policy and claimRef changes reach volguard.",
    sends: Sends::Part(&[On::PvUpdate]),
    namespaced: false,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&MAY_RELEASE_A_VOLUME],
};

pub const CLAIM_DELETE: Entry = Entry {
    name: "claim-delete.volguard.io",
    rule: Rule::DeleteProtection,
    comment: "rules.md §2i: a claim bound to a protected volume whose reclaim policy is Delete (the provisioner\n\
              deletes the backing volume when the claim goes, before the PV's own DELETE is judged), or in a\n\
              protected namespace, is not deleted. CEL cannot see the volume or the namespace, so every other\n\
              claim DELETE reaches volguard: Ignore, claim deletion never waits on volguard (while it is down\n\
              the volume's own mark still holds the PV object, not its data: set reclaimPolicy Retain on\n\
              volumes whose data matters).",
    sends: Sends::Part(&[On::PvcDelete]),
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: true,
    conditions: &[&NOT_ITSELF_PROTECTED],
};

pub const NAMESPACE_DELETE: Entry = Entry {
    name: "namespace-delete.volguard.io",
    rule: Rule::DeleteProtection,
    comment: "rules.md §2i: a namespace holding a protected claim is not deleted (the namespace controller\n\
              would delete the claim with it). Every namespace DELETE reaches volguard (CEL cannot see\n\
              the claims), so Ignore: namespace deletion never waits on volguard, and a protected claim\n\
              still refuses its own deletion (the namespace then stays Terminating, its data intact).",
    sends: Sends::Part(&[On::NamespaceDelete]),
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: true,
    conditions: &[&NOT_ITSELF_PROTECTED],
};

pub const OUT_OF_SERVICE_TAINT: Entry = Entry {
    name: "out-of-service-taint.volguard.io",
    rule: Rule::OutOfServiceTaint,
    comment: "rules.md §7: adding node.kubernetes.io/out-of-service, or confirming a node down, needs proof\n\
              that the node is down (never while it heartbeats). Ignore: a person must be able to heal a\n\
              partition while volguard is down. CREATE too: a Node registered with the taint (or the\n\
              confirmation) already on it; and nodes/status, which stores a Node's metadata.",
    sends: Sends::Row,
    namespaced: false,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[&ADDS_OUT_OF_SERVICE],
};

pub const PROOF: Entry = Entry {
    name: "proof.volguard.io",
    rule: Rule::Proof,
    comment: "rules.md §8: a confirmation is judged when it is written, on every path that can store it: only a\n\
              person allowed to break glass sets one, stamped with their name. Fail: nobody sets a proof while\n\
              volguard is down; where the policies are installed the apiserver judges the same (its own\n\
              authorizer), and the entry is Ignore. Every path that stores metadata: the objects, their status\n\
              subresources (their strategies reset only spec), a namespace's finalize and a pod's bindings (the\n\
              apiserver copies a Binding's annotations onto the pod). The door-matrix scenario reads the\n\
              apiserver's discovery and fails on any path that persists a confirmation unjudged.",
    sends: Sends::Part(METADATA_PATHS),
    namespaced: true,
    rwo_guard: false,
    ignore_with_policies: true,
    always_ignore: false,
    conditions: &[&CHANGES_A_CONFIRMATION],
};

pub const FENCE_RECORD: Entry = Entry {
    name: "fence-record.volguard.io",
    rule: Rule::Proof,
    comment: "rules.md §8 \"Records\": a NodeFence's release record and status are volguard's alone, and its\n\
              confirmed-by is a person's confirmation. Nobody else writes NodeFences in normal operation.",
    sends: Sends::Part(FENCE_PATHS),
    namespaced: false,
    rwo_guard: false,
    ignore_with_policies: false,
    always_ignore: false,
    conditions: &[],
};

/// The two configurations: `(kind, name, entries)`.
pub const CONFIGURATIONS: &[(&str, &str, &[Entry])] = &[
    (
        "MutatingWebhookConfiguration",
        "volguard-mutating",
        MUTATING,
    ),
    (
        "ValidatingWebhookConfiguration",
        "volguard-validating",
        VALIDATING,
    ),
];

/// Every entry, both configurations.
pub fn entries() -> impl Iterator<Item = &'static Entry> {
    MUTATING.iter().chain(VALIDATING)
}

impl Entry {
    /// `rules[]` as the apiserver stores them.
    fn rules_object(&self) -> Vec<Value> {
        self.resource_rules()
            .iter()
            .map(ResourceRule::object)
            .collect()
    }

    /// The entry as the apiserver stores it, posting to `client_config` (a `service` or a `url`,
    /// with its `caBundle`): what the static manifests (`admission_dir`) write.
    pub fn object(
        &self,
        namespace: &str,
        mode: &FailureMode,
        allow: &AllowList,
        client_config: Value,
    ) -> Value {
        let mut w = json!({
            "name": self.name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": self.side_effects(),
            "timeoutSeconds": self.rule.def().timeout.seconds(),
            "failurePolicy": self.failure_policy(mode),
            "clientConfig": client_config,
            "rules": self.rules_object(),
        });
        if self.rule.mutating() {
            w["reinvocationPolicy"] = json!("Never");
        }
        if self.namespaced {
            w["namespaceSelector"] = json!({"matchExpressions": [{
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", namespace],
            }]});
        }
        let conditions = self.match_conditions(namespace, allow);
        if !conditions.is_empty() {
            w["matchConditions"] = conditions.into();
        }
        w
    }
}

/// What the live configurations must hold, per entry name: failure policy, path, rules and
/// conditions as the apiserver stores them (the drift check compares the live objects with it).
pub fn expected(
    namespace: &str,
    mode: &FailureMode,
    allow: &AllowList,
    rwo_guard: bool,
) -> Vec<(&'static str, Value)> {
    entries()
        .filter(|e| rwo_guard || !e.rwo_guard)
        .map(|e| {
            let rules = e.rules_object();
            let conditions = e.match_conditions(namespace, allow);
            (
                e.name,
                json!({
                    "failurePolicy": e.failure_policy(mode),
                    "path": e.path(),
                    "rules": rules,
                    "matchConditions": conditions,
                }),
            )
        })
        .collect()
}

#[cfg(test)]
#[path = "webhooks_tests.rs"]
mod tests;
