//! The rules by name: one webhook entry, one HTTP path, one failure policy and one enforcement
//! mode each. Names are the ones operators type (`--enforcement force-delete=warn`) and read in
//! metrics and logs.

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// rules.md §1: `kubernetes.io/pvc-protection` on PVC CREATE (mutating).
    PvcFinalizer,
    /// rules.md §1: `kubernetes.io/pv-protection` on PV CREATE (mutating).
    PvFinalizer,
    /// rules.md §2a.
    PodOnTerminatingClaim,
    /// rules.md §2b.
    BindingToTerminatingVolume,
    /// rules.md §2c.
    FinalizerRemoval,
    /// rules.md §2d: pod DELETE and `pods/eviction` CREATE.
    ForceDelete,
    /// rules.md §2f: `pods/binding` CREATE and pod CREATE with `spec.nodeName`.
    RwoSingleNode,
    /// rules.md §2f placement hint: pod CREATE gets a preferred affinity to its claim's node
    /// (mutating).
    RwoPlacementHint,
}

impl Rule {
    pub const ALL: [Rule; 8] = [
        Rule::PvcFinalizer,
        Rule::PvFinalizer,
        Rule::RwoPlacementHint,
        Rule::PodOnTerminatingClaim,
        Rule::BindingToTerminatingVolume,
        Rule::FinalizerRemoval,
        Rule::ForceDelete,
        Rule::RwoSingleNode,
    ];
    /// The validating rules, the ones `--enforcement` names.
    pub const VALIDATING: [Rule; 5] = [
        Rule::PodOnTerminatingClaim,
        Rule::BindingToTerminatingVolume,
        Rule::FinalizerRemoval,
        Rule::ForceDelete,
        Rule::RwoSingleNode,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Rule::PvcFinalizer => "pvc-finalizer",
            Rule::PvFinalizer => "pv-finalizer",
            Rule::PodOnTerminatingClaim => "pod-on-terminating-claim",
            Rule::BindingToTerminatingVolume => "binding-to-terminating-volume",
            Rule::FinalizerRemoval => "finalizer-removal",
            Rule::ForceDelete => "force-delete",
            Rule::RwoSingleNode => "rwo-single-node",
            Rule::RwoPlacementHint => "rwo-placement-hint",
        }
    }

    pub const fn mutating(self) -> bool {
        matches!(
            self,
            Rule::PvcFinalizer | Rule::PvFinalizer | Rule::RwoPlacementHint
        )
    }

    /// The HTTP path of this rule's webhook entry.
    pub const fn path(self) -> &'static str {
        match self {
            Rule::PvcFinalizer => "/mutate/pvc-finalizer",
            Rule::PvFinalizer => "/mutate/pv-finalizer",
            Rule::PodOnTerminatingClaim => "/validate/pod-on-terminating-claim",
            Rule::BindingToTerminatingVolume => "/validate/binding-to-terminating-volume",
            Rule::FinalizerRemoval => "/validate/finalizer-removal",
            Rule::ForceDelete => "/validate/force-delete",
            Rule::RwoSingleNode => "/validate/rwo-single-node",
            Rule::RwoPlacementHint => "/mutate/rwo-placement-hint",
        }
    }

    /// As registered in `manifests/base/webhooks.yaml` (a test keeps the two in step). The
    /// force-delete guard is `Fail`: while volguard is down a force delete of a running pod must
    /// not slip through; its matchConditions keep graceful deletes, PodGC and the kubelet away.
    pub const fn failure_policy(self) -> FailurePolicy {
        match self {
            Rule::FinalizerRemoval | Rule::ForceDelete => FailurePolicy::Fail,
            _ => FailurePolicy::Ignore,
        }
    }

    pub fn from_name(name: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.name() == name)
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
}
