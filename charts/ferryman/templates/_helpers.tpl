{{/* The chart's name. */}}
{{- define "ferryman.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's objects: release name, plus the chart's unless it already holds it. */}}
{{- define "ferryman.fullname" -}}
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

{{/* Labels every object carries (the Kubernetes recommended labels). */}}
{{- define "ferryman.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ferryman.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ferryman
{{- end }}

{{/* Selector labels (stable across upgrades); a component adds app.kubernetes.io/component. */}}
{{- define "ferryman.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ferryman.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The operator's ServiceAccount name. */}}
{{- define "ferryman.operatorServiceAccountName" -}}
{{- printf "%s-operator" (include "ferryman.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The workers' ServiceAccount name. */}}
{{- define "ferryman.workerServiceAccountName" -}}
{{- printf "%s-worker" (include "ferryman.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
