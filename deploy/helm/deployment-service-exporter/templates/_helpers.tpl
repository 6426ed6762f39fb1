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
{{- fail "image.repository is required: no public image exists. Build and push one (docker build -t REGISTRY/deployment-service-exporter:VERSION . && docker push REGISTRY/deployment-service-exporter:VERSION), then --set image.repository=REGISTRY/deployment-service-exporter" }}
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
{{- range $v.serviceMonitor.targets }}
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
{{- if and $v.config.modules (not (hasKey $v.config.modules (.module | default "default"))) }}
{{- fail (printf "serviceMonitor.targets %s: module %q is not in config.modules" .name (.module | default "default")) }}
{{- end }}
{{- end }}
{{- end }}
