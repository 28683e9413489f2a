//! rules.md §2g "Exemptions": a named identity (a backup or GitOps tool's service account, a
//! group) exempted from one rule, like Kyverno's `exclude.subjects`. An exempted request is still
//! judged: a would-be refusal is let through with a warning, counted as
//! `decision="exempted"`, logged and recorded as an Event, never silently skipped. Only the rules
//! that can warn can be exempted from: an exemption from a proof or from deletion protection
//! would be no rule at all.

use super::Decision;
use super::rule::Rule;
use crate::model::UserInfo;
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ExemptionError {
    #[error("--exempt entry {0:?} is not RULE=USER or RULE=group:GROUP")]
    Entry(String),
    #[error("rule {0:?} cannot be exempted from; rules that can: {rules}", rules = super::enforcement::warnable_names())]
    NotExemptable(String),
    #[error(
        "--exempt {0:?} names everyone of a kind (system:authenticated, system:unauthenticated, \
         system:serviceaccounts, system:serviceaccounts:NAMESPACE): that is no exemption but the rule switched \
         off; name the service account or user, or put the rule in warn (--enforcement RULE=warn)"
    )]
    Everyone(String),
}

/// The groups that name everyone of a kind (rules.md §2g): an exemption for one of them is the
/// rule switched off for a whole population, never a named tool.
pub fn names_everyone(group: &str) -> bool {
    matches!(
        group,
        "system:authenticated" | "system:unauthenticated" | "system:serviceaccounts"
    ) || group.starts_with("system:serviceaccounts:")
}

/// One exemption: a rule and who is exempted from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exemption {
    pub rule: Rule,
    /// A username, or a group as `group:NAME`.
    pub identity: String,
}

impl std::str::FromStr for Exemption {
    type Err = ExemptionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (rule, identity) = s
            .split_once('=')
            .filter(|(r, i)| !r.trim().is_empty() && !i.trim().is_empty())
            .ok_or_else(|| ExemptionError::Entry(s.to_string()))?;
        let rule = Rule::from_name(rule.trim())
            .filter(|r| r.def().warnable)
            .ok_or_else(|| ExemptionError::NotExemptable(rule.trim().to_string()))?;
        let identity = identity.trim();
        if identity.strip_prefix("group:").is_some_and(names_everyone) {
            return Err(ExemptionError::Everyone(s.to_string()));
        }
        Ok(Exemption {
            rule,
            identity: identity.to_string(),
        })
    }
}

impl Exemption {
    fn matches(&self, user: &UserInfo) -> bool {
        match self.identity.strip_prefix("group:") {
            Some(group) => user.groups.iter().any(|g| g == group),
            None => user.username == self.identity,
        }
    }
}

/// Every exemption (`--exempt`, repeatable).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exemptions(pub Vec<Exemption>);

impl Exemptions {
    /// The exemption that covers `user` for `rule`, if any.
    pub fn of(&self, rule: Rule, user: &UserInfo) -> Option<&Exemption> {
        self.0.iter().find(|e| e.rule == rule && e.matches(user))
    }

    /// Let a denial through when `user` is exempted from `rule`: allowed, the denial as a
    /// warning, marked so that it is counted, logged and recorded. Malformed requests (400) stay
    /// refused: they are not a rule's judgement.
    pub fn apply(&self, rule: Rule, user: &UserInfo, d: Decision) -> Decision {
        if d.allowed || d.code == 400 {
            return d;
        }
        let Some(e) = self.of(rule, user) else {
            return d;
        };
        let why = format!(
            "volguard: {} is exempted from {} (--exempt {}={}); it would deny this: {}",
            user.username,
            rule.name(),
            rule.name(),
            e.identity,
            d.message.as_deref().unwrap_or("")
        );
        d.let_through(why, true)
    }
}

#[cfg(test)]
#[path = "exemptions_tests.rs"]
mod tests;
