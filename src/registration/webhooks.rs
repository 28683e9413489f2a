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

use crate::rules::rule::{FailurePolicy, Rule, TABLE};
use serde_json::{Value, json};

/// Where volguard's namespace goes in an expression (its service accounts' names).
pub const NAMESPACE_TOKEN: &str = "${NAMESPACE}";

/// A CEL match condition: `lines` are folded with single spaces (YAML `>-`).
pub struct Condition {
    pub name: &'static str,
    /// Why, written above it (`#` lines).
    pub comment: &'static str,
    pub lines: &'static [&'static str],
}

impl Condition {
    /// The expression with volguard's namespace filled in.
    pub fn expression(&self, namespace: &str) -> String {
        self.lines.join(" ").replace(NAMESPACE_TOKEN, namespace)
    }
}

/// One rule of `rules[]`.
pub struct Resources {
    pub comment: &'static str,
    pub api_group: &'static str,
    pub api_versions: &'static str,
    pub operations: &'static [&'static str],
    pub resources: &'static [&'static str],
    pub scope: &'static str,
}

/// One `webhooks[]` entry.
pub struct Entry {
    /// `webhooks[].name`; the rule table lists it under its rule.
    pub name: &'static str,
    pub rule: Rule,
    /// Why the entry exists and why its failure policy, written above it.
    pub comment: &'static str,
    pub rules: &'static [Resources],
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

impl Entry {
    pub fn path(&self) -> &'static str {
        TABLE[self.rule as usize].path
    }

    pub fn failure_policy(&self, policies: bool) -> &'static str {
        let ignored = self.always_ignore || (policies && self.ignore_with_policies);
        match self.rule.failure_policy() {
            FailurePolicy::Fail if !ignored => "Fail",
            _ => "Ignore",
        }
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

const KUBELET: &[&str] = &[
    "!(request.userInfo.username == 'system:node:' + oldObject.spec.nodeName &&",
    "'system:nodes' in request.userInfo.groups)",
];

pub const PVC_LACKS_FINALIZER: Condition = Condition {
    name: "lacks-finalizer-or-carries-unused-since",
    comment: "Lacks the finalizer, or carries an unused-since mark (restored from a backup or re-applied\n\
              from `kubectl get -o yaml`): nothing is unused since before it existed.",
    lines: &[
        "!has(object.metadata.finalizers) || !object.metadata.finalizers.exists(f, f == 'kubernetes.io/pvc-protection') ||",
        "(has(object.metadata.annotations) && 'volguard.io/unused-since' in object.metadata.annotations)",
    ],
};

pub const PV_LACKS_FINALIZER: Condition = Condition {
    name: "lacks-finalizer",
    comment: "",
    lines: &[
        "!has(object.metadata.finalizers) || !object.metadata.finalizers.exists(f, f == 'kubernetes.io/pv-protection')",
    ],
};

const UNPLACED_WITH_CLAIMS: Condition = Condition {
    name: "unplaced-with-claims",
    comment: "Only pods the scheduler will place and that name a claim: a preferred node affinity to the\n\
              node that holds the claim's RWO lock (rules.md §2f placement hint).",
    lines: &[
        "(!has(object.spec.nodeName) || object.spec.nodeName == '') &&",
        "has(object.spec.volumes) && object.spec.volumes.exists(v, has(v.persistentVolumeClaim) || has(v.ephemeral))",
    ],
};

/// A confirmation or its stamp written (at CREATE: present). An absent annotation and an empty
/// one differ (`'='` marks presence), as they do to the rule.
pub const CHANGES_A_CONFIRMATION: Condition = Condition {
    name: "changes-a-confirmation-or-its-stamp",
    comment: "A confirmation set, changed or written at CREATE, or its stamp touched: who did it is judged\n\
              and stamped (rules.md §8). Every override of `rules::proof::OVERRIDES` and the stamp.",
    lines: &[
        "['volguard.io/allow-finalizer-removal', 'volguard.io/confirm-force-delete', 'volguard.io/allow-lock-removal',",
        "'volguard.io/confirm-node-down', 'volguard.io/confirmed-by'].exists(k,",
        "(request.operation == 'UPDATE' && has(oldObject.metadata.annotations) && k in oldObject.metadata.annotations ?",
        "'=' + oldObject.metadata.annotations[k] : '') !=",
        "(has(object.metadata.annotations) && k in object.metadata.annotations ? '=' + object.metadata.annotations[k] : ''))",
    ],
};

/// Every kind and path that can store a confirmation (rules.md §8 "every path"): CREATE, UPDATE
/// and each subresource that stores metadata.
pub const PROOF_RESOURCES: Resources = Resources {
    comment: "Every path that stores metadata: the objects, their status subresources (their strategies reset\n\
              only spec) and a namespace's finalize. The door-matrix scenario reads the apiserver's discovery\n\
              and fails on any path that persists a confirmation unjudged.",
    api_group: "",
    api_versions: "v1",
    operations: &["CREATE", "UPDATE"],
    resources: &[
        "pods",
        "pods/status",
        "pods/ephemeralcontainers",
        "pods/resize",
        "nodes",
        "nodes/status",
        "persistentvolumeclaims",
        "persistentvolumeclaims/status",
        "persistentvolumes",
        "persistentvolumes/status",
        "namespaces",
        "namespaces/status",
        "namespaces/finalize",
    ],
    scope: "*",
};

const FENCE_RESOURCES: Resources = Resources {
    comment: "",
    api_group: "volguard.io",
    api_versions: "*",
    operations: &["CREATE", "UPDATE"],
    resources: &["nodefences", "nodefences/status"],
    scope: "Cluster",
};

const HAS_CLAIMS: Condition = Condition {
    name: "has-claims",
    comment: "",
    lines: &[
        "has(object.spec.volumes) && object.spec.volumes.exists(v, has(v.persistentVolumeClaim) || has(v.ephemeral))",
    ],
};

const PLACES_A_POD_WITH_CLAIMS: Condition = Condition {
    name: "places-a-pod-with-claims",
    comment: "A Binding carries only the pod's name and the node: CEL cannot see whether the pod has\n\
              claims, so every binding reaches volguard (answered from its pod cache). A pod CREATE\n\
              reaches it only when it names a node and has a claim. (`request.subResource` is absent,\n\
              not empty, on a request for the pod itself and on the legacy `bindings` resource.)",
    lines: &[
        "request.resource.resource == 'bindings' ||",
        "(has(request.subResource) ? request.subResource == 'binding' :",
        "(has(object.spec.nodeName) && object.spec.nodeName != '' &&",
        "has(object.spec.volumes) && object.spec.volumes.exists(v, has(v.persistentVolumeClaim) || has(v.ephemeral))))",
    ],
};

const BINDS_A_VOLUME: Condition = Condition {
    name: "binds-a-volume",
    comment: "",
    lines: &[
        "has(object.spec.volumeName) && object.spec.volumeName != '' &&",
        "(request.operation == 'CREATE' || !has(oldObject.spec.volumeName) || oldObject.spec.volumeName != object.spec.volumeName)",
    ],
};

const NOT_A_PROTECTION_CONTROLLER: Condition = Condition {
    name: "not-a-protection-controller",
    comment: "",
    lines: &[
        "!(request.userInfo.username in ['system:kube-controller-manager',",
        "'system:serviceaccount:kube-system:pvc-protection-controller',",
        "'system:serviceaccount:kube-system:pv-protection-controller',",
        "'system:serviceaccount:${NAMESPACE}:volguard-controller'])",
    ],
};

const DROPS_A_PROTECTION_FINALIZER: Condition = Condition {
    name: "drops-a-protection-finalizer",
    comment: "Each protection finalizer on its own: an update that swaps one for the other removes one.",
    lines: &[
        "['kubernetes.io/pvc-protection', 'kubernetes.io/pv-protection'].exists(p,",
        "has(oldObject.metadata.finalizers) && p in oldObject.metadata.finalizers &&",
        "!(has(object.metadata.finalizers) && p in object.metadata.finalizers))",
    ],
};

pub const NOT_VOLGUARD_OR_THE_GC: Condition = Condition {
    name: "not-volguard-or-the-garbage-collector",
    comment: "volguard writes and clears the lock; the garbage collector orphans claims (--cascade=orphan).",
    lines: &[
        "!(request.userInfo.username in ['system:serviceaccount:${NAMESPACE}:volguard-webhook',",
        "'system:serviceaccount:${NAMESPACE}:volguard-controller',",
        "'system:serviceaccount:kube-system:generic-garbage-collector',",
        "'system:kube-controller-manager'])",
    ],
};

/// The lock annotation before and after differ (the claim-metadata policy judges only this). An
/// empty lock is not an absent one (`'='` marks presence), as to the rule.
pub const CHANGES_THE_LOCK: Condition = Condition {
    name: "changes-the-lock",
    comment: "",
    lines: &[
        "(has(oldObject.metadata.annotations) && 'volguard.io/rwo-lock' in oldObject.metadata.annotations ?",
        "'=' + oldObject.metadata.annotations['volguard.io/rwo-lock'] : '') !=",
        "(has(object.metadata.annotations) && 'volguard.io/rwo-lock' in object.metadata.annotations ?",
        "'=' + object.metadata.annotations['volguard.io/rwo-lock'] : '')",
    ],
};

const CHANGES_THE_LOCK_OR_A_POD_OWNER: Condition = Condition {
    name: "changes-the-lock-or-a-pod-owner",
    comment: "Only an update that changes the lock annotation or a Pod controller owner reaches volguard.",
    lines: &[
        "(has(oldObject.metadata.annotations) && 'volguard.io/rwo-lock' in oldObject.metadata.annotations ?",
        "'=' + oldObject.metadata.annotations['volguard.io/rwo-lock'] : '') !=",
        "(has(object.metadata.annotations) && 'volguard.io/rwo-lock' in object.metadata.annotations ?",
        "'=' + object.metadata.annotations['volguard.io/rwo-lock'] : '') ||",
        "(has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences.filter(o,",
        "o.kind == 'Pod' && has(o.controller) && o.controller).map(o, o.name + '/' + o.uid) : []) !=",
        "(has(object.metadata.ownerReferences) ? object.metadata.ownerReferences.filter(o,",
        "o.kind == 'Pod' && has(o.controller) && o.controller).map(o, o.name + '/' + o.uid) : [])",
    ],
};

pub const GRACE_PERIOD_ZERO: Condition = Condition {
    name: "grace-period-zero",
    comment: "The apiserver hands the DeleteOptions to CEL as `request.options`, after the pod strategy set\n\
              the grace period (unscheduled and terminal pods get 0, a negative one becomes 1): only\n\
              exactly 0 is a force delete.",
    lines: &[
        "has(request.options) && has(request.options.gracePeriodSeconds) &&",
        "request.options.gracePeriodSeconds == 0",
    ],
};

pub const SCHEDULED_AND_NOT_TERMINAL: Condition = Condition {
    name: "scheduled-and-not-terminal",
    comment: "",
    lines: &[
        "has(oldObject.spec.nodeName) && oldObject.spec.nodeName != '' &&",
        "!(has(oldObject.status.phase) && oldObject.status.phase in ['Succeeded', 'Failed'])",
    ],
};

pub const NOT_OPTED_IN: Condition = Condition {
    name: "not-opted-in",
    comment: "Row 6: the owner opted in to immediate termination; a graceful delete of such a pod (the\n\
              namespace controller's) arrives with grace 0 and must not wait on volguard.",
    lines: &[
        "!(has(oldObject.spec.terminationGracePeriodSeconds) && oldObject.spec.terminationGracePeriodSeconds == 0)",
    ],
};

pub const NOT_ITS_OWN_KUBELET: Condition = Condition {
    name: "not-its-own-kubelet",
    comment: "Its own kubelet is exactly username system:node:<node> *and* group system:nodes.",
    lines: KUBELET,
};

const FORCE_EVICTION: Condition = Condition {
    name: "force-eviction",
    comment: "Exactly 0: a negative grace period is turned into 1 s by the apiserver (graceful).",
    lines: &[
        "has(object.deleteOptions) && has(object.deleteOptions.gracePeriodSeconds) &&",
        "object.deleteOptions.gracePeriodSeconds == 0",
    ],
};

pub const ENDS_A_SCHEDULED_POD: Condition = Condition {
    name: "ends-a-scheduled-pod",
    comment: "A terminal phase, or container states of which none runs any more (each terminated or waiting:\n\
              the attach/detach controller then treats a terminating pod as stopped), written onto a\n\
              scheduled pod that was not terminal.",
    lines: &[
        "!(has(oldObject.status.phase) && oldObject.status.phase in ['Succeeded', 'Failed']) &&",
        "has(oldObject.spec.nodeName) && oldObject.spec.nodeName != '' &&",
        "((has(object.status.phase) && object.status.phase in ['Succeeded', 'Failed']) ||",
        "(has(oldObject.status.containerStatuses) && oldObject.status.containerStatuses.exists(c,",
        "!has(c.state) || (!has(c.state.terminated) && !has(c.state.waiting))) &&",
        "!(has(object.status.containerStatuses) && object.status.containerStatuses.exists(c,",
        "!has(c.state) || (!has(c.state.terminated) && !has(c.state.waiting))))))",
    ],
};

/// The same condition without the comment (it is written once per entry).
const NOT_ITS_OWN_KUBELET_AGAIN: Condition = Condition {
    name: "not-its-own-kubelet",
    comment: "",
    lines: KUBELET,
};

pub const DELETES_OR_LIFTS_A_PROTECTION: Condition = Condition {
    name: "deletes-or-lifts-a-protection",
    comment: "The stored object is protected, and the request deletes it or lifts the protection.",
    lines: &[
        "has(oldObject.metadata.annotations) && 'volguard.io/delete-protection' in oldObject.metadata.annotations &&",
        "oldObject.metadata.annotations['volguard.io/delete-protection'] == 'true' &&",
        "(request.operation == 'DELETE' || !(has(object.metadata.annotations) &&",
        "'volguard.io/delete-protection' in object.metadata.annotations &&",
        "object.metadata.annotations['volguard.io/delete-protection'] == 'true'))",
    ],
};

const NOT_ITSELF_PROTECTED: Condition = Condition {
    name: "not-itself-protected",
    comment: "An object protected itself is delete-protection.volguard.io's (Fail).",
    lines: &[
        "!(has(oldObject.metadata.annotations) && 'volguard.io/delete-protection' in oldObject.metadata.annotations &&",
        "oldObject.metadata.annotations['volguard.io/delete-protection'] == 'true')",
    ],
};

const ADDS_OUT_OF_SERVICE: Condition = Condition {
    name: "adds-out-of-service-or-confirms-down",
    comment: "",
    lines: &[
        "(has(object.spec.taints) && object.spec.taints.exists(t, t.key == 'node.kubernetes.io/out-of-service') &&",
        "!(has(oldObject.spec.taints) && oldObject.spec.taints.exists(t, t.key == 'node.kubernetes.io/out-of-service'))) ||",
        "(has(object.metadata.annotations) && 'volguard.io/confirm-node-down' in object.metadata.annotations &&",
        "object.metadata.annotations['volguard.io/confirm-node-down'] == 'true' &&",
        "!(has(oldObject.metadata.annotations) && 'volguard.io/confirm-node-down' in oldObject.metadata.annotations &&",
        "oldObject.metadata.annotations['volguard.io/confirm-node-down'] == 'true'))",
    ],
};

const fn core(
    operations: &'static [&'static str],
    resources: &'static [&'static str],
    scope: &'static str,
) -> Resources {
    Resources {
        comment: "",
        api_group: "",
        api_versions: "v1",
        operations,
        resources,
        scope,
    }
}

/// The mutating configuration's entries, in order.
pub const MUTATING: &[Entry] = &[
    Entry {
        name: "pvc-finalizer.volguard.io",
        rule: Rule::PvcFinalizer,
        comment: "",
        rules: &[core(&["CREATE"], &["persistentvolumeclaims"], "Namespaced")],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&PVC_LACKS_FINALIZER],
    },
    Entry {
        name: "pv-finalizer.volguard.io",
        rule: Rule::PvFinalizer,
        comment: "",
        rules: &[core(&["CREATE"], &["persistentvolumes"], "Cluster")],
        namespaced: false,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&PV_LACKS_FINALIZER],
    },
    Entry {
        name: "rwo-placement-hint.volguard.io",
        rule: Rule::RwoPlacementHint,
        comment: "",
        rules: &[core(&["CREATE"], &["pods"], "Namespaced")],
        namespaced: true,
        rwo_guard: true,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&UNPLACED_WITH_CLAIMS],
    },
    Entry {
        name: "confirmation-stamp.volguard.io",
        rule: Rule::ConfirmationStamp,
        comment: "",
        rules: &[PROOF_RESOURCES, FENCE_RESOURCES],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&CHANGES_A_CONFIRMATION],
    },
];

/// The validating configuration's entries, in order.
pub const VALIDATING: &[Entry] = &[
    Entry {
        name: "pod-create.volguard.io",
        rule: Rule::PodOnTerminatingClaim,
        comment: "",
        rules: &[core(&["CREATE"], &["pods"], "Namespaced")],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&HAS_CLAIMS],
    },
    Entry {
        name: "rwo-single-node.volguard.io",
        rule: Rule::RwoSingleNode,
        comment: "rules.md §2f: one node per ReadWriteOnce claim. It writes the RWO lock onto the claim,\n\
                  except for dryRun requests. Ignore: the scheduler retries a refused binding, and a\n\
                  volguard that is down must not stop workloads.",
        rules: &[Resources {
            comment: "The scheduler's bind, the legacy `bindings` resource (custom schedulers, client libraries'\n\
                      create_namespaced_binding), and pods created with spec.nodeName already set (no scheduler).",
            ..core(
                &["CREATE"],
                &["pods/binding", "pods", "bindings"],
                "Namespaced",
            )
        }],
        namespaced: true,
        rwo_guard: true,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&PLACES_A_POD_WITH_CLAIMS],
    },
    Entry {
        name: "pvc-binding.volguard.io",
        rule: Rule::BindingToTerminatingVolume,
        comment: "",
        rules: &[core(
            &["CREATE", "UPDATE"],
            &["persistentvolumeclaims"],
            "Namespaced",
        )],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&BINDS_A_VOLUME],
    },
    Entry {
        name: "finalizer-guard.volguard.io",
        rule: Rule::FinalizerRemoval,
        comment: "rules.md §2c. Fail: the one check that prevents data loss; the upstream and volguard\n\
                  controllers are excluded by matchConditions, so they are never blocked.",
        rules: &[Resources {
            comment: "The `/status` subresources too: their strategies reset only `spec`, so\n\
                      `kubectl patch pvc X --subresource=status` strips a finalizer as well as a plain patch does.",
            ..core(
                &["UPDATE"],
                &[
                    "persistentvolumeclaims",
                    "persistentvolumeclaims/status",
                    "persistentvolumes",
                    "persistentvolumes/status",
                ],
                "*",
            )
        }],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&NOT_A_PROTECTION_CONTROLLER, &DROPS_A_PROTECTION_FINALIZER],
    },
    Entry {
        name: "claim-metadata.volguard.io",
        rule: Rule::ClaimMetadata,
        comment: "rules.md §2f and §3. Fail: a forged or removed lock puts two nodes on one volume, a\n\
                  re-pointed owner lets `kubectl delete pvc` release a mounted claim.",
        rules: &[Resources {
            comment: "`/status` too: metadata sent through a claim's status subresource is stored.",
            ..core(
                &["UPDATE"],
                &["persistentvolumeclaims", "persistentvolumeclaims/status"],
                "Namespaced",
            )
        }],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&NOT_VOLGUARD_OR_THE_GC, &CHANGES_THE_LOCK_OR_A_POD_OWNER],
    },
    Entry {
        name: "force-delete.volguard.io",
        rule: Rule::ForceDelete,
        comment: "rules.md §2d. Fail, narrowly: while volguard is down a force delete of a running pod must not\n\
                  slip through; the conditions let only those requests reach volguard, so graceful deletes,\n\
                  namespace deletion, PodGC (it marks a pod Failed first) and the kubelet never wait on it.\n\
                  Where the policies are installed the apiserver itself refuses such a delete while volguard\n\
                  is down (rules.md §9), so the entry is Ignore: nothing waits on volguard to delete a pod.",
        rules: &[core(&["DELETE"], &["pods"], "Namespaced")],
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
    },
    Entry {
        name: "eviction.volguard.io",
        rule: Rule::ForceDelete,
        comment: "The apiserver deletes an evicted pod without calling pod DELETE webhooks, so an Eviction with\n\
                  gracePeriodSeconds 0 (`kubectl drain --grace-period=0`) is judged here by the same rule. CEL sees\n\
                  only the Eviction, not the pod: volguard reads the pod and applies rows 1-9 (no policy can).",
        rules: &[core(&["CREATE"], &["pods/eviction"], "Namespaced")],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&FORCE_EVICTION],
    },
    Entry {
        name: "pod-status.volguard.io",
        rule: Rule::PodStatus,
        comment: "rules.md §2h: a terminal phase, or container states that end every running container, written\n\
                  onto a running pod by anyone but its kubelet. Ignore:\n\
                  PodGC must never wait on volguard. The conditions leave only that one transition (the kubelet's\n\
                  frequent status updates never reach volguard).",
        rules: &[core(&["UPDATE"], &["pods/status"], "Namespaced")],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&ENDS_A_SCHEDULED_POD, &NOT_ITS_OWN_KUBELET_AGAIN],
    },
    Entry {
        name: "node-delete.volguard.io",
        rule: Rule::NodeDelete,
        comment: "rules.md §7 \"Node deletion is a release\": a Node whose pods use claims is deleted only on proof,\n\
                  and recorded. Ignore: a deletion that slips through while volguard is down leaves no record, so\n\
                  \"node gone\" proves nothing and its pods wait for a person.",
        rules: &[core(&["DELETE"], &["nodes"], "Cluster")],
        namespaced: false,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[],
    },
    Entry {
        name: "delete-protection.volguard.io",
        rule: Rule::DeleteProtection,
        comment: "rules.md §2i: a claim, volume or namespace carrying volguard.io/delete-protection=true is\n\
                  not deleted, and only a person lifts the protection (recorded). Fail: the conditions let\n\
                  only those requests reach volguard, and a protected volume deleted while volguard is down\n\
                  is data lost.",
        rules: &[
            core(
                &["DELETE", "UPDATE"],
                &["persistentvolumeclaims", "persistentvolumes", "namespaces"],
                "*",
            ),
            Resources {
                comment: "Lifting the mark through a subresource that stores metadata is judged too.",
                ..core(
                    &["UPDATE"],
                    &[
                        "persistentvolumeclaims/status",
                        "persistentvolumes/status",
                        "namespaces/status",
                        "namespaces/finalize",
                    ],
                    "*",
                )
            },
        ],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&DELETES_OR_LIFTS_A_PROTECTION],
    },
    Entry {
        name: "claim-delete.volguard.io",
        rule: Rule::DeleteProtection,
        comment: "rules.md §2i: a claim bound to a protected volume whose reclaim policy is Delete (the provisioner\n\
                  deletes the backing volume when the claim goes, before the PV's own DELETE is judged), or in a\n\
                  protected namespace, is not deleted. CEL cannot see the volume or the namespace, so every other\n\
                  claim DELETE reaches volguard: Ignore, claim deletion never waits on volguard (while it is down\n\
                  the volume's own mark still holds the PV object, not its data: set reclaimPolicy Retain on\n\
                  volumes whose data matters).",
        rules: &[core(&["DELETE"], &["persistentvolumeclaims"], "Namespaced")],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: true,
        conditions: &[&NOT_ITSELF_PROTECTED],
    },
    Entry {
        name: "namespace-delete.volguard.io",
        rule: Rule::DeleteProtection,
        comment: "rules.md §2i: a namespace holding a protected claim is not deleted (the namespace controller\n\
                  would delete the claim with it). Every namespace DELETE reaches volguard (CEL cannot see\n\
                  the claims), so Ignore: namespace deletion never waits on volguard, and a protected claim\n\
                  still refuses its own deletion (the namespace then stays Terminating, its data intact).",
        rules: &[core(&["DELETE"], &["namespaces"], "Cluster")],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: true,
        conditions: &[&NOT_ITSELF_PROTECTED],
    },
    Entry {
        name: "out-of-service-taint.volguard.io",
        rule: Rule::OutOfServiceTaint,
        comment: "rules.md §7: adding node.kubernetes.io/out-of-service, or confirming a node down, needs proof\n\
                  that the node is down (never while it heartbeats). Ignore: a person must be able to heal a\n\
                  partition while volguard is down.",
        rules: &[core(&["UPDATE"], &["nodes"], "Cluster")],
        namespaced: false,
        rwo_guard: false,
        ignore_with_policies: false,
        always_ignore: false,
        conditions: &[&ADDS_OUT_OF_SERVICE],
    },
    Entry {
        name: "proof.volguard.io",
        rule: Rule::Proof,
        comment: "rules.md §8: a confirmation is judged when it is written, on every path that can store it: only a\n\
                  person allowed to break glass sets one, stamped with their name. Fail: nobody sets a proof while\n\
                  volguard is down; where the policies are installed the apiserver judges the same (its own\n\
                  authorizer), and the entry is Ignore.",
        rules: &[PROOF_RESOURCES],
        namespaced: true,
        rwo_guard: false,
        ignore_with_policies: true,
        always_ignore: false,
        conditions: &[&CHANGES_A_CONFIRMATION],
    },
    Entry {
        name: "fence-record.volguard.io",
        rule: Rule::Proof,
        comment: "rules.md §8 \"Records\": a NodeFence's release record and status are volguard's alone, and its\n\
                  confirmed-by is a person's confirmation. Nobody else writes NodeFences in normal operation.",
        rules: &[FENCE_RESOURCES],
        namespaced: false,
        rwo_guard: false,
        ignore_with_policies: true,
        always_ignore: false,
        conditions: &[],
    },
];

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

/// Which rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Flavour {
    /// `manifests/base/webhooks.yaml`: namespace volguard-system, cert-manager's CA injection.
    Kustomize,
    /// `charts/volguard/templates/webhooks.yaml`: the chart's values and helpers.
    Chart,
}

const HEADER: &str = "\
volguard's webhook registrations: one entry per rule, each on its own path (the path names the
rule in volguard's metrics and logs), each with the failure policy it deserves (written beside
each entry): Ignore where a missed request is healed later or must never stop workloads, Fail
only where a request slipping through loses data, narrowed by matchConditions (CEL) so nothing
else waits on volguard. Each condition is exact, so nothing that matters skips volguard.
Validating entries are `sideEffects: NoneOnDryRun`: a refusal (or, in warn mode, a would-be
refusal) is recorded as an Event on the object, except for dry runs.";

fn comment(out: &mut String, indent: &str, text: &str) {
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            out.push_str(indent);
            out.push_str("#\n");
        } else {
            out.push_str(&format!("{indent}# {line}\n"));
        }
    }
}

fn flow_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|i| match *i {
            "" | "*" => format!("\"{i}\""),
            _ => i.to_string(),
        })
        .collect();
    format!("[{}]", quoted.join(", "))
}

fn scalar(s: &str) -> String {
    if s == "*" || s.is_empty() {
        format!("\"{s}\"")
    } else {
        s.to_string()
    }
}

/// One configuration's YAML in the chosen flavour.
fn render_configuration(out: &mut String, kind: &str, name: &str, entries: &[Entry], f: Flavour) {
    let namespace = match f {
        Flavour::Kustomize => super::policies::NAMESPACE,
        Flavour::Chart => "{{ .Release.Namespace }}",
    };
    out.push_str("apiVersion: admissionregistration.k8s.io/v1\n");
    out.push_str(&format!("kind: {kind}\nmetadata:\n  name: {name}\n"));
    match f {
        Flavour::Kustomize => out.push_str(&format!(
            "  annotations:\n    cert-manager.io/inject-ca-from: {namespace}/volguard-webhook\n"
        )),
        Flavour::Chart => out.push_str(
            "  labels: {{- include \"volguard.labels\" . | nindent 4 }}\n  \
             {{- include \"volguard.certManagerAnnotations\" . | nindent 2 }}\n",
        ),
    }
    out.push_str("webhooks:\n");
    for e in entries {
        if f == Flavour::Chart && e.rwo_guard {
            out.push_str("{{- if ne .Values.rwoGuard \"off\" }}\n");
        }
        comment(out, "", e.comment);
        out.push_str(&format!("- name: {}\n", e.name));
        out.push_str("  admissionReviewVersions: [v1]\n");
        out.push_str(&format!("  sideEffects: {}\n", e.side_effects()));
        match f {
            Flavour::Kustomize => {
                out.push_str("  timeoutSeconds: 3\n");
                out.push_str(&format!("  failurePolicy: {}\n", e.failure_policy(false)));
            }
            Flavour::Chart => {
                out.push_str("  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}\n");
                if e.ignore_with_policies {
                    out.push_str(&format!(
                        "  failurePolicy: {{{{ if .Values.policies.enabled }}}}{}{{{{ else }}}}{}{{{{ end }}}}\n",
                        e.failure_policy(true),
                        e.failure_policy(false)
                    ));
                } else {
                    out.push_str(&format!("  failurePolicy: {}\n", e.failure_policy(false)));
                }
            }
        }
        if e.rule.mutating() {
            out.push_str("  reinvocationPolicy: Never\n");
        }
        match f {
            Flavour::Kustomize => out.push_str(&format!(
                "  clientConfig:\n    service: {{name: volguard-webhook, namespace: {namespace}, path: {}, port: 443}}\n",
                e.path()
            )),
            Flavour::Chart => out.push_str(&format!(
                "  {{{{- include \"volguard.clientConfig\" (dict \"root\" . \"path\" \"{}\") | nindent 2 }}}}\n",
                e.path()
            )),
        }
        out.push_str("  rules:\n");
        for r in e.rules {
            comment(out, "  ", r.comment);
            out.push_str(&format!(
                "  - {{apiGroups: [{}], apiVersions: [{}], operations: {}, resources: {}, scope: {}}}\n",
                if r.api_group.is_empty() {
                    "\"\"".to_string()
                } else {
                    r.api_group.to_string()
                },
                scalar(r.api_versions),
                flow_list(r.operations),
                flow_list(r.resources),
                scalar(r.scope),
            ));
        }
        if e.namespaced {
            match f {
                Flavour::Kustomize => out.push_str(&format!(
                    "  namespaceSelector:\n    matchExpressions:\n    - {{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, {namespace}]}}\n"
                )),
                Flavour::Chart => {
                    out.push_str("  {{- include \"volguard.namespaceSelector\" . | nindent 2 }}\n")
                }
            }
        }
        if !e.conditions.is_empty() {
            out.push_str("  matchConditions:\n");
        }
        for c in e.conditions {
            comment(out, "  ", c.comment);
            out.push_str(&format!("  - name: {}\n", c.name));
            let lines: Vec<String> = c
                .lines
                .iter()
                .map(|l| l.replace(NAMESPACE_TOKEN, namespace))
                .collect();
            if let [one] = lines.as_slice() {
                // A double-quoted YAML scalar is a JSON string.
                let quoted = serde_json::to_string(one).unwrap_or_default();
                out.push_str(&format!("    expression: {quoted}\n"));
            } else {
                out.push_str("    expression: >-\n");
                for l in &lines {
                    out.push_str(&format!("      {l}\n"));
                }
            }
        }
        if f == Flavour::Chart && e.rwo_guard {
            out.push_str("{{- end }}\n");
        }
    }
}

/// Both configurations as one YAML stream.
pub fn render(f: Flavour) -> String {
    let mut out = String::from(
        "# Generated by `volguard manifests webhooks` (make manifests) from volguard's rule table: do not edit.\n",
    );
    comment(&mut out, "", HEADER);
    if f == Flavour::Kustomize {
        out.push_str("# cert-manager's cainjector fills caBundle (see certificates.yaml).\n");
    }
    for (i, (kind, name, entries)) in CONFIGURATIONS.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        render_configuration(&mut out, kind, name, entries, f);
    }
    out
}

impl Entry {
    /// The entry as the apiserver stores it, posting to `client_config` (a `service` or a `url`,
    /// with its `caBundle`): what the static manifests (`admission_dir`) write.
    pub fn object(&self, namespace: &str, policies: bool, client_config: Value) -> Value {
        let mut w = json!({
            "name": self.name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": self.side_effects(),
            "timeoutSeconds": 3,
            "failurePolicy": self.failure_policy(policies),
            "clientConfig": client_config,
            "rules": self.rules.iter().map(|r| json!({
                "apiGroups": [r.api_group],
                "apiVersions": [r.api_versions],
                "operations": r.operations,
                "resources": r.resources,
                "scope": r.scope,
            })).collect::<Vec<_>>(),
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
        if !self.conditions.is_empty() {
            w["matchConditions"] = self
                .conditions
                .iter()
                .map(|c| json!({"name": c.name, "expression": c.expression(namespace)}))
                .collect();
        }
        w
    }
}

/// What the live configurations must hold, per entry name: failure policy, path, rules and
/// conditions as the apiserver stores them (the drift check compares the live objects with it).
pub fn expected(namespace: &str, policies: bool, rwo_guard: bool) -> Vec<(&'static str, Value)> {
    entries()
        .filter(|e| rwo_guard || !e.rwo_guard)
        .map(|e| {
            let rules: Vec<Value> = e
                .rules
                .iter()
                .map(|r| {
                    json!({
                        "apiGroups": [r.api_group],
                        "apiVersions": [r.api_versions],
                        "operations": r.operations,
                        "resources": r.resources,
                        "scope": r.scope,
                    })
                })
                .collect();
            let conditions: Vec<Value> = e
                .conditions
                .iter()
                .map(|c| json!({"name": c.name, "expression": c.expression(namespace)}))
                .collect();
            (
                e.name,
                json!({
                    "failurePolicy": e.failure_policy(policies),
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
