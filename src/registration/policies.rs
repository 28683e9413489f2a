//! rules.md §9: the rows that need no other object, as CEL policies the apiserver evaluates itself
//! (ValidatingAdmissionPolicy, MutatingAdmissionPolicy). They hold while volguard is down: no
//! network hop, no failure policy to fall back on. The webhook still judges the same requests the
//! same way (it also runs where these APIs are absent); a request a policy denies never reaches
//! it, and a request a policy lets through by identity (PodGC) is judged by the webhook's rows
//! that read other objects (the Node).
//!
//! Each policy names the rule of the table (`Rule`) whose rows it carries: the rule's name, its
//! failure policy and its enforcement (`--enforcement RULE=warn` → `validationActions: [Audit]`:
//! the would-be refusal in the audit log, the webhook's warning the one the user sees). `volguard manifests policies` prints them; `make manifests` writes
//! `manifests/base/policies.yaml`, which the chart ships as is (a test keeps the file equal
//! to this table).
//!
//! Who volguard is, which callers are trusted for what, and whether people may force-delete
//! without a confirmation are the policies' parameters: ConfigMap `volguard-policies` in
//! volguard's namespace, written by the chart from the same values as the flags.

use super::conditions::Condition;
use super::webhooks::{Entry, ResourceRule};
use crate::rules::rule::{FailurePolicy, Rule};
use serde_json::{Value, json};

/// The ConfigMap every policy reads its parameters from.
pub const PARAMS: &str = "volguard-policies";

pub use super::conditions::NAMESPACE;

/// One policy: a rule's stateless rows.
pub struct Policy {
    /// The webhook entry whose requests it judges inside the apiserver: its rule, its doors
    /// (`resourceRules`, derived as the entry's `rules[]`) and its namespace selector.
    pub entry: &'static Entry,
    /// The name when a rule has more than one policy (else `volguard-RULE`).
    pub name: Option<&'static str>,
    /// Which of the rule's rows it carries (rules.md), for people.
    pub rows: &'static str,
    /// The requests it judges: its webhook entry's conditions (`webhooks`), shared.
    pub match_conditions: &'static [&'static Condition],
    pub body: Body,
}

pub enum Body {
    /// Allowed when `allowed` holds, else denied with `message` (a CEL string expression).
    Validate {
        allowed: &'static str,
        message: &'static str,
    },
    /// A JSON patch, built by a CEL expression returning a list of `JSONPatch`.
    Mutate { json_patch: &'static str },
}

pub use super::policy_table::POLICIES;

/// CEL: the comma-separated list parameter `key` (as `param_list!`, for a key known at run time).
pub(super) fn param_list_of(key: &str) -> String {
    format!(
        "(has(params.data) && '{key}' in params.data && params.data['{key}'] != '' ? params.data['{key}'].split(',') : [])"
    )
}

/// CEL: the caller is exempted from `rule` (parameters `exempt-RULE-users` and
/// `exempt-RULE-groups`, the webhook's `--exempt`).
fn exempted(rule: Rule) -> String {
    format!(
        "request.userInfo.username in {} || request.userInfo.groups.exists(g, g in {})",
        param_list_of(&format!("exempt-{}-users", rule.name())),
        param_list_of(&format!("exempt-{}-groups", rule.name()))
    )
}

impl Policy {
    /// The policy's (and its binding's) name: `volguard-RULE`.
    pub fn name(&self) -> String {
        match self.name {
            Some(n) => n.to_string(),
            None => format!("volguard-{}", self.rule().name()),
        }
    }

    /// The rule whose rows it carries.
    pub fn rule(&self) -> Rule {
        self.entry.rule
    }

    fn match_constraints(&self) -> Value {
        let rules: Vec<Value> = self
            .entry
            .resource_rules()
            .iter()
            .map(ResourceRule::object)
            .collect();
        let mut m = json!({"resourceRules": rules});
        if self.entry.namespaced {
            m["namespaceSelector"] = json!({"matchExpressions": [{
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", NAMESPACE],
            }]});
        }
        m
    }

    fn match_conditions(&self) -> Value {
        self.match_conditions
            .iter()
            .map(|c| json!({"name": c.name, "expression": c.expression(NAMESPACE)}))
            .collect()
    }

    /// The policy object.
    pub fn object(&self) -> Value {
        let failure = match self.rule().failure_policy() {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        };
        let metadata = json!({
            "name": self.name(),
            "labels": {"app.kubernetes.io/name": "volguard", "volguard.io/rule": self.rule().name()},
            "annotations": {"volguard.io/rows": self.rows},
        });
        match &self.body {
            Body::Validate { allowed, message } => {
                // An identity exempted from a rule that can be is exempted here too (rules.md §2g).
                let allowed = match self.rule().def().warnable {
                    true => format!("{} || ({allowed})", exempted(self.rule())),
                    false => allowed.to_string(),
                };
                json!({
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "ValidatingAdmissionPolicy",
                    "metadata": metadata,
                    "spec": {
                        // A policy's own failures (a CEL error) follow the rule's failure policy.
                        "failurePolicy": failure,
                        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                        "matchConstraints": self.match_constraints(),
                        "matchConditions": self.match_conditions(),
                        "validations": [{
                            "expression": allowed,
                            "messageExpression": message,
                            "reason": "Forbidden",
                        }],
                        // In the apiserver's audit log even when the refusal leaves no Event (volguard
                        // down, or the policy refused before the webhook was called).
                        "auditAnnotations": [
                            {"key": "rule", "valueExpression": format!("'{}'", self.rule().name())},
                            {"key": "rows", "valueExpression": format!("'{}'", self.rows.replace('\\', "\\\\").replace('\'', "\\'"))},
                        ],
                    },
                })
            }
            Body::Mutate { json_patch } => json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingAdmissionPolicy",
                "metadata": metadata,
                "spec": {
                    "failurePolicy": failure,
                    "reinvocationPolicy": "Never",
                    "matchConstraints": self.match_constraints(),
                    "matchConditions": self.match_conditions(),
                    "mutations": [{
                        "patchType": "JSONPatch",
                        "jsonPatch": {"expression": json_patch},
                    }],
                },
            }),
        }
    }

    /// The binding that switches the policy on, with `actions` (`Deny` + `Audit`; in warn `Audit`).
    pub fn binding(&self, actions: &[&str]) -> Value {
        let metadata = json!({
            "name": self.name(),
            "labels": {"volguard.io/rule": self.rule().name()},
        });
        match &self.body {
            Body::Validate { .. } => json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": metadata,
                "spec": {
                    "policyName": self.name(),
                    "validationActions": actions,
                    // Without its parameters (not installed, deleted, or not yet seen by the
                    // apiserver's informer right after install) a policy is skipped, never a
                    // refusal of everything it matches (every claim status update, for one):
                    // the webhook still judges those requests.
                    "paramRef": {"name": PARAMS, "namespace": NAMESPACE, "parameterNotFoundAction": "Allow"},
                },
            }),
            Body::Mutate { .. } => json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingAdmissionPolicyBinding",
                "metadata": metadata,
                "spec": {"policyName": self.name()},
            }),
        }
    }
}

/// The default parameters: volguard's own identities, nobody else trusted, people confirm.
pub fn params() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PARAMS, "namespace": NAMESPACE},
        "data": {
            "volguard-identities": format!(
                "system:serviceaccount:{NAMESPACE}:volguard-webhook,system:serviceaccount:{NAMESPACE}:volguard-controller"
            ),
            "force-delete-users": "",
            "force-delete-groups": "",
            "taint-users": "",
            "taint-groups": "",
            "human-force-delete": "confirm",
            "break-glass": "rbac",
        },
    })
}

/// What to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// The policies (`manifests/base/policies.yaml`; the chart ships this file as is).
    Policies,
    /// The default parameters and a `Deny` binding per policy (`manifests/base/policy-bindings.yaml`;
    /// the chart writes its own from its values).
    Bindings,
}

/// One part as a YAML stream.
pub fn render(part: Part) -> Result<String, serde_yaml::Error> {
    let mut out = String::from(
        "# Generated by `volguard manifests policies` (make manifests) from volguard's rule table: do not edit.\n",
    );
    let docs: Vec<Value> = match part {
        Part::Policies => POLICIES.iter().map(Policy::object).collect(),
        Part::Bindings => std::iter::once(params())
            .chain(POLICIES.iter().map(|p| p.binding(&["Deny", "Audit"])))
            .collect(),
    };
    for d in docs {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&d)?);
    }
    Ok(out)
}

pub use super::policies_static::{Inlined, static_objects};

#[cfg(test)]
#[path = "policies_tests.rs"]
mod tests;
