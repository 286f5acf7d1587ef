{{/*
Helpers. The chart's templates keep to a small function set (include, default,
quote, nindent, indent, trunc, trimSuffix, sha256sum, required, toYaml, printf)
so that test/deploy.test.ts can render them without a helm binary.
*/}}

{{- define "model-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "model-gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if eq .Release.Name .Chart.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "model-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "model-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "model-gateway.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | trunc 63 | trimSuffix "-" }}
{{ include "model-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret the pods take their environment from: the user's, or the chart's. */}}
{{- define "model-gateway.secretName" -}}
{{- default (include "model-gateway.fullname" .) .Values.secret.existingSecret }}
{{- end }}
