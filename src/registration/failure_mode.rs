//! The failure mode a registration is rendered for: what sets an entry's failure policy besides
//! the rule table, and the annotation that names it on each configuration (rules.md §9).

use super::webhooks::Entry;
use crate::rules::enforcement::Enforcement;

/// What sets an entry's failure policy besides the table (rules.md §2g, §9): the CEL policies
/// installed (they refuse what some `Fail` entries refuse, so those may be `Ignore`), the rules in
/// warn (a warned rule never blocks, not even while volguard is down), or `Ignore` forced on
/// every entry (the chart's `forceFailurePolicyIgnore`).
#[derive(Debug, Clone, Copy, Default)]
pub struct FailureMode {
    pub policies: bool,
    pub enforcement: Enforcement,
    pub force_ignore: bool,
}

/// The annotation on each configuration naming the failure mode it was rendered for, in the
/// controller's terms (`enforcement=E; policies=BOOL; forceIgnore=BOOL`). A controller whose own
/// mode gives that configuration's entries other failure policies leaves it alone: during a
/// rollout the old controller would otherwise put back what the new chart just changed (and take
/// the field from Helm, whose next server-side apply then conflicts).
pub const FAILURE_MODE_ANNOTATION: &str = "volguard.io/failure-mode";

impl FailureMode {
    /// Only the policies decide (deny everywhere, nothing forced).
    pub fn policies(policies: bool) -> FailureMode {
        FailureMode {
            policies,
            ..FailureMode::default()
        }
    }

    /// Read `FAILURE_MODE_ANNOTATION`'s value; every key is required, so a typo is not read as
    /// a default.
    pub fn from_annotation(s: &str) -> Result<FailureMode, String> {
        let (mut enforcement, mut policies, mut force_ignore) = (None, None, None);
        for part in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not KEY=VALUE"))?;
            let flag = |v: &str| match v.trim() {
                "true" => Ok(true),
                "false" => Ok(false),
                other => Err(format!("{k}={other:?} is neither true nor false")),
            };
            match k.trim() {
                "enforcement" => {
                    let v = v.trim();
                    let v = if v.is_empty() { "deny" } else { v };
                    enforcement = Some(Enforcement::parse(v).map_err(|e| e.to_string())?);
                }
                "policies" => policies = Some(flag(v)?),
                "forceIgnore" => force_ignore = Some(flag(v)?),
                other => return Err(format!("unknown key {other:?}")),
            }
        }
        match (enforcement, policies, force_ignore) {
            (Some(enforcement), Some(policies), Some(force_ignore)) => Ok(FailureMode {
                policies,
                enforcement,
                force_ignore,
            }),
            _ => Err("enforcement, policies and forceIgnore are all required".into()),
        }
    }

    /// Whether `other` registers every entry of `entries` with the failure policy this mode does.
    pub fn same_policies(&self, other: &FailureMode, entries: &[Entry]) -> bool {
        entries
            .iter()
            .all(|e| e.failure_policy(self) == e.failure_policy(other))
    }
}
