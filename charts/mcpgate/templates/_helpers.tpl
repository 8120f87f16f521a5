{{/* Names and labels. */}}
{{- define "mcpgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mcpgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "mcpgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mcpgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mcpgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- end -}}

{{- define "mcpgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mcpgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "mcpgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The ext_proc Service's cluster-local name. */}}
{{- define "mcpgate.serviceFQDN" -}}
{{- printf "%s.%s.svc.cluster.local" (include "mcpgate.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/*
mcpgate.check: every refusal of the chart, in one place. Rendering fails
with a message naming the value to set.
*/}}
{{- define "mcpgate.check" -}}
{{- $v := .Values -}}
{{- $members := list -}}
{{- range $v.sidecar.members -}}
{{- if not (regexMatch "^[a-z0-9][a-z0-9_-]{0,62}$" (toString .name)) -}}
{{- fail (printf "sidecar.members: name %q is not an mcpgate upstream name" (toString .name)) -}}
{{- end -}}
{{- if has .name $members -}}
{{- fail (printf "sidecar.members: %q appears twice" .name) -}}
{{- end -}}
{{- $members = append $members .name -}}
{{- if or (not .address) (not .port) -}}
{{- fail (printf "sidecar.members: %q needs address and port" .name) -}}
{{- end -}}
{{- end -}}
{{- if not (has $v.mode (list "standalone" "sidecar" "extproc")) -}}
{{- fail (printf "mode %q: want standalone, sidecar or extproc" (toString $v.mode)) -}}
{{- end -}}
{{- $replicas := int $v.replicaCount -}}
{{- $fleet := or (gt $replicas 1) $v.autoscaling.enabled -}}
{{- $cfg := default dict $v.config -}}
{{- $cfgRedis := hasKey (default dict $cfg.store) "redis" -}}
{{- $redis := or $v.redis.url $cfgRedis (and $v.existingConfigSecret $v.redis.inExistingConfig) -}}
{{- if and $fleet (not $redis) -}}
{{- fail (printf "replicaCount %d / autoscaling.enabled %v: more than one mcpgate replica needs a shared Redis store (tokens, confirmations, replay window, rate limits, kill switch). Set redis.url, or redis.inExistingConfig with existingConfigSecret. Refusing to render." $replicas $v.autoscaling.enabled) -}}
{{- end -}}
{{- if and $fleet (not $v.assertion.existingSecret) -}}
{{- fail "more than one mcpgate replica needs one shared assertion signing key: set assertion.existingSecret (a Secret holding `mcpgate keys generate` output). Refusing to render." -}}
{{- end -}}
{{- if and $fleet (not $v.sealing.existingSecret) -}}
{{- fail "more than one mcpgate replica needs shared sealing keys (a state sealed by one replica must open on another): set sealing.existingSecret (a Secret holding `mcpgate sealing-keys generate` output). Refusing to render." -}}
{{- end -}}
{{- if and $v.policyBundle.url (or $v.policies $v.existingPoliciesConfigMap) -}}
{{- fail "policyBundle.url and policies/existingPoliciesConfigMap both set: mcpgate loads its policy from a bundle or from directories, not both" -}}
{{- end -}}
{{- if and (or $v.policyBundle.publicKey $v.policyBundle.bearerToken) (not $v.policyBundle.existingSecret) -}}
{{- fail "policyBundle.publicKey / bearerToken name keys of policyBundle.existingSecret, which is not set" -}}
{{- end -}}
{{- if and $fleet $v.persistence.enabled -}}
{{- fail "persistence.enabled (an embedded bbolt store) serves one replica only; with several replicas use redis.url." -}}
{{- end -}}
{{- if and $v.redis.url $v.persistence.enabled -}}
{{- fail "redis.url and persistence.enabled both set: the store has exactly one backend." -}}
{{- end -}}
{{- if and $v.redis.url (regexMatch "^[a-z]+://[^/]*:[^/@]*@" $v.redis.url) -}}
{{- fail "redis.url holds a password, which would be stored in a ConfigMap: put the store in existingConfigSecret (with redis.inExistingConfig: true) instead." -}}
{{- end -}}
{{- if and $v.existingConfigSecret $v.redis.url -}}
{{- fail "redis.url is written into the chart's configuration, which existingConfigSecret replaces: configure store.redis in that Secret and set redis.inExistingConfig." -}}
{{- end -}}
{{- if and $v.policies $v.existingPoliciesConfigMap -}}
{{- fail "set policies or existingPoliciesConfigMap, not both" -}}
{{- end -}}
{{- if and $v.extproc.envoyGateway.enabled (ne $v.mode "extproc") -}}
{{- fail "extproc.envoyGateway.enabled needs mode: extproc" -}}
{{- end -}}
{{- if and $v.extproc.istio.enabled (ne $v.mode "extproc") -}}
{{- fail "extproc.istio.enabled needs mode: extproc" -}}
{{- end -}}
{{- if and $v.extproc.envoyGateway.enabled (not $v.extproc.envoyGateway.routes) -}}
{{- fail "extproc.envoyGateway.routes: list the HTTPRoutes ({namespace, name}) mcpgate protects" -}}
{{- end -}}
{{- if and $v.extproc.envoyGateway.enabled (or $v.extproc.envoyGateway.clientTrafficPolicy $v.extproc.envoyGateway.localReplies) (not (and $v.extproc.envoyGateway.gateway.name $v.extproc.envoyGateway.gateway.namespace)) -}}
{{- fail "extproc.envoyGateway.gateway.name and .namespace are required for clientTrafficPolicy and localReplies" -}}
{{- end -}}
{{- if and $v.extproc.istio.enabled (not (and $v.extproc.istio.namespace $v.extproc.istio.workloadSelector $v.extproc.istio.upstream)) -}}
{{- fail "extproc.istio: namespace, workloadSelector (the MCP server's pod labels) and upstream (its mcpgate upstream name) are required" -}}
{{- end -}}
{{- if and (not $v.existingConfigSecret) (hasKey $cfg "listeners") -}}
{{- fail "config.listeners: the chart sets the listeners from mode and ports; remove them from config" -}}
{{- end -}}
{{- if and (not $v.existingConfigSecret) (not $cfg.upstreams) -}}
{{- fail "config.upstreams: at least one upstream MCP server is required" -}}
{{- end -}}
{{- end -}}

{{/*
mcpgate.config: mcpgate.yaml, the user's `config` with the chart-managed
keys merged over it.
*/}}
{{- define "mcpgate.config" -}}
{{- $v := .Values -}}
{{- $listeners := dict "admin" (dict "address" (printf "0.0.0.0:%d" (int $v.ports.admin))) -}}
{{- if eq $v.mode "standalone" -}}
{{- $_ := set $listeners "proxy" (dict "address" (printf "0.0.0.0:%d" (int $v.ports.proxy))) -}}
{{- else -}}
{{- $_ := set $listeners "proxy" (dict "disabled" true) -}}
{{- end -}}
{{- if eq $v.mode "sidecar" -}}
{{- $_ := set $listeners "extproc" (dict "address" "unix:/var/run/mcpgate/extproc.sock") -}}
{{- else if eq $v.mode "extproc" -}}
{{- $ep := dict "address" (printf "0.0.0.0:%d" (int $v.ports.extproc)) -}}
{{- if $v.extproc.envoyGateway.enabled -}}
{{- $_ := set $ep "max_message_budget" "0s" -}}
{{- end -}}
{{- $_ := set $listeners "extproc" $ep -}}
{{- end -}}
{{- $managed := dict "listeners" $listeners -}}
{{- $policy := dict -}}
{{- if or $v.policies $v.existingPoliciesConfigMap -}}
{{- $_ := set $policy "dirs" (list "/etc/mcpgate/policies") -}}
{{- end -}}
{{- if $v.policyBundle.url -}}
{{- $bundle := dict "url" $v.policyBundle.url -}}
{{- if $v.policyBundle.publicKey -}}
{{- $_ := set $bundle "public_key_file" (printf "/etc/mcpgate/bundle/%s" $v.policyBundle.publicKey) -}}
{{- end -}}
{{- if $v.policyBundle.bearerToken -}}
{{- $_ := set $bundle "bearer_token_file" (printf "/etc/mcpgate/bundle/%s" $v.policyBundle.bearerToken) -}}
{{- end -}}
{{- $_ := set $policy "bundle" $bundle -}}
{{- end -}}
{{- if $policy -}}
{{- $_ := set $managed "policy" $policy -}}
{{- end -}}
{{- if $v.redis.url -}}
{{- $_ := set $managed "store" (dict "redis" (dict "url" $v.redis.url)) -}}
{{- else if $v.persistence.enabled -}}
{{- $_ := set $managed "store" (dict "bolt" (dict "path" "/var/lib/mcpgate/state.db")) -}}
{{- end -}}
{{- if $v.assertion.existingSecret -}}
{{- $_ := set $managed "assertion" (dict "keys_file" (printf "/etc/mcpgate/assertion/%s" $v.assertion.secretKey)) -}}
{{- end -}}
{{- if $v.sealing.existingSecret -}}
{{- $managed = mustMergeOverwrite $managed (dict "write_safety" (dict "sealing_keys_file" (printf "/etc/mcpgate/sealing/%s" $v.sealing.secretKey))) -}}
{{- end -}}
{{- $cfg := deepCopy (default dict $v.config) -}}
{{- if $v.redis.url -}}
{{- $_ := unset $cfg "store" -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite $cfg $managed) -}}
{{- end -}}

{{/* Mappers of local_reply_config: Envoy's own errors as JSON-RPC bodies,
mcpgate's replies (details "mcpgate...") left alone. As in config/envoy/. */}}
{{- define "mcpgate.localReplyMappers" -}}
{{- $cel := "!response.code_details.startsWith('mcpgate')" -}}
{{- $msgs := list (list "EQ" 413 "413" "Request body too large for the gateway") (list "EQ" 500 "500" "Gateway error: the policy service failed or the response was too large") (list "EQ" 502 "502" "Bad gateway: the MCP server connection failed") (list "EQ" 503 "503" "Service unavailable: the MCP server or the policy service cannot be reached") (list "EQ" 504 "504" "Gateway timeout: the policy service or the MCP server did not answer in time") (list "GE" 400 "other" "Gateway error") -}}
mappers:
{{- range $m := $msgs }}
- filter:
    and_filter:
      filters:
      - status_code_filter:
          comparison: { op: {{ index $m 0 }}, value: { default_value: {{ index $m 1 }}, runtime_key: mcpgate.local_reply.{{ index $m 2 }} } }
      - extension_filter:
          name: envoy.access_loggers.extension_filters.cel
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter
            expression: {{ $cel | quote }}
  body_format_override:
    json_format:
      jsonrpc: "2.0"
      id: null
      error:
        code: -32603
        message: {{ index $m 3 | quote }}
        data: { status: "%RESPONSE_CODE%", details: "%RESPONSE_CODE_DETAILS%", request_id: "%REQ(X-REQUEST-ID)%" }
{{- end }}
{{- end -}}

{{/* mcpgate's volume mounts (serve and the validate init container). */}}
{{- define "mcpgate.volumeMounts" -}}
- name: config
  mountPath: /etc/mcpgate/config
  readOnly: true
{{- if or .Values.policies .Values.existingPoliciesConfigMap }}
- name: policies
  mountPath: /etc/mcpgate/policies
  readOnly: true
{{- end }}
{{- if .Values.assertion.existingSecret }}
- name: assertion-keys
  mountPath: /etc/mcpgate/assertion
  readOnly: true
{{- end }}
{{- if .Values.sealing.existingSecret }}
- name: sealing-keys
  mountPath: /etc/mcpgate/sealing
  readOnly: true
{{- end }}
{{- if .Values.policyBundle.existingSecret }}
- name: bundle-credentials
  mountPath: /etc/mcpgate/bundle
  readOnly: true
{{- end }}
{{- if .Values.stdio.existingSecret }}
- name: stdio-secrets
  mountPath: /etc/mcpgate/stdio
  readOnly: true
{{- end }}
- name: state
  mountPath: /var/lib/mcpgate
- name: tmp
  mountPath: /tmp
{{- if eq .Values.mode "sidecar" }}
- name: extproc-socket
  mountPath: /var/run/mcpgate
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
mcpgate.gomemlimit: the GOMEMLIMIT value (Go syntax), or "" for none.
goRuntime.memoryLimit as given; otherwise goRuntime.memoryLimitPercent of
resources.limits.memory (a Kubernetes quantity: plain bytes or a k, M, G,
T, P, Ki, Mi, Gi, Ti or Pi suffix), in whole bytes. Fails on a value it
cannot read, and below 32 MiB: mcpgate's Go runtime alone uses about
12 MiB idle and 20 MiB at 32 concurrent clients (docs/operations/memory.md), and a
limit under that keeps the collector running all the time.
*/}}
{{- define "mcpgate.gomemlimit" -}}
{{- $g := default dict .Values.goRuntime -}}
{{- if kindIs "bool" $g.memoryLimit -}}
{{- fail "goRuntime.memoryLimit is a boolean: YAML reads an unquoted off as false. Write \"off\" in quotes, or a size such as 200MiB." -}}
{{- end -}}
{{- $explicit := toString (default "" $g.memoryLimit) -}}
{{- if $explicit -}}
{{- if not (regexMatch "^(off|[0-9]+(B|KiB|MiB|GiB|TiB)?)$" $explicit) -}}
{{- fail (printf "goRuntime.memoryLimit %q: want a GOMEMLIMIT such as 200MiB (bytes, with an optional B, KiB, MiB, GiB or TiB suffix) or off" $explicit) -}}
{{- end -}}
{{- $explicit -}}
{{- else -}}
{{- $pct := default 0 $g.memoryLimitPercent -}}
{{- if not (or (kindIs "float64" $pct) (kindIs "int" $pct) (kindIs "int64" $pct)) -}}
{{- fail (printf "goRuntime.memoryLimitPercent %v: want a number from 0 (no GOMEMLIMIT) to 100" $pct) -}}
{{- end -}}
{{- if or (lt (float64 $pct) 0.0) (gt (float64 $pct) 100.0) -}}
{{- fail (printf "goRuntime.memoryLimitPercent %v: want a number from 0 (no GOMEMLIMIT) to 100" $pct) -}}
{{- end -}}
{{- $limit := dig "limits" "memory" "" (default dict .Values.resources) -}}
{{- if and (gt (float64 $pct) 0.0) (ne (toString $limit) "") -}}
{{- $bytes := 0.0 -}}
{{- if or (kindIs "float64" $limit) (kindIs "int" $limit) (kindIs "int64" $limit) -}}
{{- $bytes = float64 $limit -}}
{{- else -}}
{{- $q := toString $limit -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?(k|M|G|T|P|Ki|Mi|Gi|Ti|Pi)?$" $q) -}}
{{- fail (printf "resources.limits.memory %q: cannot compute GOMEMLIMIT from it (want bytes with an optional k, M, G, T, P, Ki, Mi, Gi, Ti or Pi suffix); set goRuntime.memoryLimit instead" $q) -}}
{{- end -}}
{{- $unit := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "P" 1000000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "Pi" 1125899906842624 -}}
{{- $num := regexReplaceAll "^([0-9.]+)([A-Za-z]*)$" $q "${1}" -}}
{{- $suffix := regexReplaceAll "^([0-9.]+)([A-Za-z]*)$" $q "${2}" -}}
{{- $bytes = mulf (float64 $num) (index $unit $suffix) -}}
{{- end -}}
{{- $gomem := int64 (floor (divf (mulf $bytes $pct) 100)) -}}
{{- if lt $gomem 33554432 -}}
{{- fail (printf "GOMEMLIMIT would be %d bytes (goRuntime.memoryLimitPercent %v of resources.limits.memory %v), under 32 MiB: mcpgate's Go runtime needs about 20 MiB under load. Raise resources.limits.memory, or set goRuntime.memoryLimit (or memoryLimitPercent: 0)." $gomem $pct $limit) -}}
{{- end -}}
{{- printf "%d" $gomem -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* mcpgate.goRuntimeEnv: GOMEMLIMIT and GOGC env entries (goRuntime), or nothing. */}}
{{- define "mcpgate.goRuntimeEnv" -}}
{{- $g := default dict .Values.goRuntime -}}
{{- $gomem := include "mcpgate.gomemlimit" . -}}
{{- if kindIs "bool" $g.gogc -}}
{{- fail "goRuntime.gogc is a boolean: YAML reads an unquoted off as false. Write \"off\" in quotes, or a whole number." -}}
{{- end -}}
{{- $gogc := toString (default "" $g.gogc) -}}
{{- if and $gogc (not (regexMatch "^(off|[0-9]+)$" $gogc)) -}}
{{- fail (printf "goRuntime.gogc %q: want a whole number (100 is Go's default) or off" $gogc) -}}
{{- end -}}
{{- if and (eq $gogc "off") (or (not $gomem) (eq $gomem "off")) -}}
{{- fail "goRuntime.gogc off without a GOMEMLIMIT: the heap would grow without bound. Set resources.limits.memory (with goRuntime.memoryLimitPercent) or goRuntime.memoryLimit." -}}
{{- end -}}
{{- if and (eq $gogc "off") .Values.autoscaling.enabled .Values.autoscaling.targetMemoryUtilizationPercentage -}}
{{- fail "goRuntime.gogc off with autoscaling.targetMemoryUtilizationPercentage: with the collector off, memory stays near GOMEMLIMIT whatever the load, and the autoscaler would only ever scale up. Keep a GOGC, or scale on CPU." -}}
{{- end -}}
{{- range $e := .Values.extraEnv -}}
{{- if has (toString $e.name) (list "GOMEMLIMIT" "GOGC") -}}
{{- fail (printf "extraEnv sets %s: use goRuntime.memoryLimit / memoryLimitPercent / gogc, which the chart writes itself" $e.name) -}}
{{- end -}}
{{- end -}}
{{- if and $gomem (ne $gomem "off") }}
- name: GOMEMLIMIT
  value: {{ $gomem | quote }}
{{- end }}
{{- if $gogc }}
- name: GOGC
  value: {{ $gogc | quote }}
{{- end }}
{{- end -}}
