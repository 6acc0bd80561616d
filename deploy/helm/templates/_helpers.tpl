{{- /* The objects' names: "cloud-resource-operator" unless fullnameOverride
sets another, so two releases (two shards) install side by side. */ -}}
{{- define "cro.fullname" -}}
{{- .Values.fullnameOverride | default "cloud-resource-operator" | trunc 63 | trimSuffix "-" -}}
{{- end }}

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
