//! The CEL match conditions of volguard's registration, with the reasons beside them: the
//! webhook entries (`webhooks`) and the policies (`policies`) import them from here, so a row
//! that holds in both layers is narrowed by the same expression in both.

use crate::rules::proof::proof_key;

/// Where volguard's namespace goes in an expression (its service accounts' names).
pub const NAMESPACE_TOKEN: &str = "${NAMESPACE}";

/// The namespace the generated manifests name (the chart substitutes its release namespace; a
/// kustomize overlay moves it with manifests/namespace).
pub const NAMESPACE: &str = "volguard-system";

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

pub const KUBELET: &[&str] = &[
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

pub const UNPLACED_WITH_CLAIMS: Condition = Condition {
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
        concat!(
            "['",
            proof_key!(allow_finalizer_removal),
            "', '",
            proof_key!(confirm_force_delete),
            "', '",
            proof_key!(allow_lock_removal),
            "',"
        ),
        concat!(
            "'",
            proof_key!(confirm_node_down),
            "', '",
            proof_key!(confirmed_by),
            "', '",
            proof_key!(confirmed_at),
            "'].exists(k,"
        ),
        "(request.operation == 'UPDATE' && has(oldObject.metadata.annotations) && k in oldObject.metadata.annotations ?",
        "'=' + oldObject.metadata.annotations[k] : '') !=",
        "(has(object.metadata.annotations) && k in object.metadata.annotations ? '=' + object.metadata.annotations[k] : ''))",
    ],
};

pub const HAS_CLAIMS: Condition = Condition {
    name: "has-claims",
    comment: "",
    lines: &[
        "has(object.spec.volumes) && object.spec.volumes.exists(v, has(v.persistentVolumeClaim) || has(v.ephemeral))",
    ],
};

pub const PLACES_A_POD_WITH_CLAIMS: Condition = Condition {
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

pub const BINDS_A_VOLUME: Condition = Condition {
    name: "binds-a-volume",
    comment: "",
    lines: &[
        "has(object.spec.volumeName) && object.spec.volumeName != '' &&",
        "(request.operation == 'CREATE' || !has(oldObject.spec.volumeName) || oldObject.spec.volumeName != object.spec.volumeName)",
    ],
};

pub const NOT_A_PROTECTION_CONTROLLER: Condition = Condition {
    name: "not-a-protection-controller",
    comment: "",
    lines: &[
        "!(request.userInfo.username in ['system:kube-controller-manager',",
        "'system:serviceaccount:kube-system:pvc-protection-controller',",
        "'system:serviceaccount:kube-system:pv-protection-controller',",
        "'system:serviceaccount:${NAMESPACE}:volguard-controller'])",
    ],
};

pub const DROPS_A_PROTECTION_FINALIZER: Condition = Condition {
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
    comment: "At CREATE there is no lock before: a claim created carrying one writes it.",
    lines: &[
        "(request.operation == 'UPDATE' && has(oldObject.metadata.annotations) &&",
        "'volguard.io/rwo-lock' in oldObject.metadata.annotations ?",
        "'=' + oldObject.metadata.annotations['volguard.io/rwo-lock'] : '') !=",
        "(has(object.metadata.annotations) && 'volguard.io/rwo-lock' in object.metadata.annotations ?",
        "'=' + object.metadata.annotations['volguard.io/rwo-lock'] : '')",
    ],
};

pub const CHANGES_THE_LOCK_OR_A_POD_OWNER: Condition = Condition {
    name: "changes-the-lock-or-a-pod-owner",
    comment: "Only a write that changes the lock annotation (at CREATE: carries one) or an update that\n\
              changes a Pod controller owner reaches volguard (a claim created with its pod owner, as the\n\
              ephemeral-volume controller does, does not).",
    lines: &[
        "(request.operation == 'UPDATE' && has(oldObject.metadata.annotations) &&",
        "'volguard.io/rwo-lock' in oldObject.metadata.annotations ?",
        "'=' + oldObject.metadata.annotations['volguard.io/rwo-lock'] : '') !=",
        "(has(object.metadata.annotations) && 'volguard.io/rwo-lock' in object.metadata.annotations ?",
        "'=' + object.metadata.annotations['volguard.io/rwo-lock'] : '') ||",
        "request.operation == 'UPDATE' &&",
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

pub const FORCE_EVICTION: Condition = Condition {
    name: "force-eviction",
    comment: "Exactly 0: a negative grace period is turned into 1 s by the apiserver (graceful).",
    lines: &[
        "has(object.deleteOptions) && has(object.deleteOptions.gracePeriodSeconds) &&",
        "object.deleteOptions.gracePeriodSeconds == 0",
    ],
};

pub const ENDS_A_SCHEDULED_POD: Condition = Condition {
    name: "ends-a-scheduled-pod",
    comment: "A terminal phase, or container states of which none runs any more (each terminated or waiting,\n\
              in every list upstream's IsPodTerminated reads: init, regular and ephemeral; the attach/detach\n\
              controller then treats a terminating pod as stopped), written onto a scheduled pod that was\n\
              not terminal.",
    lines: &[
        "!(has(oldObject.status.phase) && oldObject.status.phase in ['Succeeded', 'Failed']) &&",
        "has(oldObject.spec.nodeName) && oldObject.spec.nodeName != '' &&",
        "((has(object.status.phase) && object.status.phase in ['Succeeded', 'Failed']) ||",
        "(has(oldObject.status) && [oldObject.status].exists(s,",
        "(has(s.initContainerStatuses) && s.initContainerStatuses.exists(c, !has(c.state) || (!has(c.state.terminated) && !has(c.state.waiting)))) ||",
        "(has(s.containerStatuses) && s.containerStatuses.exists(c, !has(c.state) || (!has(c.state.terminated) && !has(c.state.waiting)))) ||",
        "(has(s.ephemeralContainerStatuses) && s.ephemeralContainerStatuses.exists(c, !has(c.state) || (!has(c.state.terminated) && !has(c.state.waiting))))) &&",
        "!(has(object.status) && [object.status].exists(s,",
        "(has(s.initContainerStatuses) && s.initContainerStatuses.exists(c, !has(c.state) || (!has(c.state.terminated) && !has(c.state.waiting)))) ||",
        "(has(s.containerStatuses) && s.containerStatuses.exists(c, !has(c.state) || (!has(c.state.terminated) && !has(c.state.waiting)))) ||",
        "(has(s.ephemeralContainerStatuses) && s.ephemeralContainerStatuses.exists(c, !has(c.state) || (!has(c.state.terminated) && !has(c.state.waiting))))))))",
    ],
};

/// The same condition without the comment (it is written once per entry).
pub const NOT_ITS_OWN_KUBELET_AGAIN: Condition = Condition {
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

pub const MAY_RELEASE_A_VOLUME: Condition = Condition {
    name: "may-release-a-volume",
    comment: "rules.md §2i judged by outcome: after the update the volume's policy deletes or wipes its data once\n\
              released, and the update changed that policy or the claimRef the PV controller's release reads. The\n\
              PV controller's own binding writes are its decisions, not guarded here.",
    lines: &[
        "(has(object.spec.persistentVolumeReclaimPolicy) && object.spec.persistentVolumeReclaimPolicy in ['Delete', 'Recycle']) &&",
        "((has(oldObject.spec.persistentVolumeReclaimPolicy) ? oldObject.spec.persistentVolumeReclaimPolicy : '') !=",
        "object.spec.persistentVolumeReclaimPolicy ||",
        "(has(oldObject.spec.claimRef) ? [oldObject.spec.claimRef] : []) != (has(object.spec.claimRef) ? [object.spec.claimRef] : [])) &&",
        "!(request.userInfo.username in ['system:kube-controller-manager',",
        "'system:serviceaccount:kube-system:persistent-volume-binder'])",
    ],
};

pub const NOT_ITSELF_PROTECTED: Condition = Condition {
    name: "not-itself-protected",
    comment: "An object protected itself is delete-protection.volguard.io's (Fail).",
    lines: &[
        "!(has(oldObject.metadata.annotations) && 'volguard.io/delete-protection' in oldObject.metadata.annotations &&",
        "oldObject.metadata.annotations['volguard.io/delete-protection'] == 'true')",
    ],
};

pub const ADDS_OUT_OF_SERVICE: Condition = Condition {
    name: "adds-out-of-service-or-confirms-down",
    comment: "Present at CREATE counts as added: a Node registered already tainted is the same release.",
    lines: &[
        "(has(object.spec.taints) && object.spec.taints.exists(t, t.key == 'node.kubernetes.io/out-of-service') &&",
        "!(request.operation == 'UPDATE' && has(oldObject.spec.taints) &&",
        "oldObject.spec.taints.exists(t, t.key == 'node.kubernetes.io/out-of-service'))) ||",
        concat!(
            "(has(object.metadata.annotations) && '",
            proof_key!(confirm_node_down),
            "' in object.metadata.annotations &&"
        ),
        concat!(
            "object.metadata.annotations['",
            proof_key!(confirm_node_down),
            "'] == 'true' &&"
        ),
        "!(request.operation == 'UPDATE' && has(oldObject.metadata.annotations) &&",
        concat!(
            "'",
            proof_key!(confirm_node_down),
            "' in oldObject.metadata.annotations &&"
        ),
        concat!(
            "oldObject.metadata.annotations['",
            proof_key!(confirm_node_down),
            "'] == 'true'))"
        ),
    ],
};

// The CEL building blocks of the policies (`policies`), as macros so that each expression is
// one `concat!`ed literal the static policies can inline parameters into.

/// CEL: the caller is a person (neither `system:*` nor a service account), as `is_human`.
macro_rules! person {
    () => {
        "(!request.userInfo.username.startsWith('system:') && !('system:serviceaccounts' in request.userInfo.groups))"
    };
}

/// CEL: the stored object's override counts (rules.md §8): break glass is not off (`rbac` or
/// `anyone`), and the override's stamp names a person. Who may set one was judged when it was
/// written (`volguard-proof`), so nothing is asked of the authorizer at use time.
macro_rules! stored_override_counts {
    ($key:ident) => {
        concat!(
            "(has(params.data) && params.data[?'break-glass'].orValue('rbac') == 'anyone' || \
(!has(params.data) || params.data[?'break-glass'].orValue('rbac') == 'rbac')) && \
has(oldObject.metadata.annotations) && oldObject.metadata.annotations[?'",
            proof_key!($key),
            concat!(
                "'].orValue('') == 'true' && \
!oldObject.metadata.annotations[?'",
                proof_key!(confirmed_by),
                "'].orValue('system:').startsWith('system:') && \
oldObject.metadata.annotations[?'",
                proof_key!(confirmed_by),
                "'].orValue('') != ''"
            )
        )
    };
}

/// CEL: `$o` (a Node: `object` or `oldObject`) reports Ready: its first Ready condition is True,
/// as upstream's `IsNodeReady` and `Node::ready` read it.
macro_rules! ready {
    ($o:ident) => {
        concat!(
            "(has(",
            stringify!($o),
            ".status) && has(",
            stringify!($o),
            ".status.conditions) && ",
            stringify!($o),
            ".status.conditions.exists(c, c.type == 'Ready') && ",
            stringify!($o),
            ".status.conditions.filter(c, c.type == 'Ready')[0].status == 'True')"
        )
    };
}

/// CEL: this write adds the out-of-service taint to a Node (present at CREATE counts as added).
macro_rules! adds_out_of_service {
    () => {
        "has(object.spec.taints) && object.spec.taints.exists(t, t.key == 'node.kubernetes.io/out-of-service') && \
!(request.operation == 'UPDATE' && has(oldObject.spec.taints) && \
oldObject.spec.taints.exists(t, t.key == 'node.kubernetes.io/out-of-service'))"
    };
}

/// CEL: the overrides this write sets (`"true"` now, not before; at CREATE there is no before),
/// as `rules::proof::newly_set`.
macro_rules! newly_set {
    () => {
        concat!("['", proof_key!(allow_finalizer_removal), "', '", proof_key!(confirm_force_delete), "', \
'", proof_key!(allow_lock_removal), "', '", proof_key!(confirm_node_down), "'].filter(k, has(object.metadata.annotations) && \
object.metadata.annotations[?k].orValue('') == 'true' && !(request.operation == 'UPDATE' && \
has(oldObject.metadata.annotations) && oldObject.metadata.annotations[?k].orValue('') == 'true'))")
    };
}

/// CEL: the stamp after and before this write ('' when absent).
macro_rules! stamp {
    (new) => {
        concat!(
            "(has(object.metadata.annotations) ? object.metadata.annotations[?'",
            proof_key!(confirmed_by),
            "'].orValue('') : '')"
        )
    };
    (old) => {
        concat!(
            "(request.operation == 'UPDATE' && has(oldObject.metadata.annotations) ? \
oldObject.metadata.annotations[?'",
            proof_key!(confirmed_by),
            "'].orValue('') : '')"
        )
    };
}

/// CEL: the stamp's time after and before this write ('' when absent).
macro_rules! stamp_at {
    (new) => {
        concat!(
            "(has(object.metadata.annotations) ? object.metadata.annotations[?'",
            proof_key!(confirmed_at),
            "'].orValue('') : '')"
        )
    };
    (old) => {
        concat!(
            "(request.operation == 'UPDATE' && has(oldObject.metadata.annotations) ? \
oldObject.metadata.annotations[?'",
            proof_key!(confirmed_at),
            "'].orValue('') : '')"
        )
    };
}

/// A CEL list literal of `items`, each a single-quoted string (`\\` and `'` escaped): how a value
/// known when the registration is written (a flag, a chart value) becomes part of an expression.
pub fn cel_list(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|i| format!("'{}'", i.replace('\\', "\\\\").replace('\'', "\\'")))
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// The name of the condition that keeps the force-delete allow-list's requests inside the
/// apiserver (`not_allow_listed`).
pub const NOT_ALLOW_LISTED: &str = "not-allow-listed";

/// Why `not_allow_listed` exists, written above it.
pub const NOT_ALLOW_LISTED_COMMENT: &str = "rules.md §2d row 7: an identity of --force-delete-allow-user / --force-delete-allow-group is\n\
     allowed whatever the pod, so its force deletes are answered here and never wait on volguard.";

/// CEL: the caller is none of `users` and in none of `groups` (`--force-delete-allow-user`,
/// `--force-delete-allow-group`: rules.md §2d row 7, allowed whatever the pod).
pub fn not_allow_listed(users: &[String], groups: &[String]) -> String {
    format!(
        "!(request.userInfo.username in {} || request.userInfo.groups.exists(g, g in {}))",
        cel_list(users),
        cel_list(groups)
    )
}

/// CEL: a comma-separated list parameter (empty when absent).
macro_rules! param_list {
    ($key:literal) => {
        concat!(
            "(has(params.data) && '",
            $key,
            "' in params.data && params.data['",
            $key,
            "'] != '' ? params.data['",
            $key,
            "'].split(',') : [])"
        )
    };
}

pub(crate) use {
    adds_out_of_service, newly_set, param_list, person, ready, stamp, stamp_at,
    stored_override_counts,
};
