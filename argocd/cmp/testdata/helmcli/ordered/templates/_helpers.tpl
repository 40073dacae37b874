{{- define "ordered.unused" -}}partial{{- end -}}
