//! rules.md §2g: enforcement modes for a gradual rollout. In `warn` a would-be denial is allowed and
//! its message becomes an AdmissionResponse warning (kubectl prints it as `Warning: ...`).

use super::Decision;
use super::rule::Rule;
use thiserror::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Deny,
    Warn,
}

impl Mode {
    fn parse(s: &str) -> Option<Mode> {
        match s.trim() {
            "deny" => Some(Mode::Deny),
            "warn" => Some(Mode::Warn),
            _ => None,
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum EnforcementError {
    #[error("enforcement mode {0:?} is neither deny nor warn")]
    Mode(String),
    #[error("unknown rule {0:?} in --enforcement; rules: {rules}", rules = validating_names())]
    Rule(String),
    #[error("--enforcement entry {0:?} is not RULE=deny|warn")]
    Entry(String),
    #[error("rule {0:?} cannot run in warn (its warn would be no rule at all); rules that can: {rules}", rules = warnable_names())]
    NotWarnable(String),
}

/// The rules that may run in warn (`Rule::WARNABLE`).
pub fn warnable_names() -> String {
    Rule::WARNABLE
        .iter()
        .map(|r| r.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every validating rule's name, from the rule table (what `--enforcement` accepts).
fn validating_names() -> String {
    Rule::VALIDATING
        .iter()
        .map(|r| r.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The mode of every validating rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Enforcement {
    modes: [Mode; Rule::VALIDATING.len()],
}

impl Enforcement {
    /// `deny`, `warn` (every rule of `Rule::WARNABLE`), or `RULE=deny|warn,...` (rules not named
    /// stay `deny`; `warn` only for a warnable rule).
    pub fn parse(s: &str) -> Result<Enforcement, EnforcementError> {
        if let Some(all) = Mode::parse(s) {
            let mut modes = [Mode::Deny; Rule::VALIDATING.len()];
            for (m, r) in modes.iter_mut().zip(Rule::VALIDATING) {
                if r.def().warnable {
                    *m = all;
                }
            }
            return Ok(Enforcement { modes });
        }
        let mut e = Enforcement::default();
        for entry in s.split(',').filter(|e| !e.trim().is_empty()) {
            let (rule, mode) = entry
                .split_once('=')
                .ok_or_else(|| EnforcementError::Entry(entry.to_string()))?;
            let mode = Mode::parse(mode).ok_or_else(|| EnforcementError::Mode(mode.into()))?;
            let i = Rule::VALIDATING
                .iter()
                .position(|r| r.name() == rule.trim())
                .ok_or_else(|| EnforcementError::Rule(rule.trim().to_string()))?;
            if mode == Mode::Warn && !Rule::VALIDATING[i].def().warnable {
                return Err(EnforcementError::NotWarnable(rule.trim().to_string()));
            }
            e.modes[i] = mode;
        }
        Ok(e)
    }

    /// Some rule runs in warn.
    pub fn any_warn(&self) -> bool {
        self.modes.contains(&Mode::Warn)
    }

    pub fn mode(&self, rule: Rule) -> Mode {
        Rule::VALIDATING
            .iter()
            .position(|r| *r == rule)
            .map_or(Mode::Deny, |i| self.modes[i])
    }

    /// Turn a denial into a warning when `rule` runs in `warn`. Malformed requests (400) stay
    /// refused: they are not a rule's judgement.
    pub fn apply(&self, rule: Rule, d: Decision) -> Decision {
        if d.allowed || d.code == 400 || self.mode(rule) == Mode::Deny {
            return d;
        }
        let why = format!(
            "volguard ({} in warn mode) would deny this: {}",
            rule.name(),
            d.message.as_deref().unwrap_or("")
        );
        d.let_through(why, false)
    }
}

impl std::str::FromStr for Enforcement {
    type Err = EnforcementError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Enforcement::parse(s)
    }
}

#[cfg(test)]
#[path = "enforcement_tests.rs"]
mod tests;
