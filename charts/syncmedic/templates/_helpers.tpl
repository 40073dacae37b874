{{/* The name of every object: fullnameOverride, else the release name if it contains the chart's, else <release>-syncmedic. */}}
{{- define "syncmedic.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "syncmedic.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The labels that select the daemon's Pods. */}}
{{- define "syncmedic.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: serve
{{- end -}}

{{/* The image reference: repository@digest, or repository:tag (default: the chart's appVersion). */}}
{{- define "syncmedic.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The Secret with the token files. */}}
{{- define "syncmedic.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "syncmedic.fullname" .)) -}}
{{- end -}}

{{/* The ServiceAccount the Pods run as: serviceAccount.name, else the full name (created unless serviceAccount.create is false). */}}
{{- define "syncmedic.serviceAccountName" -}}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
{{- fail "serviceAccount.create=false needs serviceAccount.name: the existing ServiceAccount the Pods run as (the chart's Role and ClusterRole are bound to it)" -}}
{{- end -}}
{{- .Values.serviceAccount.name | default (include "syncmedic.fullname" .) -}}
{{- end -}}
