{{/* Names, labels and the checks every object relies on. */}}

{{- define "dse.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The object name prefix: release and chart name, 63 characters at most (a DNS
label). A release named after the chart is not repeated.
*/}}
{{- define "dse.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "dse.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dse.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "dse.labels" -}}
helm.sh/chart: {{ include "dse.chart" . }}
{{ include "dse.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: deployment-service-exporter
{{- end }}

{{- define "dse.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dse.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image: repository, then the digest if given, else the tag. */}}
{{- define "dse.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The Secret holding the API key, and its key, or nothing without one. */}}
{{- define "dse.apiKeySecret" -}}
{{- if .Values.apiKey.existingSecret }}{{ .Values.apiKey.existingSecret }}
{{- else if .Values.apiKey.value }}{{ include "dse.fullname" . }}
{{- end }}
{{- end }}

{{- define "dse.apiKeySecretKey" -}}
{{- if .Values.apiKey.existingSecret }}{{ .Values.apiKey.existingSecretKey }}{{ else }}api-key{{ end }}
{{- end }}

{{/* The Secret holding the configuration file, or nothing without one. */}}
{{- define "dse.configSecret" -}}
{{- if .Values.config.existingSecret }}{{ .Values.config.existingSecret }}
{{- else if .Values.config.modules }}{{ include "dse.fullname" . }}-config
{{- end }}
{{- end }}

{{- define "dse.configSecretKey" -}}
{{- if .Values.config.existingSecret }}{{ .Values.config.existingSecretKey }}{{ else }}config.yml{{ end }}
{{- end }}

{{/*
dse.validate fails the render, with one line saying what to set, on values
the exporter would refuse at start or that would deploy something useless:
better a clear error from helm than a pod in CrashLoopBackOff.
*/}}
{{- define "dse.validate" -}}
{{- $v := .Values }}
{{- if not $v.image.repository }}
{{- fail "image.repository is empty: leave it unset for the published ghcr.io/deployment-service/deployment-service-exporter, or set REGISTRY/deployment-service-exporter for an image of your own" }}
{{- end }}
{{- if and $v.image.digest (not (regexMatch "^sha256:[0-9a-f]{64}$" $v.image.digest)) }}
{{- fail (printf "image.digest %q is not sha256:<64 hex digits>" $v.image.digest) }}
{{- end }}
{{- $config := include "dse.configSecret" . }}
{{- if not (or $v.apiUrl $config $v.demo) }}
{{- fail "nothing to watch: set apiUrl (and apiKey) for /metrics, or config.modules (or config.existingSecret) with serviceMonitor.targets for /probe, or demo=true to try the chart" }}
{{- end }}
{{- if and $v.demo $v.apiUrl }}
{{- fail "demo and apiUrl conflict: demo watches an embedded sample service; unset one of them" }}
{{- end }}
{{- if and $v.apiUrl (not (regexMatch "^https?://[^/?#@]+" $v.apiUrl)) }}
{{- fail (printf "apiUrl %q must be an http:// or https:// URL without credentials" $v.apiUrl) }}
{{- end }}
{{- if and $v.apiKey.existingSecret $v.apiKey.value }}
{{- fail "apiKey.existingSecret and apiKey.value conflict: give the key one way" }}
{{- end }}
{{- if and $v.apiUrl (not (include "dse.apiKeySecret" .)) }}
{{- fail "apiUrl needs a key: apiKey.existingSecret (a Secret you made, e.g. kubectl create secret generic NAME --from-file=api-key=./api-key) or --set-file apiKey.value=./api-key" }}
{{- end }}
{{- if and $v.config.existingSecret $v.config.modules }}
{{- fail "config.existingSecret and config.modules conflict: give the modules one way" }}
{{- end }}
{{- if and $v.serviceMonitor.targets (not $config) }}
{{- fail "serviceMonitor.targets are polled through /probe with the modules of config.modules (or config.existingSecret): set them" }}
{{- end }}
{{- $names := dict }}
{{- range $t := $v.serviceMonitor.targets }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" (.name | default "")) }}
{{- fail (printf "serviceMonitor.targets: name %q must be lower-case letters, digits and '-' (it names a ServiceMonitor)" (.name | default "")) }}
{{- end }}
{{- if hasKey $names .name }}
{{- fail (printf "serviceMonitor.targets: name %q is given twice" .name) }}
{{- end }}
{{- $_ := set $names .name true }}
{{- if not (regexMatch "^https?://[^/?#@]+" (.url | default "")) }}
{{- fail (printf "serviceMonitor.targets %s: url %q must be the http:// or https:// base URL of a service" .name (.url | default "")) }}
{{- end }}
{{- $module := .module | default "default" }}
{{- if and $v.config.modules (not (hasKey $v.config.modules $module)) }}
{{- fail (printf "serviceMonitor.targets %s: module %q is not in config.modules" .name $module) }}
{{- end }}
{{- if $v.config.modules }}
{{- if not (include "dse.moduleAllows" (dict "module" (get $v.config.modules $module) "url" .url)) }}
{{- fail (printf "serviceMonitor.targets %s: module %q does not list %s under targets, so the exporter would refuse to probe it (403): add it to config.modules.%s.targets" .name $module .url $module) }}
{{- end }}
{{- if and $v.scrapeConfig.enabled (or (not $v.scrapeConfig.modules) (has $module $v.scrapeConfig.modules)) }}
{{- $url := include "dse.normalizeTarget" .url }}
{{- range (get $v.config.modules $module).targets }}
{{- if and (not (contains "*" .)) (eq (include "dse.normalizeTarget" .) $url) }}
{{- fail (printf "serviceMonitor.targets %s: the ScrapeConfig (scrapeConfig.enabled) already probes %s with module %q, found through /sd: drop this entry, or leave %q out of scrapeConfig.modules" $t.name $url $module $module) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- range $name, $m := $v.config.modules }}
{{- if and (include "dse.moduleCredentials" $m) (not $m.targets) (not $m.allow_any_target) }}
{{- fail (printf "config.modules.%s carries credentials but lists no targets, so the exporter would refuse it: add targets: [https://deploy.example.com] naming the services its key may go to, or allow_any_target: true to send the key wherever /probe is told" $name) }}
{{- end }}
{{- end }}
{{- $sc := $v.scrapeConfig }}
{{- if $sc.enabled }}
{{- if not $config }}
{{- fail "scrapeConfig probes the targets that config.modules lists, found through the exporter's /sd: set config.modules (or config.existingSecret)" }}
{{- end }}
{{- range $sc.modules }}
{{- if and $v.config.modules (not (hasKey $v.config.modules .)) }}
{{- fail (printf "scrapeConfig.modules: module %q is not in config.modules" .) }}
{{- end }}
{{- end }}
{{- if $v.config.modules }}
{{- $concrete := 0 }}
{{- range $name, $m := $v.config.modules }}
{{- if or (not $sc.modules) (has $name $sc.modules) }}
{{- range $m.targets }}
{{- if not (contains "*" .) }}{{ $concrete = add1 $concrete }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- if not $concrete }}
{{- fail "scrapeConfig: no module it discovers lists a concrete target (one without *) under targets, so /sd would hand Prometheus nothing to probe" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
dse.normalizeTarget prints a base URL, or a targets entry, in the spelling
/probe and /sd use: lower-case scheme and host, no default port, no trailing
slash. A "*" port is kept. The exporter has the last word; this is what the
chart needs to compare the values it is given.
*/}}
{{- define "dse.normalizeTarget" -}}
{{- $scheme := "" }}{{ $rest := . }}
{{- if contains "://" . }}
{{- $parts := splitn "://" 2 . }}
{{- $scheme = lower $parts._0 }}{{ $rest = $parts._1 }}
{{- end }}
{{- $authority := regexReplaceAll "/.*$" $rest "" }}
{{- $path := regexReplaceAll "/+$" (trimPrefix $authority $rest) "" }}
{{- $host := lower $authority }}
{{- if or (and (eq $scheme "https") (hasSuffix ":443" $host)) (and (eq $scheme "http") (hasSuffix ":80" $host)) }}
{{- $host = regexReplaceAll ":[0-9]+$" $host "" }}
{{- end }}
{{- printf "%s://%s%s" $scheme $host $path }}
{{- end }}

{{/*
dse.targetRegex prints a regular expression matching the base URLs (as
dse.normalizeTarget spells them) that a targets entry names: "*" stands for
one whole host label, or for the port (any, or none).
*/}}
{{- define "dse.targetRegex" -}}
{{- $quoted := regexQuoteMeta (include "dse.normalizeTarget" .) }}
{{- $quoted = replace ":\\*" "(:[0-9]+)?" $quoted }}
{{- printf "^%s$" (replace "\\*" "[^./:]+" $quoted) }}
{{- end }}

{{/*
dse.moduleCredentials prints "true" when a module of config.modules sends a
secret to the service, as the exporter counts them: an authorization with
credentials, credentials_file or credentials_ref, or an http_headers header
with secrets or files.
*/}}
{{- define "dse.moduleCredentials" -}}
{{- $hc := .http_client_config | default dict }}
{{- $auth := $hc.authorization | default dict }}
{{- if or $auth.credentials $auth.credentials_file $auth.credentials_ref }}true{{ end }}
{{- range $name, $h := $hc.http_headers | default dict }}
{{- if and (kindIs "map" $h) (or $h.secrets $h.files) }}true{{ end }}
{{- end }}
{{- end }}

{{/*
dse.moduleAllows prints "true" when /probe may use module (a value of
config.modules) with url: it lists url under targets, or says
allow_any_target, or lists none and carries no credentials.
*/}}
{{- define "dse.moduleAllows" -}}
{{- $m := .module }}
{{- $url := include "dse.normalizeTarget" .url }}
{{- if or $m.allow_any_target (and (not $m.targets) (not (include "dse.moduleCredentials" $m))) }}true
{{- else }}
{{- range $m.targets }}
{{- if regexMatch (include "dse.targetRegex" .) $url }}true{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The scrape protocol and histogram settings of a ServiceMonitor or
ScrapeConfig spec, from serviceMonitor or scrapeConfig values: each only
when set, so that Prometheus' defaults hold otherwise.
*/}}
{{- define "dse.scrapeSettings" -}}
{{- with .scrapeProtocols }}
scrapeProtocols:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .fallbackScrapeProtocol }}
fallbackScrapeProtocol: {{ . }}
{{- end }}
{{- range $k := list "scrapeNativeHistograms" "scrapeClassicHistograms" "convertClassicHistogramsToNHCB" }}
{{- if kindIs "bool" (get $ $k) }}
{{ $k }}: {{ get $ $k }}
{{- end }}
{{- end }}
{{- end }}
