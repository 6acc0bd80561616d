{{- define "cro.labels" -}}
app.kubernetes.io/name: cloud-resource-operator
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{- define "cro.extraTags" -}}
{{- $tags := list -}}
{{- range $k, $v := .Values.operator.extraTags -}}
{{- $tags = append $tags (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $tags -}}
{{- end }}
