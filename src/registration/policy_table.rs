//! The policy table: each rule's rows that need no other object, as the CEL the apiserver
//! evaluates (rules.md §9). `policies.rs` says what a policy is and how it renders; this is which
//! policies there are and what each allows, in rules.md's order.

use super::conditions::{
    self, adds_out_of_service, newly_set, param_list, person, ready, stamp, stamp_at,
    stored_override_counts,
};
use super::policies::{Body, Policy};
use super::webhooks;
use crate::rules::proof::proof_key;

/// The table. Order: rules.md's.
pub const POLICIES: &[Policy] = &[
    Policy {
        name: None,
        entry: &webhooks::PVC_FINALIZER,
        rows: "§1 the protection finalizer on PVC CREATE; a carried unused-since mark dropped",
        match_conditions: &[&conditions::PVC_LACKS_FINALIZER],
        body: Body::Mutate {
            json_patch: "(!has(object.metadata.finalizers) ? \
[JSONPatch{op: 'add', path: '/metadata/finalizers', value: ['kubernetes.io/pvc-protection']}] : \
object.metadata.finalizers.exists(f, f == 'kubernetes.io/pvc-protection') ? [] : \
[JSONPatch{op: 'add', path: '/metadata/finalizers/-', value: 'kubernetes.io/pvc-protection'}]) + \
(has(object.metadata.annotations) && 'volguard.io/unused-since' in object.metadata.annotations ? \
[JSONPatch{op: 'remove', path: '/metadata/annotations/volguard.io~1unused-since'}] : [])",
        },
    },
    Policy {
        name: None,
        entry: &webhooks::PV_FINALIZER,
        rows: "§1 the protection finalizer on PV CREATE",
        match_conditions: &[&conditions::PV_LACKS_FINALIZER],
        body: Body::Mutate {
            json_patch: "!has(object.metadata.finalizers) ? \
[JSONPatch{op: 'add', path: '/metadata/finalizers', value: ['kubernetes.io/pv-protection']}] : \
[JSONPatch{op: 'add', path: '/metadata/finalizers/-', value: 'kubernetes.io/pv-protection'}]",
        },
    },
    Policy {
        name: None,
        entry: &webhooks::CLAIM_METADATA,
        rows: "§2f the RWO lock annotation: written by volguard only; a person removes a stale one with the break-glass annotation",
        // The same callers exempt as the webhook's entry: volguard and the garbage collector.
        match_conditions: &[
            &conditions::NOT_VOLGUARD_OR_THE_GC,
            &conditions::CHANGES_THE_LOCK,
        ],
        body: Body::Validate {
            allowed: concat!(
                "request.userInfo.username in ",
                param_list!("volguard-identities"),
                " || (!(has(object.metadata.annotations) && 'volguard.io/rwo-lock' in object.metadata.annotations) && ",
                person!(),
                " && ",
                stored_override_counts!(allow_lock_removal),
                ")"
            ),
            message: concat!(
                "'changing the ReadWriteOnce lock (volguard.io/rwo-lock) of PersistentVolumeClaim \"' + \
oldObject.metadata.name + '\" refused: only volguard writes it (the placement guard trusts it to keep the volume on \
one node). If the lock is stale and volguard has not cleared it, a person may annotate the claim \
",
                proof_key!(allow_lock_removal),
                "=true and remove it'"
            ),
        },
    },
    Policy {
        name: None,
        entry: &webhooks::FORCE_DELETE,
        rows: "§2d rows 2, 3, 6, 7, 8 (rows 4-5 read the Node: the webhook's; PodGC and volguard's controller, which deletes what PodGC would on a node it released, pass here by identity)",
        match_conditions: &[
            &conditions::GRACE_PERIOD_ZERO,
            &conditions::SCHEDULED_AND_NOT_TERMINAL,
            &conditions::NOT_OPTED_IN,
            &conditions::NOT_ITS_OWN_KUBELET,
        ],
        body: Body::Validate {
            allowed: concat!(
                "request.userInfo.username == 'system:serviceaccount:kube-system:pod-garbage-collector' || \
request.userInfo.username in ",
                param_list!("volguard-identities"),
                " || request.userInfo.username in ",
                param_list!("force-delete-users"),
                " || request.userInfo.groups.exists(g, g in ",
                param_list!("force-delete-groups"),
                ") || (",
                person!(),
                " && ((has(params.data) && params.data[?'human-force-delete'].orValue('confirm') == 'warn') || (",
                stored_override_counts!(confirm_force_delete),
                ")))"
            ),
            message: concat!(
                "'force delete of pod \"' + oldObject.metadata.name + '\" refused: it is ' + \
(has(oldObject.status.phase) ? oldObject.status.phase : 'Pending') + ' on node \"' + oldObject.spec.nodeName + \
'\" and may keep running there, writing to its volumes, after it is removed from the API. Delete it without --force \
and let the kubelet stop it. If the node is really down, in this order: confirm it (`kubectl volguard fence confirm ' + \
oldObject.spec.nodeName + '`, or annotate the node ",
                proof_key!(confirm_node_down),
                "=true), then taint it \
node.kubernetes.io/out-of-service=nodeshutdown:NoExecute (PodGC then removes its pods). A person granted volguard\\'s break-glass role (ClusterRole volguard-break-glass) who \
accepts the risk can annotate the pod ",
                proof_key!(confirm_force_delete),
                "=true and retry'"
            ),
        },
    },
    Policy {
        name: None,
        entry: &webhooks::POD_STATUS,
        rows: "§2h rows 1-3, 6, a terminal phase or every running container ended (rows 4-5 read the Node: the webhook's; PodGC passes here by identity)",
        match_conditions: &[
            &conditions::ENDS_A_SCHEDULED_POD,
            &conditions::NOT_ITS_OWN_KUBELET,
        ],
        body: Body::Validate {
            allowed: concat!(
                "request.userInfo.username == 'system:serviceaccount:kube-system:pod-garbage-collector' || (",
                person!(),
                " && ",
                stored_override_counts!(confirm_force_delete),
                ")"
            ),
            message: concat!(
                "'setting pod \"' + oldObject.metadata.name + '\" ' + \
(has(object.status.phase) && object.status.phase in ['Succeeded', 'Failed'] ? 'to phase ' + object.status.phase : \
'containers to terminated or waiting (none running)') + ' refused: it is ' + (has(oldObject.status.phase) ? oldObject.status.phase : 'Pending') + ' on node \"' + \
oldObject.spec.nodeName + '\", and only its kubelet may end it there. A terminal phase lets PodGC delete the pod and the \
attach/detach controller detach its volumes while its containers may still write to them. Delete the pod gracefully \
instead; if the node is really down, taint it node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, or, as a person \
granted volguard\\'s break-glass role (ClusterRole volguard-break-glass), annotate the pod \
",
                proof_key!(confirm_force_delete),
                "=true to accept the risk'"
            ),
        },
    },
    Policy {
        name: None,
        entry: &webhooks::PROOF,
        rows: "§8 a confirmation is set only by a person allowed to break glass (the apiserver's authorizer, asked \
for the setter), stamped with their name; nobody else writes the stamp",
        match_conditions: &[&conditions::CHANGES_A_CONFIRMATION],
        body: Body::Validate {
            allowed: concat!(
                "request.userInfo.username in ",
                param_list!("volguard-identities"),
                " || (size(",
                newly_set!(),
                ") == 0 ? (",
                stamp!(new),
                " == '' || ",
                stamp!(new),
                " == ",
                stamp!(old),
                // Nor its time: an override's expiry cannot be moved by hand (removing it is
                // allowed: the override then counts for nothing).
                ") && (",
                stamp_at!(new),
                " == '' || ",
                stamp_at!(new),
                " == ",
                stamp_at!(old),
                ") : (",
                person!(),
                " && ",
                stamp!(new),
                " == request.userInfo.username && (has(params.data) && params.data[?'break-glass'].orValue('rbac') == 'anyone' || \
(!has(params.data) || params.data[?'break-glass'].orValue('rbac') == 'rbac') && ",
                newly_set!(),
                concat!(
                    ".all(k, (has(request.namespace) && request.namespace != '' ? authorizer.group('volguard.io').resource('breakglass')\
.namespace(request.namespace) : authorizer.group('volguard.io').resource('breakglass')).name(\
{'",
                    proof_key!(allow_finalizer_removal),
                    "': 'finalizer-removal', '",
                    proof_key!(confirm_force_delete),
                    "': 'force-delete', \
'",
                    proof_key!(allow_lock_removal),
                    "': 'claim-metadata', '",
                    proof_key!(confirm_node_down),
                    "': 'out-of-service-taint'}[k])\
.check('use').allowed()))))"
                )
            ),
            message: concat!(
                "'writing a volguard.io confirmation or its stamp (",
                proof_key!(confirmed_by),
                ") on ' + request.kind.kind + \
' \"' + (has(object.metadata.name) ? object.metadata.name : '') + '\" refused: a confirmation is set only by a person \
(not a service account, node or system identity) granted volguard\\'s break-glass role (ClusterRole volguard-break-glass), \
with ",
                proof_key!(confirmed_by),
                " naming that person in the same request; nobody else writes the stamp'"
            ),
        },
    },
    Policy {
        name: Some("volguard-volume-policy"),
        entry: &webhooks::VOLUME_RECLAIM,
        rows: "§2i row delete-protection-volume-policy: a marked volume's reclaim policy is not turned to Delete or \
Recycle (row delete-protection-volume-released reads the claim and its pods: the webhook's)",
        match_conditions: &[&conditions::MAY_RELEASE_A_VOLUME],
        body: Body::Validate {
            allowed: "!(has(oldObject.metadata.annotations) && \
oldObject.metadata.annotations[?'volguard.io/delete-protection'].orValue('') == 'true') || \
(has(oldObject.spec.persistentVolumeReclaimPolicy) && oldObject.spec.persistentVolumeReclaimPolicy in ['Delete', 'Recycle'])",
            message: "'setting the reclaim policy of PersistentVolume \"' + oldObject.metadata.name + '\" to ' + \
object.spec.persistentVolumeReclaimPolicy + ' refused: it carries volguard.io/delete-protection=true, and with that \
policy the PV controller deletes (or wipes) its data as soon as its claim goes. If its data may really go, a person \
lifts the protection first (kubectl annotate pv ' + oldObject.metadata.name + ' volguard.io/delete-protection-)'",
        },
    },
    Policy {
        name: Some("volguard-fence-record"),
        entry: &webhooks::FENCE_RECORD,
        rows: concat!(
            "§8 records: a NodeFence's release record (spec.release) and its status are written by volguard alone; \
its confirmation (",
            proof_key!(confirmed_by),
            ") is set only by a person allowed to break glass, naming themselves"
        ),
        match_conditions: &[],
        // The status subresource keeps the spec as stored and the object keeps the status, so
        // comparing both on every path is exact; at CREATE the apiserver drops the status.
        body: Body::Validate {
            allowed: concat!(
                "request.userInfo.username in ",
                param_list!("volguard-identities"),
                " || (request.operation == 'CREATE' ? !has(object.spec.release) : \
((has(object.spec.release) ? [object.spec.release] : []) == (has(oldObject.spec.release) ? [oldObject.spec.release] : []) && \
(has(object.status) ? [object.status] : []) == (has(oldObject.status) ? [oldObject.status] : []))) && (",
                stamp!(new),
                " == '' || ",
                stamp!(new),
                " == ",
                stamp!(old),
                " || ",
                person!(),
                " && ",
                stamp!(new),
                " == request.userInfo.username && (has(params.data) && params.data[?'break-glass'].orValue('rbac') == 'anyone' || \
(!has(params.data) || params.data[?'break-glass'].orValue('rbac') == 'rbac') && \
authorizer.group('volguard.io').resource('breakglass').name('fence-confirm').check('use').allowed()))"
            ),
            message: concat!(
                "'writing the release record (spec.release), the status or the confirmation (",
                proof_key!(confirmed_by),
                ") \
of NodeFence \"' + object.metadata.name + '\" refused: ' + request.userInfo.username + ' is not volguard. A NodeFence\\'s \
record is written by volguard alone, from what it verified; a person\\'s word goes in through `kubectl volguard fence confirm \
NODE` (a person granted volguard\\'s break-glass role, naming themselves), which volguard checks before it counts'"
            ),
        },
    },
    Policy {
        name: None,
        entry: &webhooks::OUT_OF_SERVICE_TAINT,
        rows: "§7 the rows the Node itself shows: the out-of-service taint is not added to, nor a node confirmed down \
on, a Node whose stored Ready condition is True (out-of-service-node-alive, confirm-node-alive); the taint is added \
only by volguard (its incident is the webhook's to read), a trusted remediator, or a person on a stored confirmation \
stamped by a person (out-of-service-confirmed; its expiry, the Lease and the record are read by the webhook, whose \
entry is Ignore so that a person who confirmed can heal a partition while volguard is down)",
        match_conditions: &[&conditions::ADDS_OUT_OF_SERVICE],
        // The stored Node's Ready, as the webhook reads it (at CREATE, the object's own); then,
        // for the taint, whoever proves the node down.
        body: Body::Validate {
            allowed: concat!(
                "!(request.operation == 'UPDATE' ? ",
                ready!(oldObject),
                " : ",
                ready!(object),
                ") && (!(",
                adds_out_of_service!(),
                ") || request.userInfo.username in ",
                param_list!("volguard-identities"),
                " || request.userInfo.username in ",
                param_list!("taint-users"),
                " || request.userInfo.groups.exists(g, g in ",
                param_list!("taint-groups"),
                ") || request.operation == 'UPDATE' && ",
                person!(),
                " && ",
                stored_override_counts!(confirm_node_down),
                ")"
            ),
            message: concat!(
                "(request.operation == 'UPDATE' ? ",
                ready!(oldObject),
                " : ",
                ready!(object),
                ") ? 'adding taint node.kubernetes.io/out-of-service to (or confirming down) node \"' + object.metadata.name + \
'\" refused: the node is not down: it reports Ready. A node that heartbeats may run its pods and write to their volumes, \
whoever says it is down. If the machine is really gone, stop its kubelet or power it off first; once it is NotReady \
(kubectl get node ' + object.metadata.name + '), confirm again' : 'adding taint node.kubernetes.io/out-of-service to node \"' + \
object.metadata.name + '\" refused: nothing proves the node is down. The taint makes PodGC force-delete its pods and the \
attach/detach controller detach its volumes while the machine may still write to them. Once you have confirmed the \
machine is off (or cut from its storage), a person confirms it first (kubectl annotate node ' + object.metadata.name + \
' ",
                proof_key!(confirm_node_down),
                "=true), then adds the taint'"
            ),
        },
    },
    Policy {
        name: None,
        entry: &webhooks::DELETE_PROTECTION,
        rows: "§2i rows 1, 4-6: a protected claim, volume or namespace is not deleted; only a person lifts the protection (row 2, a namespace holding protected claims, reads the claims: the webhook's)",
        match_conditions: &[&conditions::DELETES_OR_LIFTS_A_PROTECTION],
        body: Body::Validate {
            allowed: concat!("request.operation == 'UPDATE' && ", person!()),
            message: "request.operation == 'DELETE' ? 'deleting ' + request.kind.kind + ' \"' + oldObject.metadata.name + \
'\" refused: it carries volguard.io/delete-protection=true. If its data may really go, a person lifts the protection first \
(kubectl annotate ' + request.resource.resource + ' ' + oldObject.metadata.name + \
(has(oldObject.metadata.namespace) ? ' -n ' + oldObject.metadata.namespace : '') + \
' volguard.io/delete-protection-; the update is recorded), then deletes it' : \
'removing volguard.io/delete-protection from ' + request.kind.kind + ' \"' + oldObject.metadata.name + \
'\" refused: lifting deletion protection is a person\\'s decision, and ' + request.userInfo.username + \
' is not a person (a service account or system identity)'",
        },
    },
];
