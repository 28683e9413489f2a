//! The policies as static manifests (manifest-based admission configuration,
//! `volguard manifests admission-dir`): no `paramKind`, so what the parameters ConfigMap holds is
//! written into the expressions as literals.

use super::conditions::{cel_list, param_list};
use super::policies::{NAMESPACE, POLICIES, param_list_of};
use crate::rules::rule::Rule;
use serde_json::{Value, json};

/// The parameters written into the expressions themselves: a static policy (manifest-based
/// admission configuration) may name no `paramKind`, so what the ConfigMap holds becomes literals.
#[derive(Debug, Clone)]
pub struct Inlined {
    pub identities: Vec<String>,
    pub force_delete_users: Vec<String>,
    pub force_delete_groups: Vec<String>,
    /// Trusted remediators that add the out-of-service taint (`taint-users`, `taint-groups`).
    pub taint_users: Vec<String>,
    pub taint_groups: Vec<String>,
    /// `human-force-delete: warn`.
    pub human_warn: bool,
    /// `break-glass`: `rbac` (default), `anyone` or `off`.
    pub break_glass: String,
    /// `--exempt`: (rule, identity) with groups as `group:NAME`.
    pub exempt: Vec<(String, String)>,
}

impl Inlined {
    /// volguard's identities in `namespace`, nobody else trusted, people confirm through RBAC.
    pub fn defaults(namespace: &str) -> Inlined {
        Inlined {
            identities: vec![
                format!("system:serviceaccount:{namespace}:volguard-webhook"),
                format!("system:serviceaccount:{namespace}:volguard-controller"),
            ],
            force_delete_users: Vec::new(),
            force_delete_groups: Vec::new(),
            taint_users: Vec::new(),
            taint_groups: Vec::new(),
            human_warn: false,
            break_glass: "rbac".into(),
            exempt: Vec::new(),
        }
    }

    /// `expression` with every parameter read replaced by its value; `None` if a read of
    /// `params` is left (a parameter this function does not know: the policy cannot be static).
    pub fn inline(&self, expression: &str) -> Option<String> {
        let mut out = expression
            .replace(param_list!("volguard-identities"), &cel_list(&self.identities))
            .replace(param_list!("force-delete-users"), &cel_list(&self.force_delete_users))
            .replace(param_list!("force-delete-groups"), &cel_list(&self.force_delete_groups))
            .replace(param_list!("taint-users"), &cel_list(&self.taint_users))
            .replace(param_list!("taint-groups"), &cel_list(&self.taint_groups))
            .replace(
                "(has(params.data) && params.data[?'human-force-delete'].orValue('confirm') == 'warn')",
                if self.human_warn { "true" } else { "false" },
            )
            .replace(
                "has(params.data) && params.data[?'break-glass'].orValue('rbac') == 'anyone'",
                if self.break_glass == "anyone" { "true" } else { "false" },
            )
            .replace(
                "(!has(params.data) || params.data[?'break-glass'].orValue('rbac') == 'rbac')",
                if self.break_glass == "rbac" { "true" } else { "false" },
            );
        for rule in Rule::WARNABLE {
            let of = |groups: bool| -> Vec<String> {
                self.exempt
                    .iter()
                    .filter(|(r, _)| r == rule.name())
                    .filter_map(|(_, i)| match (groups, i.strip_prefix("group:")) {
                        (true, Some(g)) => Some(g.to_string()),
                        (false, None) => Some(i.clone()),
                        _ => None,
                    })
                    .collect()
            };
            out = out
                .replace(
                    &param_list_of(&format!("exempt-{}-users", rule.name())),
                    &cel_list(&of(false)),
                )
                .replace(
                    &param_list_of(&format!("exempt-{}-groups", rule.name())),
                    &cel_list(&of(true)),
                );
        }
        if out.contains("params") {
            return None;
        }
        out.shrink_to_fit();
        Some(out)
    }
}

/// The policies and their bindings as static manifests (names ending `.static.k8s.io`, no
/// parameters: `params` inlined), for `volguard manifests admission-dir`. `Err` names a policy
/// whose expressions still read a parameter.
pub fn static_objects(namespace: &str, params: &Inlined) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for p in POLICIES {
        let name = format!("{}.static.k8s.io", p.name());
        let mut o = p.object();
        o["metadata"]["name"] = json!(name);
        let spec = o["spec"].as_object_mut().ok_or("a policy without spec")?;
        spec.remove("paramKind");
        for key in ["validations", "mutations"] {
            for item in spec
                .get_mut(key)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                for field in ["expression", "messageExpression"] {
                    if let Some(e) = item.get(field).and_then(Value::as_str) {
                        let inlined = params
                            .inline(e)
                            .ok_or_else(|| format!("{name}: {field} reads a parameter"))?;
                        item[field] = json!(inlined);
                    }
                }
                if let Some(e) = item["jsonPatch"]["expression"].as_str() {
                    let inlined = params
                        .inline(e)
                        .ok_or_else(|| format!("{name}: jsonPatch reads a parameter"))?;
                    item["jsonPatch"]["expression"] = json!(inlined);
                }
            }
        }
        if let Some(selector) = spec
            .get_mut("matchConstraints")
            .and_then(|m| m.get_mut("namespaceSelector"))
        {
            selector["matchExpressions"][0]["values"] = json!(["kube-system", namespace]);
        }
        for c in spec
            .get_mut("matchConditions")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(e) = c["expression"].as_str() {
                c["expression"] = json!(e.replace(NAMESPACE, namespace));
            }
        }
        let mut b = p.binding(&["Deny", "Audit"]);
        b["metadata"]["name"] = json!(name);
        b["spec"]["policyName"] = json!(name);
        if let Some(spec) = b["spec"].as_object_mut() {
            spec.remove("paramRef");
        }
        out.push(o);
        out.push(b);
    }
    Ok(out)
}
