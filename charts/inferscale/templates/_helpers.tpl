{{- define "inferscale.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "inferscale.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end -}}

{{- define "inferscale.labels" -}}
{{ include "inferscale.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: inferscale
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "inferscale.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "inferscale.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The metrics Service's name, which the PrometheusRule's job label follows: the suffix inside the 63 characters
a Service name may have (a 45-character release name made it 64, and the install failed).
*/}}
{{- define "inferscale.metricsName" -}}
{{- $name := printf "%s-metrics" (include "inferscale.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $name) -}}
{{- fail (printf "release name %s: the metrics Service's name %s must start with a letter and hold only a-z, 0-9 and - (a DNS-1035 label)" .Release.Name $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{- define "inferscale.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The rules the operator needs in every namespace it watches. Each rule says why; nothing touches secrets.
*/}}
{{- define "inferscale.rules" -}}
# Application: list InferenceServices every tick. No watch (the tick lists them) and no patch (the operator
# writes only their status).
- apiGroups: ["inferscale.dev"]
  resources: ["inferenceservices"]
  verbs: ["get", "list"]
# Application: write observed state, the decision and its explanation.
- apiGroups: ["inferscale.dev"]
  resources: ["inferenceservices/status"]
  verbs: ["patch"]
# Application: read the target's spec.replicas, selector and rollout state (a cache kept by list and watch).
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["list", "watch"]
# Application: the only write to a scaled workload - its replica count, through /scale.
- apiGroups: ["apps"]
  resources: ["deployments/scale"]
  verbs: ["patch"]
{{- if .Values.rbac.managedDeployments }}
# Application (managed mode, spec.template): create and update the Deployment the operator owns. No delete:
# the Deployment carries an ownerReference, so the garbage collector removes it with its InferenceService.
# RBAC cannot narrow these to owned Deployments; the chart's ValidatingAdmissionPolicy does.
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["create", "patch"]
# Application (managed mode): the ownerReference sets blockOwnerDeletion, which clusters with the
# OwnerReferencesPermissionEnforcement admission plugin only allow with update on the owner's finalizers.
- apiGroups: ["inferscale.dev"]
  resources: ["inferenceservices/finalizers"]
  verbs: ["update"]
{{- end }}
# Application: pod creation and Ready times measure time-to-ready; Pending pods count as supply and, when
# unschedulable for lack of GPUs, set CapacityBlocked. Read only.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
{{- if .Values.podDeletionCost }}
# Application: before a scale-down, set controller.kubernetes.io/pod-deletion-cost on the target's Ready pods
# (the requests each holds), so the ReplicaSet removes the idlest. Patch only: no create, no delete; the
# chart's ValidatingAdmissionPolicy refuses a patch of anything but the two deletion-cost annotations.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["patch"]
{{- end }}
# Application: refuse to fight another autoscaler - an HPA on the same target sets Conflict instead of a
# second writer of replicas. List only.
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["list"]
# Application: the same for KEDA ScaledObjects (which drive an HPA of their own). Where KEDA is not
# installed the list is a 404, which means "no conflict".
- apiGroups: ["keda.sh"]
  resources: ["scaledobjects"]
  verbs: ["list"]
# Framework and application: an Event per scale action and per problem (kopf and the operator post core/v1
# Events; neither patches them).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}

{{/* Share of requests slower than the TTFT target, from the engine's own histogram (TTFT = queue + prefill).
Each engine's ratio is its own: a sum over both would divide vLLM's fast requests by SGLang pods' counts too,
and an SGLang without a bucket at the target gives no ratio (InferenceTTFTSLOUnmeasured says so). */}}
{{- define "inferscale.ttftBadRatio" -}}
(
  (
    1 - (
      sum by (namespace, model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="{{ .le }}"}[{{ .window }}]))
      /
      sum by (namespace, model_name) (rate(vllm:time_to_first_token_seconds_count[{{ .window }}]))
    )
  )
  or
  (
    1 - (
      sum by (namespace, model_name) (rate(sglang:time_to_first_token_seconds_bucket{le="{{ .le }}"}[{{ .window }}]))
      /
      sum by (namespace, model_name) (rate(sglang:time_to_first_token_seconds_count[{{ .window }}]))
    )
  )
)
{{- end }}

{{/* The services whose engine exports a TTFT histogram without a bucket at the target: no burn rate exists
for them. */}}
{{- define "inferscale.ttftUnmeasured" -}}
(
  count by (namespace, model_name) (vllm:time_to_first_token_seconds_count)
  unless
  count by (namespace, model_name) (vllm:time_to_first_token_seconds_bucket{le="{{ .le }}"})
)
or
(
  count by (namespace, model_name) (sglang:time_to_first_token_seconds_count)
  unless
  count by (namespace, model_name) (sglang:time_to_first_token_seconds_bucket{le="{{ .le }}"})
)
{{- end }}

{{- define "inferscale.leaseRules" -}}
# Leader election: create the Lease the replicas compete for (create cannot be narrowed to a name: the object
# does not exist yet).
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
# Leader election: read and renew (or take over, or release) that one Lease, and no other.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: [{{ include "inferscale.fullname" . | quote }}]
  verbs: ["get", "patch"]
{{- end }}
