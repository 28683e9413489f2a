//! The webhook table rendered as YAML: the kustomize base (`manifests/base/webhooks.yaml`) and
//! the chart's template (`charts/volguard/templates/webhooks.yaml`), both written by
//! `make manifests` and checked against the table by a unit test.

use super::conditions::{NAMESPACE_TOKEN, NOT_ALLOW_LISTED, NOT_ALLOW_LISTED_COMMENT};
use super::webhooks::{CONFIGURATIONS, Entry, FAILURE_MODE_ANNOTATION, FailureMode};
use crate::rules::enforcement::Enforcement;
use crate::rules::rule::Timeout;

/// Which rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Flavour {
    /// `manifests/base/webhooks.yaml`: namespace volguard-system; the controller fills caBundle.
    Kustomize,
    /// `charts/volguard/templates/webhooks.yaml`: the chart's values and helpers.
    Chart,
}

const HEADER: &str = "\
volguard's webhook registrations: one entry per rule, each on its own path (the path names the
rule in volguard's metrics and logs), each with the failure policy it deserves (written beside
each entry): Ignore where a missed request is healed later or must never stop workloads, Fail
only where a request slipping through loses data, narrowed by matchConditions (CEL) so nothing
else waits on volguard. Each condition is exact, so nothing that matters skips volguard.
Validating entries are `sideEffects: NoneOnDryRun`: a refusal (or, in warn mode, a would-be
refusal) is recorded as an Event on the object, except for dry runs.";

fn comment(out: &mut String, indent: &str, text: &str) {
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            out.push_str(indent);
            out.push_str("#\n");
        } else {
            out.push_str(&format!("{indent}# {line}\n"));
        }
    }
}

fn flow_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|i| match *i {
            "" | "*" => format!("\"{i}\""),
            _ => i.to_string(),
        })
        .collect();
    format!("[{}]", quoted.join(", "))
}

fn scalar(s: &str) -> String {
    if s == "*" || s.is_empty() {
        format!("\"{s}\"")
    } else {
        s.to_string()
    }
}

/// One configuration's YAML in the chosen flavour.
fn render_configuration(out: &mut String, kind: &str, name: &str, entries: &[Entry], f: Flavour) {
    let namespace = match f {
        Flavour::Kustomize => super::conditions::NAMESPACE,
        Flavour::Chart => "{{ .Release.Namespace }}",
    };
    out.push_str("apiVersion: admissionregistration.k8s.io/v1\n");
    out.push_str(&format!("kind: {kind}\nmetadata:\n  name: {name}\n"));
    match f {
        // The base installs the policies and denies (overlays that change the controller's
        // flags change this annotation with them). No cert-manager.io/inject-ca-from: cainjector
        // before 1.12 erased the matchConditions at each injection; the controller fills
        // caBundle from the serving certificate's CA (--ca-secret) instead.
        Flavour::Kustomize => out.push_str(&format!(
            "  annotations:\n    \
             {FAILURE_MODE_ANNOTATION}: \"enforcement=deny; policies=true; forceIgnore=false\"\n"
        )),
        Flavour::Chart => out.push_str(
            "  labels: {{- include \"volguard.labels\" . | nindent 4 }}\n  \
             {{- include \"volguard.configurationAnnotations\" . | nindent 2 }}\n",
        ),
    }
    out.push_str("webhooks:\n");
    for e in entries {
        if f == Flavour::Chart && e.rwo_guard {
            out.push_str("{{- if ne .Values.rwoGuard \"off\" }}\n");
        }
        render_webhook(out, e, namespace, f);
        if f == Flavour::Chart && e.rwo_guard {
            out.push_str("{{- end }}\n");
        }
    }
}

/// One webhook of a configuration.
fn render_webhook(out: &mut String, e: &Entry, namespace: &str, f: Flavour) {
    comment(out, "", e.comment);
    out.push_str(&format!("- name: {}\n", e.name));
    out.push_str("  admissionReviewVersions: [v1]\n");
    out.push_str(&format!("  sideEffects: {}\n", e.side_effects()));
    render_timeout_and_policy(out, e, f);
    if e.rule.mutating() {
        out.push_str("  reinvocationPolicy: Never\n");
    }
    match f {
        Flavour::Kustomize => out.push_str(&format!(
            "  clientConfig:\n    service: {{name: volguard-webhook, namespace: {namespace}, path: {}, port: 443}}\n",
            e.path()
        )),
        Flavour::Chart => out.push_str(&format!(
            "  {{{{- include \"volguard.clientConfig\" (dict \"root\" . \"path\" \"{}\") | nindent 2 }}}}\n",
            e.path()
        )),
    }
    out.push_str("  rules:\n");
    for r in e.resource_rules() {
        out.push_str(&format!(
            "  - {{apiGroups: [{}], apiVersions: [{}], operations: {}, resources: {}, scope: {}}}\n",
            scalar(r.group),
            scalar(r.versions),
            flow_list(&r.operations),
            flow_list(&r.resources),
            scalar(r.scope),
        ));
    }
    if e.namespaced {
        match f {
            Flavour::Kustomize => out.push_str(&format!(
                "  namespaceSelector:\n    matchExpressions:\n    - {{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, {namespace}]}}\n"
            )),
            Flavour::Chart => {
                out.push_str("  {{- include \"volguard.namespaceSelector\" . | nindent 2 }}\n")
            }
        }
    }
    render_conditions(out, e, namespace);
    if f == Flavour::Chart && e.skips_allow_list() {
        // The kustomize base allow-lists nobody; the chart whom `forceDeleteAllow` names, each
        // value split at commas as the flags split theirs (`volguard.allowList`).
        out.push_str(
            "  {{- with include \"volguard.allowList\" . | fromJson }}\n  {{- if or .users .groups }}\n",
        );
        comment(out, "  ", NOT_ALLOW_LISTED_COMMENT);
        out.push_str(&format!(
            "  - name: {NOT_ALLOW_LISTED}\n    expression: {{{{ include \"volguard.notAllowListed\" . | toJson }}}}\n"
        ));
        out.push_str("  {{- end }}\n  {{- end }}\n");
    }
}

fn render_timeout_and_policy(out: &mut String, e: &Entry, f: Flavour) {
    match f {
        Flavour::Kustomize => {
            out.push_str(&format!(
                "  timeoutSeconds: {}\n",
                e.rule.def().timeout.seconds()
            ));
            // The base installs the policies (policies.yaml beside this file).
            let mode = FailureMode::policies(true);
            out.push_str(&format!("  failurePolicy: {}\n", e.failure_policy(&mode)));
        }
        Flavour::Chart => {
            out.push_str(match e.rule.def().timeout {
                Timeout::Standard => "  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}\n",
                Timeout::Placement => {
                    "  timeoutSeconds: {{ .Values.webhook.placementTimeoutSeconds }}\n"
                }
            });
            // Ignore in every mode: no value changes it. Else the helper decides from the
            // values: forced Ignore, the rule in warn, the policies installed.
            let strictest = FailureMode {
                enforcement: Enforcement::default(),
                ..FailureMode::policies(false)
            };
            if e.failure_policy(&strictest) == "Ignore" {
                out.push_str("  failurePolicy: Ignore\n");
            } else {
                out.push_str(&format!(
                    "  failurePolicy: {{{{ include \"volguard.failurePolicy\" (dict \"root\" . \"rule\" \"{}\" \"warnable\" {} \"withPolicies\" {}) }}}}\n",
                    e.rule.name(),
                    e.rule.def().warnable,
                    e.ignore_with_policies,
                ));
            }
        }
    }
}

fn render_conditions(out: &mut String, e: &Entry, namespace: &str) {
    if !e.conditions.is_empty() {
        out.push_str("  matchConditions:\n");
    }
    for c in e.conditions {
        comment(out, "  ", c.comment);
        out.push_str(&format!("  - name: {}\n", c.name));
        let lines: Vec<String> = c
            .lines
            .iter()
            .map(|l| l.replace(NAMESPACE_TOKEN, namespace))
            .collect();
        if let [one] = lines.as_slice() {
            // A double-quoted YAML scalar is a JSON string.
            let quoted = serde_json::to_string(one).unwrap_or_default();
            out.push_str(&format!("    expression: {quoted}\n"));
        } else {
            out.push_str("    expression: >-\n");
            for l in &lines {
                out.push_str(&format!("      {l}\n"));
            }
        }
    }
}

/// Both configurations as one YAML stream.
pub fn render(f: Flavour) -> String {
    let mut out = String::from(
        "# Generated by `volguard manifests webhooks` (make manifests) from volguard's rule table: do not edit.\n",
    );
    comment(&mut out, "", HEADER);
    if f == Flavour::Kustomize {
        out.push_str(
            "# volguard's controller fills caBundle from the serving certificate's CA (--ca-secret,\n\
             # the ca.crt of certificates.yaml's Secret), not cainjector: no inject-ca-from annotation.\n",
        );
    }
    for (i, (kind, name, entries)) in CONFIGURATIONS.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        render_configuration(&mut out, kind, name, entries, f);
    }
    out
}
