//! The rules by name, as one table: one webhook entry, one HTTP path, one failure policy, one
//! enforcement mode and the requests each judges (with the method that gathers their facts).
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

/// The rule table: one row per rule, and nothing about a rule lives anywhere else but its file
/// under `rules/` and, for a new kind of request, `On`. The rows become the `Rule` enum and
/// `TABLE` here; `admission/facts.rs` expands the same rows into its dispatch. Adding a rule is
/// its file, one row, and the methods its `on` column names.
///
/// Columns: `name` is what operators type (`--enforcement NAME=warn`) and read (metric label
/// `endpoint`, logs) and ends its webhook entries' path (`/mutate/NAME` for a mutating rule,
/// `/validate/NAME` for the others); `failure_policy` as registered (the registration is
/// generated from this table and `registration::webhooks`); `webhooks` the entries
/// (`webhooks[].name`) that post to that path; `on` each kind of request it judges (routing reads
/// this; a request meets its rules in table order) and the method of `admission::Admission` that
/// gathers the facts for it and asks the rule. `rules/` only names those methods, so it stays pure.
macro_rules! for_each_rule {
    ($then:ident) => {
        $then! {
            /// rules.md §1: `kubernetes.io/pvc-protection` on PVC CREATE (mutating).
            PvcFinalizer {
                name: "pvc-finalizer",
                failure_policy: Ignore,
                mutating: true,
                webhooks: ["pvc-finalizer.volguard.io"],
                on: { PvcCreate => protect_pvc },
            },
            /// rules.md §1: `kubernetes.io/pv-protection` on PV CREATE (mutating).
            PvFinalizer {
                name: "pv-finalizer",
                failure_policy: Ignore,
                mutating: true,
                webhooks: ["pv-finalizer.volguard.io"],
                on: { PvCreate => protect_pv },
            },
            /// rules.md §2a.
            PodOnTerminatingClaim {
                name: "pod-on-terminating-claim",
                failure_policy: Ignore,
                mutating: false,
                webhooks: ["pod-create.volguard.io"],
                on: { PodCreate => pod_create },
            },
            /// rules.md §2c. Fail: stripping a protection finalizer from a volume in use deletes it.
            FinalizerRemoval {
                name: "finalizer-removal",
                failure_policy: Fail,
                mutating: false,
                webhooks: ["finalizer-guard.volguard.io"],
                on: {
                    PvcUpdate => pvc_finalizer,
                    PvcStatusUpdate => pvc_finalizer,
                    PvUpdate => pv_finalizer,
                    PvStatusUpdate => pv_finalizer,
                },
            },
            /// rules.md §2f and §3: the RWO lock annotation is volguard's to write, and a mounted
            /// ephemeral claim keeps its pod owner. Fail: a forged or removed lock puts two nodes
            /// on one volume, a re-pointed owner lets `kubectl delete pvc` release a mounted claim;
            /// matchConditions let only those updates (by others than volguard) reach it.
            ClaimMetadata {
                name: "claim-metadata",
                failure_policy: Fail,
                mutating: false,
                webhooks: ["claim-metadata.volguard.io"],
                on: { PvcUpdate => claim_metadata, PvcStatusUpdate => claim_metadata },
            },
            /// rules.md §2b.
            BindingToTerminatingVolume {
                name: "binding-to-terminating-volume",
                failure_policy: Ignore,
                mutating: false,
                webhooks: ["pvc-binding.volguard.io"],
                on: { PvcCreate => pvc_binding, PvcUpdate => pvc_binding },
            },
            /// rules.md §2d: pod DELETE and `pods/eviction` CREATE. Fail: while volguard is down a
            /// force delete of a running pod must not slip through; its matchConditions keep
            /// graceful deletes, PodGC and the kubelet away.
            ForceDelete {
                name: "force-delete",
                failure_policy: Fail,
                mutating: false,
                webhooks: ["force-delete.volguard.io", "eviction.volguard.io"],
                on: { PodDelete => pod_delete, PodEviction => eviction },
            },
            /// rules.md §2f: `pods/binding` CREATE and pod CREATE with `spec.nodeName`.
            RwoSingleNode {
                name: "rwo-single-node",
                failure_policy: Ignore,
                mutating: false,
                webhooks: ["rwo-single-node.volguard.io"],
                on: { PodCreate => rwo_pod_create, PodBinding => rwo_binding },
            },
            /// rules.md §2f placement hint: pod CREATE gets a preferred affinity to its claim's
            /// node (mutating).
            RwoPlacementHint {
                name: "rwo-placement-hint",
                failure_policy: Ignore,
                mutating: true,
                webhooks: ["rwo-placement-hint.volguard.io"],
                on: { PodCreate => placement_hint },
            },
            /// rules.md §2h: `UPDATE pods/status` that ends a running pod. Ignore: PodGC must never
            /// wait on volguard; matchConditions narrow it to a running pod made terminal by
            /// someone other than its kubelet.
            PodStatus {
                name: "pod-status",
                failure_policy: Ignore,
                mutating: false,
                webhooks: ["pod-status.volguard.io"],
                on: { PodStatusUpdate => pod_status },
            },
            /// rules.md §8: whoever sets a `volguard.io/confirm-*` annotation (or confirms a
            /// NodeFence) is stamped in `volguard.io/confirmed-by` with the apiserver's username
            /// (mutating). Ignore: without it the guards still read the stored confirmation.
            ConfirmationStamp {
                name: "confirmation-stamp",
                failure_policy: Ignore,
                mutating: true,
                webhooks: ["confirmation-stamp.volguard.io"],
                on: {
                    PodUpdate => stamp_pod,
                    NodeUpdate => stamp_node,
                    NodeFenceUpdate => stamp_fence,
                },
            },
            /// rules.md §7 "Node deletion is a release": a Node whose pods use claims is deleted
            /// only on proof, and the deletion is recorded. Ignore: a deletion that slips through
            /// while volguard is down leaves no record, so "node gone" proves nothing and its pods
            /// wait for a person (upstream's behaviour, never a release).
            NodeDelete {
                name: "node-delete",
                failure_policy: Ignore,
                mutating: false,
                webhooks: ["node-delete.volguard.io"],
                on: { NodeDelete => node_delete },
            },
            /// rules.md §2i: deletion protection for storage (PVC, PV, Namespace). Fail: only
            /// requests that delete a protected object or lift a protection reach it (conditions),
            /// and a protected volume deleted while volguard is down is data lost; a Namespace's
            /// DELETE without the annotation is registered Ignore (its protected claims still
            /// refuse their own deletion).
            DeleteProtection {
                name: "delete-protection",
                failure_policy: Fail,
                mutating: false,
                webhooks: ["delete-protection.volguard.io", "namespace-delete.volguard.io"],
                on: {
                    PvcDelete => delete_protection,
                    PvDelete => delete_protection,
                    NamespaceDelete => delete_protection,
                    PvcUpdate => delete_protection,
                    PvUpdate => delete_protection,
                    NamespaceUpdate => delete_protection,
                },
            },
            /// rules.md §7 guards: adding the out-of-service taint to a Node, or confirming it down
            /// (never while it heartbeats). Ignore: a person must be able to heal a partition while
            /// volguard is down.
            OutOfServiceTaint {
                name: "out-of-service-taint",
                failure_policy: Ignore,
                mutating: false,
                webhooks: ["out-of-service-taint.volguard.io"],
                on: { NodeUpdate => out_of_service },
            },
        }
    };
}
pub(crate) use for_each_rule;

/// The rows as the `Rule` enum and `TABLE` (the `on` column's methods are admission's).
macro_rules! declare_rules {
    ($(
        $(#[$doc:meta])*
        $rule:ident {
            name: $name:literal,
            failure_policy: $policy:ident,
            mutating: $mutating:literal,
            webhooks: [$($webhook:literal),+ $(,)?],
            on: { $($on:ident => $judge:ident),+ $(,)? } $(,)?
        }
    ),+ $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Rule {
            $($(#[$doc])* $rule,)+
        }

        impl Rule {
            pub const ALL: [Rule; [$(Rule::$rule),+].len()] = [$(Rule::$rule),+];
        }

        /// The rule table, in `Rule` order.
        pub const TABLE: [RuleDef; Rule::ALL.len()] = [$(
            RuleDef {
                rule: Rule::$rule,
                name: $name,
                path: if $mutating {
                    concat!("/mutate/", $name)
                } else {
                    concat!("/validate/", $name)
                },
                failure_policy: FailurePolicy::$policy,
                mutating: $mutating,
                webhooks: &[$($webhook),+],
                on: &[$(On::$on),+],
            }
        ),+];
    };
}
for_each_rule!(declare_rules);

/// One rule's row as data: what the webhook registration, the router, the metrics and the
/// enforcement flags know about it (the columns are described at `for_each_rule`).
#[derive(Debug, Clone, Copy)]
pub struct RuleDef {
    pub rule: Rule,
    pub name: &'static str,
    pub path: &'static str,
    pub failure_policy: FailurePolicy,
    pub mutating: bool,
    pub webhooks: &'static [&'static str],
    pub on: &'static [On],
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
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_paths_are_distinct() {
        let mut paths = std::collections::HashSet::new();
        for r in Rule::ALL {
            assert_eq!(Rule::from_name(r.name()), Some(r));
            assert!(paths.insert(r.path()), "{r} shares a path");
            assert!(r.path().ends_with(r.name()));
            let prefix = if r.mutating() {
                "/mutate/"
            } else {
                "/validate/"
            };
            assert!(r.path().starts_with(prefix), "{r}");
        }
        assert_eq!(Rule::from_name("nope"), None);
    }

    #[test]
    fn routes_are_the_tables() {
        for (i, on) in On::ALL.into_iter().enumerate() {
            assert_eq!(on as usize, i);
            let want: Vec<Rule> = TABLE
                .iter()
                .filter(|d| d.on.contains(&on))
                .map(|d| d.rule)
                .collect();
            assert_eq!(on.rules(), want.as_slice(), "{on:?}");
            assert!(!want.is_empty(), "no rule judges {on:?}");
        }
        assert_eq!(
            On::PodCreate.rules(),
            [
                Rule::PodOnTerminatingClaim,
                Rule::RwoSingleNode,
                Rule::RwoPlacementHint
            ]
        );
    }

    #[test]
    fn table_rows_are_in_rule_order() {
        for (i, d) in TABLE.iter().enumerate() {
            assert_eq!(d.rule as usize, i, "{} is out of place", d.name);
            assert!(!d.webhooks.is_empty(), "{} has no webhook entry", d.name);
            assert!(!d.on.is_empty(), "{} judges no request", d.name);
        }
    }
}
