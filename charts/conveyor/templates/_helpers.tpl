{{/* Names, labels and the values every template shares. */}}

{{- define "conveyor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "conveyor.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "conveyor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The selector of one component's pods (dict "root" . "component" "operator"): immutable, so minimal. */}}
{{- define "conveyor.componentSelectorLabels" -}}
app.kubernetes.io/name: {{ include "conveyor.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Recommended labels (app.kubernetes.io/*) of one component (dict "root" . "component" "operator"). */}}
{{- define "conveyor.componentLabels" -}}
helm.sh/chart: {{ include "conveyor.chart" .root }}
{{ include "conveyor.componentSelectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: conveyor
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The selector of the operator pods. */}}
{{- define "conveyor.selectorLabels" -}}
{{ include "conveyor.componentSelectorLabels" (dict "root" . "component" "operator") }}
{{- end -}}

{{/* Recommended labels on everything the chart makes for the operator. */}}
{{- define "conveyor.labels" -}}
{{ include "conveyor.componentLabels" (dict "root" . "component" "operator") }}
{{- end -}}

{{/* The selector of the job API pods (jobApi.enabled). */}}
{{- define "conveyor.jobApi.selectorLabels" -}}
{{ include "conveyor.componentSelectorLabels" (dict "root" . "component" "job-api") }}
{{- end -}}

{{/* Recommended labels on the job API's objects. */}}
{{- define "conveyor.jobApi.labels" -}}
{{ include "conveyor.componentLabels" (dict "root" . "component" "job-api") }}
{{- end -}}

{{/* Name of the job API's Deployment, Service and PodDisruptionBudget. */}}
{{- define "conveyor.jobApi.fullname" -}}
{{- printf "%s-job-api" (include "conveyor.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "conveyor.jobApi.serviceAccountName" -}}
{{- if .Values.jobApi.serviceAccount.create -}}
{{- default (include "conveyor.jobApi.fullname" .) .Values.jobApi.serviceAccount.name -}}
{{- else -}}
{{- required "jobApi.serviceAccount.name is required when jobApi.serviceAccount.create is false" .Values.jobApi.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "conveyor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "conveyor.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "conveyor.image" -}}
{{- $tag := default .root.Chart.AppVersion .image.tag -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "conveyor.leaseName" -}}
{{- default (include "conveyor.fullname" .) .Values.operator.leaderElection.leaseName -}}
{{- end -}}

{{/* True (non-empty) when the external metrics API is served. */}}
{{- define "conveyor.externalMetrics" -}}
{{- if eq .Values.metrics.mode "external-metrics" -}}true{{- end -}}
{{- end -}}

{{- define "conveyor.metricsApiServiceName" -}}
{{- printf "%s-metrics-api" (include "conveyor.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "conveyor.metricsServiceName" -}}
{{- printf "%s-metrics" (include "conveyor.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret holding the external metrics API's serving certificate (not for self-signed). */}}
{{- define "conveyor.metricsApiTlsSecret" -}}
{{- if eq .Values.metrics.tls.source "secret" -}}
{{- required "metrics.tls.secret.name is required when metrics.tls.source is secret" .Values.metrics.tls.secret.name -}}
{{- else -}}
{{- printf "%s-metrics-api-tls" (include "conveyor.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* DNS names the serving certificate must hold. */}}
{{- define "conveyor.metricsApiHosts" -}}
{{- $svc := include "conveyor.metricsApiServiceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson -}}
{{- end -}}

{{/* The namespaces the operator's workload permissions are granted in ("" = cluster-wide). */}}
{{- define "conveyor.rbacNamespaces" -}}
{{- if .Values.operator.watchNamespaces -}}
{{- .Values.operator.watchNamespaces | uniq | toJson -}}
{{- else -}}
{{- list "" | toJson -}}
{{- end -}}
{{- end -}}

{{/* Fails the render on combinations the schema cannot express. */}}
{{- define "conveyor.validate" -}}
{{- if and (gt (int .Values.operator.replicas) 1) (not .Values.operator.leaderElection.enabled) -}}
{{- fail "operator.replicas > 1 needs operator.leaderElection.enabled: two operators would write at once" -}}
{{- end -}}
{{- $le := .Values.operator.leaderElection -}}
{{- if not (and (lt (int $le.retryPeriodSeconds) (int $le.renewDeadlineSeconds)) (lt (int $le.renewDeadlineSeconds) (int $le.leaseDurationSeconds))) -}}
{{- fail "operator.leaderElection: need retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds" -}}
{{- end -}}
{{- if and (include "conveyor.externalMetrics" .) (eq .Values.metrics.tls.source "secret") (not .Values.metrics.tls.secret.caBundle) -}}
{{- fail "metrics.tls.secret.caBundle (base64 of the PEM CA) is required when metrics.tls.source is secret" -}}
{{- end -}}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
{{- fail "serviceAccount.name is required when serviceAccount.create is false" -}}
{{- end -}}
{{- include "conveyor.jobApi.validate" . -}}
{{- end -}}

{{/* The job API's settings the schema cannot check. Error messages never repeat a value. */}}
{{- define "conveyor.jobApi.validate" -}}
{{- $api := .Values.jobApi -}}
{{- if $api.enabled -}}
{{- if not $api.redis.url -}}
{{- fail "jobApi.redis.url is required when jobApi.enabled (redis://host:port, rediss://…, redis-cluster://… or redis-sentinel://…/<master-name>; the password goes in jobApi.redis.secretRef)" -}}
{{- end -}}
{{- if regexMatch "^[a-z-]+://[^/@]*:[^/@]*@" $api.redis.url -}}
{{- fail "jobApi.redis.url must not contain a password: put it in a Secret and set jobApi.redis.secretRef" -}}
{{- end -}}
{{- if and $api.auth.enabled (not $api.auth.secretRef.name) -}}
{{- fail "jobApi.auth.secretRef.name is required: the Secret holding the API's bearer token (or set jobApi.auth.enabled: false to run the API without authentication — anyone who reaches the Service can then enqueue jobs and read results)" -}}
{{- end -}}
{{- if and (not $api.serviceAccount.create) (not $api.serviceAccount.name) -}}
{{- fail "jobApi.serviceAccount.name is required when jobApi.serviceAccount.create is false" -}}
{{- end -}}
{{- $pdb := $api.podDisruptionBudget -}}
{{- if and $pdb.enabled (gt (int $api.replicas) 1) (not (kindIs "string" $pdb.minAvailable)) (ge (int $pdb.minAvailable) (int $api.replicas)) -}}
{{- fail "jobApi.podDisruptionBudget.minAvailable must be less than jobApi.replicas, or no node could ever be drained" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The external metrics API's certificate in `helm` mode, as JSON {ca, crt, key} (base64 PEM):
the existing Secret's when it is complete (so upgrades keep it), else a new CA and a
certificate signed by it. Generated once per render and shared by the Secret, the APIService's
caBundle and the pod template's checksum (a new certificate restarts the operator pods).
*/}}
{{- define "conveyor.helmTls" -}}
{{- $memo := .Values.metrics.tls.helm -}}
{{- if not (hasKey $memo "_generated") -}}
{{- $name := include "conveyor.metricsApiTlsSecret" . -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $name -}}
{{- $data := dict -}}
{{- if and $existing $existing.data -}}
{{- if and (index $existing.data "ca.crt") (index $existing.data "tls.crt") (index $existing.data "tls.key") -}}
{{- $data = dict "ca" (index $existing.data "ca.crt") "crt" (index $existing.data "tls.crt") "key" (index $existing.data "tls.key") -}}
{{- end -}}
{{- end -}}
{{- if not $data -}}
{{- $days := int .Values.metrics.tls.helm.validityDays -}}
{{- $ca := genCA (printf "%s-metrics-api-ca" (include "conveyor.fullname" .)) $days -}}
{{- $svc := include "conveyor.metricsApiServiceName" . -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc .Release.Namespace) nil (include "conveyor.metricsApiHosts" . | fromJsonArray) $days $ca -}}
{{- $data = dict "ca" ($ca.Cert | b64enc) "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) -}}
{{- end -}}
{{- $_ := set $memo "_generated" $data -}}
{{- end -}}
{{- get $memo "_generated" | toJson -}}
{{- end -}}
