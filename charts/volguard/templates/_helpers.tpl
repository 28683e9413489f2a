{{/* Labels Helm adds to every object (tests/install.rs strips exactly these when it compares
the chart with manifests/base). */}}
{{- define "volguard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* repository:tag, and @digest when one is set (the kubelet pulls by the digest; the tag
says which release it is). `make release` packages the chart with both. */}}
{{- define "volguard.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/* The serving Secret: cert-manager's, or the one provided. */}}
{{- define "volguard.tlsSecret" -}}
{{- if .Values.tls.certManager -}}
volguard-webhook-tls
{{- else -}}
{{ required "tls.certManager is false: set tls.secretName (an existing kubernetes.io/tls Secret) and tls.caBundle (the PEM of the CA that signed it)" .Values.tls.secretName }}
{{- end -}}
{{- end }}

{{/* Namespaces whose requests volguard never sees: `webhook.excludedNamespaces` (kube-system)
and its own; with `webhook.objectSelector`, only the objects it selects. */}}
{{- define "volguard.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
  - {key: kubernetes.io/metadata.name, operator: NotIn, values: [{{ join ", " (append .Values.webhook.excludedNamespaces .Release.Namespace) }}]}
{{- with .Values.webhook.objectSelector }}
objectSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* `enforcement` as the flag takes it: a string (deny, warn, RULE=warn,...) or a map RULE: mode. */}}
{{- define "volguard.enforcement" -}}
{{- if kindIs "map" .Values.enforcement -}}
{{- $pairs := list -}}
{{- range $rule, $mode := .Values.enforcement -}}
{{- $pairs = append $pairs (printf "%s=%s" $rule $mode) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- else -}}
{{- .Values.enforcement -}}
{{- end -}}
{{- end }}

{{/* A webhook entry's failure policy when its rule's is Fail (`.rule`, `.warnable`,
`.withPolicies`: the CEL policies refuse what it refuses): Ignore when forced everywhere, when its
rule runs in warn (a warned rule never blocks), or when the policies are installed. */}}
{{- define "volguard.failurePolicy" -}}
{{- $e := splitList "," (nospace (include "volguard.enforcement" .root)) -}}
{{- $warn := and .warnable (or (has "warn" $e) (has (printf "%s=warn" .rule) $e)) -}}
{{- if or .root.Values.forceFailurePolicyIgnore $warn (and .withPolicies (include "volguard.policies" .root)) -}}
Ignore
{{- else -}}
Fail
{{- end -}}
{{- end }}

{{/* How the apiserver reaches the webhook; `path` is passed as `.path`. */}}
{{- define "volguard.clientConfig" -}}
clientConfig:
  service: {name: volguard-webhook, namespace: {{ .root.Release.Namespace }}, path: {{ .path }}, port: 443}
  {{- if not .root.Values.tls.certManager }}
  caBundle: {{ required "tls.certManager is false: set tls.secretName (an existing kubernetes.io/tls Secret) and tls.caBundle (the PEM of the CA that signed it)" .root.Values.tls.caBundle | b64enc }}
  {{- end }}
{{- end }}

{{/* The webhook configurations' annotations: the failure mode they were rendered for, in the
controller's terms (its drift check leaves a configuration rendered for another mode alone: during
a rollout the old controller must not undo the new chart). No cainjector annotation (inject-ca-from):
cainjector before 1.12 erased the matchConditions at each injection; with tls.certManager the
controller fills caBundle from the serving Secret's ca.crt (--ca-secret). */}}
{{- define "volguard.configurationAnnotations" -}}
annotations:
  volguard.io/failure-mode: {{ include "volguard.failureMode" . | quote }}
  {{- with include "volguard.allowList" . | fromJson }}
  {{- if or .users .groups }}
  volguard.io/force-delete-allow: {{ toJson . | quote }}
  {{- end }}
  {{- end }}
{{- end }}

{{/* `enforcement=E; policies=BOOL; forceIgnore=BOOL`, as the controller's flags say it. */}}
{{- define "volguard.failureMode" -}}
{{- $e := nospace (include "volguard.enforcement" .) | default "deny" -}}
enforcement={{ $e }}; policies={{ eq (include "volguard.policies" .) "true" }}; forceIgnore={{ .Values.forceFailurePolicyIgnore | default false }}
{{- end }}

{{/*
Whether the CEL policies are installed (docs/rules.md §9): policies.enabled true, or auto (the
default) where the apiserver serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy and
MutatingAdmissionPolicy. Everything that depends on them (the policies, the entries they hold,
the controller's drift check) asks this one helper.
*/}}
{{- define "volguard.policies" -}}
{{- $p := .Values.policies.enabled -}}
{{- if or (eq (toString $p) "true") (and (eq (toString $p) "auto") (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")) -}}
true
{{- end -}}
{{- end }}

{{/* forceDeleteAllow with each value split at commas, as the webhook's and the controller's flags
split theirs, as JSON ({"groups": [...], "users": [...]}: the `volguard.io/force-delete-allow`
annotation's value; read it back with fromJson). */}}
{{- define "volguard.allowList" -}}
{{- $u := list -}}
{{- range (.Values.forceDeleteAllow.users | default (list)) -}}{{- $u = concat $u (splitList "," .) -}}{{- end -}}
{{- $g := list -}}
{{- range (.Values.forceDeleteAllow.groups | default (list)) -}}{{- $g = concat $g (splitList "," .) -}}{{- end -}}
{{- toJson (dict "groups" $g "users" $u) -}}
{{- end }}

{{/* A CEL list literal of the strings of `.`, each single-quoted with `\` and `'` escaped (as
volguard's `registration::conditions::cel_list`: the controller's drift check compares the text). */}}
{{- define "volguard.celList" -}}
{{- $q := list -}}
{{- range . -}}
{{- $q = append $q (printf "'%s'" (. | replace "\\" "\\\\" | replace "'" "\\'")) -}}
{{- end -}}
[{{ join ", " $q }}]
{{- end }}

{{/* The force-delete entries' condition that answers the allow-list `.` (`volguard.allowList`, read
back) in the apiserver (rules.md §2d row 7: allowed whatever the pod), as volguard's
`conditions::not_allow_listed`. */}}
{{- define "volguard.notAllowListed" -}}
!(request.userInfo.username in {{ include "volguard.celList" (.users | default (list)) }} || request.userInfo.groups.exists(g, g in {{ include "volguard.celList" (.groups | default (list)) }}))
{{- end }}
