//! rules.md §7 "Trusted remediators": the node remediators an operator already runs (medik8s
//! fence-agents-remediation and self-node-remediation taint a node after their own fencing;
//! cluster-api and cloud node lifecycle controllers delete Nodes whose machine is gone; Longhorn's
//! node-down policy force-deletes pods). Each is named with what it may do; its action then counts
//! as proof and is recorded. Nobody is trusted by default.

use crate::model::UserInfo;

/// What a remediator may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Add `node.kubernetes.io/out-of-service`.
    Taint,
    /// Delete a Node whose pods still use claims.
    DeleteNode,
    /// Force-delete (grace 0) a running pod.
    ForceDelete,
}

impl Action {
    pub const ALL: [Action; 3] = [Action::Taint, Action::DeleteNode, Action::ForceDelete];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Taint => "taint",
            Action::DeleteNode => "delete-node",
            Action::ForceDelete => "force-delete",
        }
    }
}

/// One remediator: a username (`system:serviceaccount:NS:NAME`), or `group:NAME` for every member
/// of a group, and its actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remediator {
    pub identity: String,
    pub actions: Vec<Action>,
}

impl std::str::FromStr for Remediator {
    type Err = String;
    /// `IDENTITY=ACTION[+ACTION...]`, e.g.
    /// `system:serviceaccount:capi-system:capi-manager=delete-node`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "{s:?}: {why}; expected IDENTITY=ACTION[+ACTION], ACTION one of taint, delete-node, force-delete \
                 (e.g. system:serviceaccount:capi-system:capi-manager=delete-node)"
            )
        };
        let (identity, actions) = s.rsplit_once('=').ok_or_else(|| bad("no '='"))?;
        let identity = identity.trim();
        if identity.is_empty() || identity == "group:" {
            return Err(bad("no identity"));
        }
        let actions = actions
            .split('+')
            .map(|a| match a.trim() {
                "taint" => Ok(Action::Taint),
                "delete-node" => Ok(Action::DeleteNode),
                "force-delete" => Ok(Action::ForceDelete),
                other => Err(bad(&format!("unknown action {other:?}"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Remediator {
            identity: identity.to_string(),
            actions,
        })
    }
}

impl Remediator {
    fn is(&self, user: &UserInfo) -> bool {
        match self.identity.strip_prefix("group:") {
            Some(g) => user.in_group(g),
            None => user.username == self.identity,
        }
    }
}

/// The operator's list (`--trusted-remediator`, repeatable).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remediators(pub Vec<Remediator>);

impl Remediators {
    /// The remediator entry that lets `user` do `action`, if any (its identity is what records
    /// name).
    pub fn may(&self, user: &UserInfo, action: Action) -> Option<&Remediator> {
        self.0
            .iter()
            .find(|r| r.actions.contains(&action) && r.is(user))
    }
}

#[cfg(test)]
#[path = "remediators_tests.rs"]
mod tests;
