{{/*
The one image of every component: image.repository:image.tag, the tag defaulting to the chart's
appVersion (the version the templates were written for).
*/}}
{{- define "tessera.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
