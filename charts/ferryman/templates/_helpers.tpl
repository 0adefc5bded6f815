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

{{/* Labels of one component's objects: the common labels plus app.kubernetes.io/component. */}}
{{- define "ferryman.componentLabels" -}}
{{ include "ferryman.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Selector labels of one component. */}}
{{- define "ferryman.componentSelectorLabels" -}}
{{ include "ferryman.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The image reference; the tag defaults to the chart's appVersion. */}}
{{- define "ferryman.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The lanes string as the worker reads it (FERRYMAN_LANES): as written, stripped. */}}
{{- define "ferryman.lanes" -}}
{{- trim .Values.worker.lanes }}
{{- end }}

{{/* The threads of the lanes given a width, and the lanes without one, as "<threads> <open>";
     fails on a lane named twice (JSON schema cannot say that). */}}
{{- define "ferryman.threads" -}}
{{- $total := 0 }}
{{- $open := 0 }}
{{- $seen := dict }}
{{- range splitList "," (include "ferryman.lanes" .) }}
{{- $parts := splitList ":" (trim .) }}
{{- $name := trim (index $parts 0) }}
{{- if hasKey $seen $name }}
{{- fail (printf "worker.lanes %q names lane %q twice: give each lane once" $.Values.worker.lanes $name) }}
{{- end }}
{{- $_ := set $seen $name true }}
{{- if eq (len $parts) 1 }}
{{- $open = add1 $open }}
{{- else }}
{{- $total = add $total (atoi (trim (index $parts 1))) }}
{{- end }}
{{- end }}
{{- printf "%d %d" $total $open }}
{{- end }}

{{/* The workers' resolved pool size (FERRYMAN_POOL_SIZE): worker.poolSize, or threads + 4.
     Fails where `ferryman worker` would refuse: worker.poolSize below threads + 4, or lanes
     without a thread count (they share worker.poolSize - 4 - the others' threads) and no
     worker.poolSize, or too small a one to give each of them 1 thread. */}}
{{- define "ferryman.poolSize" -}}
{{- $counts := splitList " " (include "ferryman.threads" .) }}
{{- $threads := index $counts 0 | atoi }}
{{- $open := index $counts 1 | atoi }}
{{- $needed := add $threads 4 $open }}
{{- $pool := .Values.worker.poolSize }}
{{- if and (gt $open 0) (kindIs "invalid" $pool) }}
{{- fail (printf "worker.lanes %q has %d lane(s) without a thread count, whose threads come from worker.poolSize, which is empty: set worker.poolSize to at least %d, or give each lane its threads (name:threads)" (include "ferryman.lanes" .) $open $needed) }}
{{- else if kindIs "invalid" $pool }}
{{- $needed }}
{{- else if and (gt $open 0) (lt (int $pool) (int $needed)) }}
{{- fail (printf "worker.poolSize %d leaves %d thread(s) for the %d lane(s) of worker.lanes %q without a thread count (after 4 of the worker's own connections and %d for the other lanes), and each needs at least 1: set worker.poolSize to at least %d, or narrow the other lanes" (int $pool) (max 0 (sub (int $pool) (add $threads 4))) $open (include "ferryman.lanes" .) $threads $needed) }}
{{- else if lt (int $pool) (int $needed) }}
{{- fail (printf "worker.poolSize %d is too small for worker.lanes %q: they need %d connections plus 4 of the worker's own (notifier, poller, cron, heartbeat); set worker.poolSize to at least %d, or leave it empty" (int $pool) (include "ferryman.lanes" .) $threads $needed) }}
{{- else }}
{{- int $pool }}
{{- end }}
{{- end }}

{{/* The pool-spec hash (interface 3): the first 16 hex digits of
     sha256("lanes=<lanes>;poolSize=<resolved pool size>"); the operator computes the same. */}}
{{- define "ferryman.poolSpecHash" -}}
{{- printf "lanes=%s;poolSize=%s" (include "ferryman.lanes" .) (include "ferryman.poolSize" .) | sha256sum | trunc 16 }}
{{- end }}

{{/* FERRYMAN_DATABASE_URL from the component's Secret (database.roles.<component>, else
     database.existingSecret), the API server's address (apiServer: local clusters), then
     extraEnv. Call with (dict "root" . "component" "worker"). */}}
{{- define "ferryman.env" -}}
{{- $root := .root }}
{{- $own := index $root.Values.database.roles .component | default "" }}
- name: FERRYMAN_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $own | default $root.Values.database.existingSecret }}
      key: {{ $root.Values.database.secretKey }}
{{- with $root.Values.apiServer.host }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ . | quote }}
{{- end }}
{{- with $root.Values.apiServer.port }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ . | int | toString | quote }}
{{- end }}
{{- with $root.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Where mappings may write (values destinations), as the operator's or the workers' env: the
     operator checks it at admission, the workers before every write. Call with
     (dict "root" . "prefix" "FERRYMAN_OPERATOR_") or (dict "root" . "prefix" "FERRYMAN_"). */}}
{{- define "ferryman.destinationsEnv" -}}
{{- $d := .root.Values.destinations }}
- name: {{ .prefix }}DESTINATION_SCHEMAS
  value: {{ join "," $d.schemas | quote }}
- name: {{ .prefix }}DESTINATION_TABLES
  value: {{ join "," $d.tables | quote }}
- name: {{ .prefix }}DESTINATION_UNSCOPED
  value: {{ $d.allowUnscopedTables | toString | quote }}
{{- end }}

{{/* The Secret holding the installation's credential sealing key. */}}
{{- define "ferryman.sealingSecretName" -}}
{{- .Values.sealing.existingSecret | default (printf "%s-sealing-key" (include "ferryman.fullname" .)) }}
{{- end }}

{{/* The sealing key, read-only at /var/run/secrets/ferryman-sealing/key (operator, workers). */}}
{{- define "ferryman.sealingVolume" -}}
- name: sealing-key
  secret:
    secretName: {{ include "ferryman.sealingSecretName" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.sealing.secretKey }}
        path: key
{{- end }}
{{- define "ferryman.sealingMount" -}}
- name: sealing-key
  mountPath: /var/run/secrets/ferryman-sealing
  readOnly: true
{{- end }}

{{/* Pod-level settings every pod shares. */}}
{{- define "ferryman.podSpecCommon" -}}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.hostNetwork }}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
{{- end }}

{{/* Container-level settings every container shares (image, security context). */}}
{{- define "ferryman.containerCommon" -}}
image: {{ include "ferryman.image" . | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
terminationMessagePolicy: FallbackToLogsOnError
{{- end }}

{{/* /tmp as an emptyDir: the root filesystem is read-only. */}}
{{- define "ferryman.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}
{{- define "ferryman.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* The installation's own Secrets as namespace/name, comma-separated: the database URL's, the
     roles' and the sealing key's. The operator refuses a run naming one as its credential. */}}
{{- define "ferryman.protectedSecrets" -}}
{{- $ns := .Release.Namespace }}
{{- $names := list .Values.database.existingSecret (include "ferryman.sealingSecretName" .) }}
{{- range $component, $name := .Values.database.roles }}
{{- if $name }}{{- $names = append $names $name }}{{- end }}
{{- end }}
{{- $pairs := list }}
{{- range $names | uniq }}{{- if . }}{{- $pairs = append $pairs (printf "%s/%s" $ns .) }}{{- end }}{{- end }}
{{- join "," $pairs }}
{{- end }}
